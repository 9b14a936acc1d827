"""The breaker and a person's hand on it: each transition of the brief, over HTTP.

The transitions and the slots they give, without HTTP, are in ``rules/test_transitions.py`` and ``rules/test_gate.py``.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from scenes import location_of, received_writes_fail, reopened
from support import StepClock, add_all, make_job, posts

from runner import control, runs
from runner.protocol import BatchItems
from runner.breaker import Control
from runner.engine import Engine, Outcome
from runner.errors import AuthError, BillingError, TransportError, UpstreamError
from runner.jobs import Job
from runner.providers import Answer
from runner.providers.handler import PythonHandler
from runner.sim import Simulator
from runner.model import BreakerState, FailureKind, ItemState
from runner.store import Store, views

ALWAYS_500 = {"rules": [{"fault": "http_500"}]}


URL = "http://127.0.0.1:9/v1"


class Watch:
    """What the store said of the breaker each time a request arrived, and how many were in flight.

    With ``together`` (a barrier of N), the first N requests are answered
    only once all N have arrived: those calls are surely in flight at once,
    however slow the machine.
    """

    def __init__(self, db: Path | str) -> None:
        self.db = db
        self.seen: list[tuple[str, int]] = []
        self.sim: Simulator | None = None
        self.together: threading.Barrier | None = None

    def __call__(self, ids: list[str]) -> None:
        assert self.sim is not None
        with Store(self.db, read_only=True) as store:
            state = views.status(store, "test", now=0.0)["breaker"]["state"]
        self.seen.append((state, self.sim.ledger.snapshot()["in_flight"]))
        if self.together is not None and len(self.seen) <= self.together.parties:
            self.together.wait()


@pytest.fixture
def watched(store: Store) -> Iterator[tuple[Simulator, Watch]]:
    watch = Watch(location_of(store))
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
    """The two batches in flight at once fail together: one failure, probing; the probe started after it fails: open."""
    sim, watch = watched
    watch.together = threading.Barrier(2, timeout=60)
    sim.set_faults(ALWAYS_500)
    outcome = await runs.execute(store, job_of(tmp_path, sim), clock=clock)
    assert sim.ledger.snapshot()["requests"] == 6
    assert watch.seen[4:] == [(BreakerState.PROBING, 1)] * 2  # the probe (and its request retry), alone
    assert outcome.exit_code == 4
    assert outcome.status["breaker"]["state"] == BreakerState.OPEN
    assert outcome.status["breaker"]["reason"].startswith("2 consecutive transport failures, last: 500")
    assert outcome.status["counts"][ItemState.FAILED] == 0
    assert outcome.status["counts"][ItemState.WAITING] == 15


async def test_batches_in_flight_together_failing_at_once_count_as_one_failure_and_the_probe_closes_it(
    tmp_path: Path, watched: tuple[Simulator, Watch], store: Store, clock: StepClock
) -> None:
    """A sick moment fails every call in flight (four here, none retried): probing, not open; the probe succeeds."""
    sim, watch = watched
    sim.set_faults({"rules": [{"fault": "http_500", "times": 4}]})
    job = make_job(tmp_path, sim.base_url, posts(40), max_items=5, concurrency=4, request_retries=0)
    outcome = await runs.execute(store, job, clock=clock)
    assert watch.seen[4] == (BreakerState.PROBING, 1)  # the probe, alone
    assert outcome.exit_code == 0
    assert outcome.status["counts"][ItemState.COMPLETED] == 40


async def test_a_restart_does_not_resume_an_open_breaker(
    tmp_path: Path, watched: tuple[Simulator, Watch], store: Store, clock: StepClock
) -> None:
    sim, _ = watched
    sim.set_faults(ALWAYS_500)
    await runs.execute(store, job_of(tmp_path, sim), clock=clock)
    sim.set_faults(None)
    again = await runs.execute(store, job_of(tmp_path, sim), clock=clock)
    assert sim.ledger.snapshot()["requests"] == 6
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
        with reopened(store) as other:
            control.pause(other, "test", now=clock.now())

    with Simulator(on_request=pause_from_elsewhere).start() as sim:
        outcome = await runs.execute(store, job_of(tmp_path, sim), clock=clock)
    assert call_count(sim) <= 2
    assert outcome.stopped_for == "paused by a person"
    assert outcome.status["counts"][ItemState.PENDING] >= 30


class ResumingClock(StepClock):
    """A clock whose third idle wait is when a person resumes the run from elsewhere."""

    def __init__(self, db: Path | str) -> None:
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
    clock = ResumingClock(location_of(store))
    outcome = await runs.execute(store, job_of(tmp_path, sim), clock=clock, wait_for_person=True)
    assert call_count(sim) == 8
    assert outcome.exit_code == 0


class CtrlC:
    """The simulator's hook: at the first call, the engine is asked to stop, as one Ctrl-C does."""

    def __init__(self) -> None:
        self.engines: list[Engine] = []
        self.loop = asyncio.get_running_loop()

    def __call__(self, ids: list[str]) -> None:
        for engine in self.engines:
            self.loop.call_soon_threadsafe(engine.request_stop, "interrupted by Ctrl-C")
        self.engines.clear()


