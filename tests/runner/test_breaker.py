"""The breaker and a person's hand on it: each transition of the brief, over HTTP."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support import StepClock, make_job, posts

from runner import breaker, control, jobs, runs
from runner.breaker import Control
from runner.errors import AuthError
from runner.jobs import Job
from runner.providers import Answer
from runner.sim import Simulator
from runner.states import BreakerState, FailureKind, ItemState
from runner.store import Store

ALWAYS_500 = {"rules": [{"fault": "http_500"}]}


class Watch:
    """What the store said of the breaker each time a request arrived, and how many were in flight."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.seen: list[tuple[str, int]] = []
        self.sim: Simulator | None = None

    def __call__(self, ids: list[str]) -> None:
        assert self.sim is not None
        with sqlite3.connect(self.db) as conn:
            (state,) = conn.execute("SELECT breaker FROM runs").fetchone()
        self.seen.append((state, self.sim.ledger.snapshot()["in_flight"]))


@pytest.fixture
def watched(tmp_path: Path) -> Iterator[tuple[Simulator, Watch]]:
    watch = Watch(tmp_path / "runs.db")
    with Simulator(on_request=watch).start() as sim:
        watch.sim = sim
        yield sim, watch


def job_of(tmp_path: Path, sim: Simulator, count: int = 40) -> Job:
    return make_job(tmp_path, sim.base_url, posts(count, groups=4), max_items=5, concurrency=2, request_retries=1)


async def test_one_final_transport_failure_probes_until_a_success_closes_it(
    tmp_path: Path, watched: tuple[Simulator, Watch], store: Store, clock: StepClock
) -> None:
    sim, watch = watched
    sim.set_faults({"rules": [{"fault": "http_500", "times": 2}]})
    job = make_job(tmp_path, sim.base_url, posts(5), concurrency=2, request_retries=1)
    outcome = await runs.execute(store, job, clock=clock)
    assert watch.seen == [(BreakerState.CLOSED, 1), (BreakerState.CLOSED, 1), (BreakerState.PROBING, 1)]
    assert outcome.status["counts"][ItemState.COMPLETED] == 5
    assert outcome.status["breaker"] == {"state": BreakerState.CLOSED, "reason": None}


async def test_a_second_consecutive_final_transport_failure_opens_the_breaker(
    tmp_path: Path, watched: tuple[Simulator, Watch], store: Store, clock: StepClock
) -> None:
    sim, _ = watched
    sim.set_faults(ALWAYS_500)
    outcome = await runs.execute(store, job_of(tmp_path, sim), clock=clock)
    assert sim.ledger.snapshot()["requests"] == 4
    assert outcome.exit_code == 4
    assert outcome.status["breaker"]["state"] == BreakerState.OPEN
    assert outcome.status["breaker"]["reason"].startswith("2 consecutive transport failures, last: 500")
    assert outcome.status["counts"][ItemState.FAILED] == 0
    assert outcome.status["counts"][ItemState.WAITING] == 10


async def test_a_restart_does_not_resume_an_open_breaker(
    tmp_path: Path, watched: tuple[Simulator, Watch], store: Store, clock: StepClock
) -> None:
    sim, _ = watched
    sim.set_faults(ALWAYS_500)
    await runs.execute(store, job_of(tmp_path, sim), clock=clock)
    sim.set_faults(None)
    again = await runs.execute(store, job_of(tmp_path, sim), clock=clock)
    assert sim.ledger.snapshot()["requests"] == 4
    assert (again.exit_code, again.status["breaker"]["state"]) == (4, BreakerState.OPEN)


async def test_resuming_probes_one_batch_at_a_time_until_one_succeeds(
    tmp_path: Path, watched: tuple[Simulator, Watch], store: Store, clock: StepClock
) -> None:
    sim, watch = watched
    sim.set_faults(ALWAYS_500)
    await runs.execute(store, job_of(tmp_path, sim), clock=clock)
    sim.set_faults(None)
    watch.seen.clear()
    assert control.resume(store, "test", now=clock.now()).breaker == BreakerState.PROBING
    outcome = await runs.execute(store, job_of(tmp_path, sim), clock=clock)
    assert watch.seen[0] == (BreakerState.PROBING, 1)
    assert {in_flight for state, in_flight in watch.seen if state == BreakerState.PROBING} == {1}
    assert outcome.status["counts"][ItemState.COMPLETED] == 40
    assert outcome.status["breaker"]["state"] == BreakerState.CLOSED


def test_an_open_breaker_keeps_the_reason_it_opened_for() -> None:
    opened = breaker.opened(Control(), "billing: 429 insufficient_quota")
    later = breaker.after_transport_failure(opened, "503 server_is_overloaded")
    assert (later.breaker, later.reason, later.transport_failures) == (BreakerState.OPEN, opened.reason, 1)


def test_the_breaker_gives_concurrency_slots_closed_one_probing_none_open() -> None:
    assert [Control(breaker=s).slots(3) for s in BreakerState] == [3, 1, 0]
    assert Control(paused=True).slots(3) == 0
    assert Control(paused=True, steps=1).slots(3) == Control(breaker=BreakerState.OPEN, steps=2).slots(3) == 1


async def test_step_lets_exactly_one_batch_run_and_the_run_stays_paused(
    tmp_path: Path, sim: Simulator, store: Store, clock: StepClock
) -> None:
    runs.prepare(store, job_of(tmp_path, sim), now=clock.now())
    control.pause(store, "test", now=clock.now())
    control.step(store, "test", now=clock.now())
    outcome = await runs.execute(store, job_of(tmp_path, sim), clock=clock)
    assert call_count(sim) == 1
    assert outcome.exit_code == 4 and outcome.stopped_for == "paused by a person"
    assert outcome.status["counts"][ItemState.COMPLETED] == 5
    assert store.control(store.run_id("test")) == Control(paused=True, steps=0)


def test_step_is_refused_on_a_run_that_is_not_held(tmp_path: Path, sim: Simulator, store: Store) -> None:
    runs.prepare(store, job_of(tmp_path, sim), now=1.0)
    with pytest.raises(Exception, match="not paused and its breaker is not open"):
        control.step(store, "test", now=1.0)


async def test_a_pause_from_another_connection_stops_new_batches(
    tmp_path: Path, store: Store, clock: StepClock
) -> None:
    def pause_from_elsewhere(ids: list[str]) -> None:
        with Store(store.path) as other:
            control.pause(other, "test", now=clock.now())

    with Simulator(on_request=pause_from_elsewhere).start() as sim:
        outcome = await runs.execute(store, job_of(tmp_path, sim), clock=clock)
    assert call_count(sim) <= 2
    assert outcome.stopped_for == "paused by a person"
    assert outcome.status["counts"][ItemState.PENDING] >= 30


class ResumingClock(StepClock):
    """A clock whose third idle wait is when a person resumes the run from elsewhere."""

    def __init__(self, db: Path) -> None:
        super().__init__()
        self.db, self.waits = db, 0

    async def sleep(self, seconds: float) -> None:
        self.waits += 1
        if self.waits == 3:
            with Store(self.db) as other:
                control.resume(other, "test", now=self.time)
        await super().sleep(seconds)


async def test_an_engine_waiting_for_a_person_obeys_resume(tmp_path: Path, sim: Simulator, store: Store) -> None:
    runs.prepare(store, job_of(tmp_path, sim), now=1.0)
    control.pause(store, "test", now=1.0)
    clock = ResumingClock(store.path)
    outcome = await runs.execute(store, job_of(tmp_path, sim), clock=clock, wait_for_person=True)
    assert call_count(sim) == 8
    assert outcome.exit_code == 0


FAIL_RECEIVED_WRITES = """
CREATE TRIGGER simulated_disk_failure BEFORE UPDATE OF state ON items WHEN NEW.state = 'received'
BEGIN SELECT RAISE(ABORT, 'disk I/O error (simulated)'); END
"""


async def test_a_failed_store_write_opens_the_breaker_and_no_batch_starts_after_it(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    runs.prepare(store, job_of(tmp_path, sim), now=1.0)
    with sqlite3.connect(store.path) as conn:
        conn.execute(FAIL_RECEIVED_WRITES)
    job = make_job(tmp_path, sim.base_url, posts(40, groups=4), max_items=5, concurrency=1)
    outcome = await runs.execute(store, job)
    assert call_count(sim) == 1
    assert outcome.exit_code == 4 and outcome.stop_kind == FailureKind.STORE
    assert outcome.status["breaker"]["state"] == BreakerState.OPEN
    assert "disk I/O error (simulated)" in outcome.status["breaker"]["reason"]
    assert outcome.status["breaker"]["reason"].startswith("store: ")
    assert outcome.status["counts"][ItemState.RUNNING] == 5


class RefusedFirst:
    """An upstream that refuses the key for p000 once told to (``land``), and answers every other batch."""

    def __init__(self) -> None:
        self.calls = list[list[str]]()
        self._refuse = asyncio.Event()
        #: Called with the keys of every batch answered.
        self.answered: Callable[[list[str]], None] = lambda keys: None

    async def call(self, payloads: list[dict[str, Any]]) -> Answer:
        keys = [p["id"] for p in payloads]
        self.calls.append(keys)
        if keys == ["p000"]:
            await self._refuse.wait()
            raise AuthError("401 invalid_api_key: key refused")
        self.answered(keys)
        return Answer(json.dumps({"results": [{"id": k, "label": "x"} for k in keys]}), "stop")

    def land(self) -> None:
        """Let the refusal come back: its slot goes on before any task created after this call."""
        self._refuse.set()


async def test_no_batch_starts_after_a_refused_key_that_lands_before_a_new_slot_begins(
    tmp_path: Path, store: Store, clock: StepClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slot's 401 lands after a turn gave a batch to a new slot, before that slot began: it is never sent."""
    upstream, armed = RefusedFirst(), asyncio.Event()
    job = make_job(tmp_path, "http://127.0.0.1:9/v1", posts(2), max_items=1, concurrency=2, request_retries=0)

    def add_a_record(keys: list[str]) -> None:  # meanwhile a notebook adds a record: a turn will form its batch
        more = make_job(tmp_path, "http://127.0.0.1:9/v1", posts(3), max_items=1, concurrency=2)
        with Store(store.path) as other:
            other.prepare_run(more, jobs.items(more), now=clock.now())
        armed.set()

    upstream.answered = add_a_record
    claim = Store.claim_batch

    def claim_as_the_401_lands(self: Store, *args: Any, **kwargs: Any) -> Any:
        formed = claim(self, *args, **kwargs)
        if armed.is_set() and formed is not None:  # the turn that forms p002's batch, then gives it a slot
            armed.clear()
            upstream.land()
        return formed

    monkeypatch.setattr(Store, "claim_batch", claim_as_the_401_lands)
    outcome = await runs.execute(store, job, provider=upstream, clock=clock)
    assert outcome.stop_kind is FailureKind.AUTH and outcome.status["breaker"]["state"] == BreakerState.OPEN
    assert upstream.calls == [["p000"], ["p001"]]
    (p002,) = store.rows("SELECT state, attempts, batch_id FROM items WHERE key = 'p002'")
    assert p002 == {"state": "pending", "attempts": 0, "batch_id": None}


def call_count(sim: Simulator) -> int:
    return int(sim.ledger.snapshot()["requests"])