async def waiting_run(tmp_path: Path, store: Store, fault: str, *, ctrl_c: CtrlC | None = None) -> Outcome:
    """40 posts, one batch at a time, waiting for a person who resumes on its third idle wait; the first call fails."""
    with Simulator(faults={"rules": [{"fault": fault, "times": 1}]}, on_request=ctrl_c).start() as sim:
        job = make_job(tmp_path, sim.base_url, posts(40, groups=4), max_items=5, concurrency=1)
        return await runs.execute(store, job, clock=ResumingClock(location_of(store)), wait_for_person=True,
                                  started=ctrl_c.engines.append if ctrl_c else None)


async def test_an_engine_waiting_for_a_person_waits_out_a_stop_that_opened_the_breaker(
    tmp_path: Path, store: Store
) -> None:
    outcome = await waiting_run(tmp_path, store, "http_402")  # out of credit: the run stops, the breaker opens
    assert (outcome.stopped_for, outcome.stop_kind, outcome.exit_code) == (None, None, 3)
    assert outcome.status["counts"][ItemState.FAILED] == 5 and outcome.status["counts"][ItemState.COMPLETED] == 35
    assert [command["command"] for command in views.command_tail(store, store.run_id("test"), limit=5)] == ["resume"]


async def test_a_refused_key_ends_the_run_even_while_waiting_for_a_person(tmp_path: Path, store: Store) -> None:
    outcome = await waiting_run(tmp_path, store, "http_401")  # the key is read once: no resume can fix it
    assert (outcome.stop_kind, outcome.exit_code) == (FailureKind.AUTH, 1)
    assert outcome.status["counts"][ItemState.PENDING] == 35


async def never_called(payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    raise AssertionError("no call is made")


def test_a_stop_asked_for_after_a_verdict_keeps_the_verdicts_reason_and_kind(tmp_path: Path, store: Store) -> None:
    engine = Engine(store, make_job(tmp_path, "http://127.0.0.1:9/v1", posts(1)), PythonHandler(never_called))
    engine.stop_for_person("billing: out of credit", FailureKind.BILLING)
    engine.request_stop("interrupted by Ctrl-C")  # the person's next step is still to fix the billing
    assert (engine.stopped_for, engine.stop_kind) == ("billing: out of credit", FailureKind.BILLING)


async def test_a_stop_asked_for_is_not_waited_out_when_a_verdict_then_opens_the_breaker(
    tmp_path: Path, store: Store
) -> None:
    outcome = await waiting_run(tmp_path, store, "http_402", ctrl_c=CtrlC())
    assert outcome.exit_code == 4
    assert outcome.status["counts"][ItemState.PENDING] == 35, "no resume was waited for"


async def test_a_failed_store_write_opens_the_breaker_and_no_batch_starts_after_it(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    runs.prepare(store, job_of(tmp_path, sim), now=1.0)
    received_writes_fail(store)
    job = make_job(tmp_path, sim.base_url, posts(40, groups=4), max_items=5, concurrency=1)
    outcome = await runs.execute(store, job)
    assert call_count(sim) == 1
    assert outcome.exit_code == 4 and outcome.stop_kind == FailureKind.STORE
    assert outcome.status["breaker"]["state"] == BreakerState.OPEN
    assert "disk I/O error (simulated)" in outcome.status["breaker"]["reason"]
    assert outcome.status["breaker"]["reason"].startswith("store: ")
    assert outcome.status["counts"][ItemState.RUNNING] == 5


class HeldFailures:
    """An upstream whose calls for the ``failing`` keys wait for ``land``, then fail; every other call is answered.

    Each call is recorded with the breaker's state in the store as it is made
    and how many calls were out then.
    """

    def __init__(self, store: Store, failing: set[str], error: Callable[[], UpstreamError]) -> None:
        self.store, self.failing, self.error = store, failing, error
        self.calls: list[tuple[list[str], BreakerState, int]] = []
        self.out = 0
        self._land = asyncio.Event()
        #: Called with the keys of every call as it is made.
        self.called: Callable[[list[str]], None] = lambda keys: None

    @property
    def sent(self) -> list[list[str]]:
        return [keys for keys, _, _ in self.calls]

    async def call(self, items: BatchItems) -> Answer:
        keys = [p["id"] for p in items.payloads()]
        self.out += 1
        try:
            self.calls.append((keys, self.store.control(self.store.run_id("test")).breaker, self.out))
            self.called(keys)
            if keys[0] in self.failing:
                await self._land.wait()
                raise self.error()
            await asyncio.sleep(0)  # an answer takes a turn of the loop, as a real call takes a while
            return Answer(json.dumps({"results": [{"id": k, "label": "x"} for k in keys]}), "stop")
        finally:
            self.out -= 1

    def land(self) -> None:
        """Let the failures come back: their slots go on before any slot a turn creates after this call."""
        self._land.set()


async def land_before_new_slots_begin(
    tmp_path: Path, store: Store, clock: StepClock, monkeypatch: pytest.MonkeyPatch, upstream: HeldFailures,
    *, first: int, total: int, concurrency: int, add_on: str,
) -> Outcome:
    """Run ``first`` posts, one a batch. When ``add_on`` is called, a notebook adds posts up to ``total``; the
    failures land in the turn that forms the last of them, after it gave them slots and before those slots begin."""
    job = make_job(tmp_path, URL, posts(first), max_items=1, concurrency=concurrency, request_retries=0)
    added = asyncio.Event()

    def add_records(keys: list[str]) -> None:
        if keys == [add_on]:
            more = make_job(tmp_path, URL, posts(total), max_items=1, concurrency=concurrency)  # rewrites the input
            with reopened(store) as other:
                add_all(other, more, now=clock.now())
            added.set()

    upstream.called = add_records
    claim = Store.claim_batch

    def claim_and_land(self: Store, *args: Any, **kwargs: Any) -> Any:
        formed = claim(self, *args, **kwargs)
        if added.is_set() and formed is not None and not views.status(self, "test", now=0.0)["counts"]["pending"]:
            added.clear()
            upstream.land()
        return formed

    monkeypatch.setattr(Store, "claim_batch", claim_and_land)
    return await runs.execute(store, job, provider=upstream, clock=clock)


async def test_no_batch_starts_after_a_refused_key_that_lands_before_a_new_slot_begins(
    tmp_path: Path, store: Store, clock: StepClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slot's 401 lands after a turn gave a batch to a new slot, before that slot began: it is never sent."""
    upstream = HeldFailures(store, {"p000"}, lambda: AuthError("401 invalid_api_key: key refused"))
    outcome = await land_before_new_slots_begin(
        tmp_path, store, clock, monkeypatch, upstream, first=2, total=3, concurrency=2, add_on="p001"
    )
    assert outcome.stop_kind is FailureKind.AUTH and outcome.status["breaker"]["state"] == BreakerState.OPEN
    assert upstream.sent == [["p000"], ["p001"]]
    p002 = views.item(store, store.run_id("test"), "p002")
    assert p002 is not None and (p002["state"], p002["attempts"], p002["batch_id"]) == ("pending", 0, None)


async def test_a_new_slot_starts_nothing_once_the_breaker_opened_before_it_began(
    tmp_path: Path, store: Store, clock: StepClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refused balance opens the breaker between a turn giving p002 a slot and that slot's first step."""
    upstream = HeldFailures(store, {"p000"}, lambda: BillingError("429 insufficient_quota: top up"))
    outcome = await land_before_new_slots_begin(
        tmp_path, store, clock, monkeypatch, upstream, first=2, total=3, concurrency=3, add_on="p001"
    )
    assert outcome.status["breaker"]["state"] == BreakerState.OPEN
    assert upstream.sent == [["p000"], ["p001"]]


async def test_a_probing_breaker_lets_one_new_slot_begin_of_those_a_turn_gave_batches(
    tmp_path: Path, store: Store, clock: StepClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A final transport failure leaves the breaker probing just before two new slots begin: one call at a time."""
    upstream = HeldFailures(store, {"p000"}, lambda: TransportError("503 upstream sick"))
    outcome = await land_before_new_slots_begin(
        tmp_path, store, clock, monkeypatch, upstream, first=1, total=3, concurrency=3, add_on="p000"
    )
    # p002 waited for p001, the probe, whose success closed the breaker again.
    assert upstream.calls[1:3] == [(["p001"], BreakerState.PROBING, 1), (["p002"], BreakerState.CLOSED, 1)]
    assert all(out == 1 for _, state, out in upstream.calls if state is BreakerState.PROBING), upstream.calls
    assert outcome.status["counts"][ItemState.COMPLETED] == 2  # p000's upstream never answers it


def call_count(sim: Simulator) -> int:
    return int(sim.ledger.snapshot()["requests"])


class AnsweredInTurn:
    """An upstream that answers ``p005``'s batch at once and ``p000``'s only once ``p005``'s answer is saved.

    So ``p000``'s answer is put in line for the store in the turn that
    ``p005``'s slot asks to start its next batch: both are in one commit, the
    answer first.
    """

    def __init__(self) -> None:
        self.sent: list[list[str]] = []
        self.saved = asyncio.Event()

    async def call(self, items: BatchItems) -> Answer:
        keys = [p["id"] for p in items.payloads()]
        self.sent.append(keys)
        if keys[0] == "p000":
            await self.saved.wait()
        return Answer(json.dumps({"results": [{"id": k, "label": "x"} for k in keys]}), "stop")


async def test_a_failed_store_write_stops_a_start_committed_with_it_in_one_group(
    tmp_path: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The failure has not reached its slot when the next step asks whether it may start: it is not started."""
    job = make_job(tmp_path, URL, posts(30), max_items=5, concurrency=2, request_retries=0)
    runs.prepare(store, job, now=1.0)
    received_writes_fail(store, key="p000")
    upstream = AnsweredInTurn()
    record_answer = Store.record_answer

    def saved_then_release(self: Store, *args: Any, **kwargs: Any) -> Any:
        result = record_answer(self, *args, **kwargs)
        upstream.saved.set()
        return result

    monkeypatch.setattr(Store, "record_answer", saved_then_release)
    outcome = await runs.execute(store, job, provider=upstream)
    assert upstream.sent == [[f"p{i:03d}" for i in range(5)], [f"p{i:03d}" for i in range(5, 10)]]
    assert outcome.exit_code == 4 and outcome.stop_kind == FailureKind.STORE
    assert outcome.status["breaker"]["state"] == BreakerState.OPEN
    assert outcome.status["counts"][ItemState.RUNNING] == 5
    assert outcome.status["counts"][ItemState.COMPLETED] == 5
