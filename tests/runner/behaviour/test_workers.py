"""Several workers on one run (issue 20): ``runner run NAME`` started again on the same store joins the run.

Workers in one event loop, each with a connection of its own to one store
(as processes would be), against one simulator, which counts the requests in
flight at once and bills each item; the SIGKILL trial runs real ``runner run``
processes. Each runs on a SQLite file and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from scenes import engine_row, location_of, reopened
from support import PATIENCE, ROOT, Paced, Requests, StepClock, make_job, posts, runner_cli, until, write_jsonl

from runner import control, lease, liveness, preparing, recovery, runs
from runner.engine import Engine
from runner.errors import RunError
from runner.jobs import Job
from runner.model import BreakerState, FailureKind, ItemState
from runner.sim import Simulator
from runner.store import Store, views

WORKERS = 3


async def together(store: Store, job: Job, *, clock: StepClock | None = None) -> list[runs.Outcome]:
    """``WORKERS`` engines on ``job``'s one run at once, each with a store connection of its own."""
    stores = [store, *(reopened(store) for _ in range(WORKERS - 1))]
    try:
        return list(await asyncio.gather(*(runs.execute(s, job, clock=clock) for s in stores)))
    finally:
        for other in stores[1:]:
            other.close()


async def test_three_workers_on_one_run_never_have_more_than_its_concurrency_in_flight_and_bill_each_item_once(
    tmp_path: Path, store: Store
) -> None:
    with Simulator(latency=0.05).start() as sim:
        job = make_job(tmp_path, sim.base_url, posts(90), max_items=2, concurrency=3)
        outcomes = await together(store, job)  # on the wall's clock
        ledger = sim.ledger.snapshot()
    assert ledger["max_in_flight"] == 3
    assert ledger["billed"] == {f"p{i:03d}": 1 for i in range(90)}
    assert [outcome.exit_code for outcome in outcomes] == [0] * WORKERS
    assert views.standing(store, "test", now=0.0).counts[ItemState.COMPLETED] == 90


def owners(store: Store) -> dict[str, int]:
    """How many batches each worker started (by the token that owns them)."""
    return collections.Counter(batch["owner"] for batch in views.batches(store, store.run_id("test"))
                               if batch["started_at"] is not None)


async def test_a_worker_alone_holds_all_of_the_run_concurrency(tmp_path: Path, store: Store) -> None:
    with Simulator(latency=0.05).start() as sim:
        job = make_job(tmp_path, sim.base_url, posts(40), max_items=2, concurrency=4)
        outcome = await runs.execute(store, job)
        ledger = sim.ledger.snapshot()
    assert outcome.exit_code == 0 and ledger["max_in_flight"] == 4
    assert ledger["billed"] == {f"p{i:03d}": 1 for i in range(40)}


async def test_a_worker_holding_all_of_the_concurrency_leaves_a_fair_share_to_one_that_joins(
    tmp_path: Path, store: Store
) -> None:
    with Simulator(latency=0.1).start() as sim:
        job = make_job(tmp_path, sim.base_url, posts(120), max_items=2, concurrency=4)
        first = asyncio.create_task(runs.execute(store, job))
        deadline = time.monotonic() + PATIENCE
        while sim.ledger.snapshot()["in_flight"] < 4:  # the first alone has all of C in flight
            assert time.monotonic() < deadline and not first.done()
            await asyncio.sleep(0.01)
        with reopened(store) as other:
            outcomes = [*await asyncio.gather(runs.execute(other, job), first)]
        ledger = sim.ledger.snapshot()
    assert ledger["max_in_flight"] == 4
    assert ledger["billed"] == {f"p{i:03d}": 1 for i in range(120)}
    assert [outcome.exit_code for outcome in outcomes] == [0, 0]
    assert len(owners(store)) == 2 and min(owners(store).values()) > 1


async def test_a_worker_forms_no_more_batches_ahead_than_its_share_once_another_joins(
    tmp_path: Path, store: Store
) -> None:
    engines: list[Engine] = []
    ahead: list[int] = []  # at each call once the second worker began: batches the first has formed ahead

    def note(ids: list[str]) -> None:
        if len(engines) == 2 and engines[1].holding:
            ahead.append(len(engines[0].formed))

    with Simulator(latency=0.1, on_request=note).start() as sim:
        job = make_job(tmp_path, sim.base_url, posts(160), max_items=2, concurrency=4)
        first = asyncio.create_task(runs.execute(store, job, started=engines.append))
        deadline = time.monotonic() + PATIENCE
        while sim.ledger.snapshot()["in_flight"] < 4:  # the first alone has all of C in flight, and as many ahead
            assert time.monotonic() < deadline and not first.done()
            await asyncio.sleep(0.01)
        alone = len(engines[0].formed)
        with reopened(store) as other:
            outcomes = [*await asyncio.gather(runs.execute(other, job, started=engines.append), first)]
    assert [outcome.exit_code for outcome in outcomes] == [0, 0]
    assert alone == 4 and len(ahead) > 10
    assert max(ahead[len(ahead) // 2:]) <= 2  # its share, once the batches it formed alone have started


async def test_a_step_lets_one_batch_run_for_all_the_workers_of_a_paused_run_together(
    tmp_path: Path, store: Store
) -> None:
    with Simulator().start() as sim:
        job = make_job(tmp_path, sim.base_url, posts(20), max_items=2, concurrency=3)
        runs.prepare(store, job, now=1.0)
        control.pause(store, "test", now=2.0)
        control.step(store, "test", now=3.0)
        outcomes = await together(store, job, clock=StepClock())
        requests = sim.ledger.snapshot()["requests"]
    assert requests == 1
    assert outcomes[0].status["counts"][ItemState.COMPLETED] == 2 and store.control(store.run_id("test")).steps == 0


async def test_a_429_one_worker_saw_holds_back_every_worker_of_the_run_until_its_retry_after(
    tmp_path: Path, store: Store
) -> None:
    clock = Paced()
    requests = Requests(clock)
    faults = {"rules": [{"fault": "http_429", "times": 1, "keys": ["p010"], "retry_after": 8}]}
    with Simulator(on_request=requests, faults=faults).start() as sim:
        job = make_job(tmp_path, sim.base_url, posts(40), max_items=2, concurrency=1, request_retries=0)
        outcomes = await together(store, job, clock=clock)
    (refused_at,) = [at for at, ids in requests.seen if "p010" in ids][:1]
    after = [at for at, _ in requests.seen if at > refused_at]
    assert after and min(after) >= refused_at + 8
    assert [outcome.status["counts"][ItemState.COMPLETED] for outcome in outcomes] == [40] * WORKERS


async def test_a_worker_that_joins_before_a_dead_workers_heartbeat_expires_takes_its_batches_over_once_it_does(
    tmp_path: Path, store: Store
) -> None:
    clock = StepClock()
    died_at = clock.now() - 1  # a worker on another machine beat a second ago, then died
    requests = Requests(clock)
    with Simulator(on_request=requests).start() as sim:
        job = make_job(tmp_path, sim.base_url, posts(10), max_items=2, concurrency=2)
        run_id = runs.prepare(store, job, now=died_at)
        engine_row(store, "test", "dead", pid=999_999, host="elsewhere", started_at=died_at, heartbeat_at=died_at)
        formed, sent = (store.claim_batch(run_id, max_items=2, max_chars=10**6, now=died_at, owner="dead")
                        for _ in range(2))
        assert formed is not None and sent is not None
        store.start_batch(sent.id, lease=("test", "dead"), max_attempts=3, now=died_at)  # its call may have gone
        # It joins (the dead one seems alive): no setup, no recovery then.
        outcome = await asyncio.wait_for(runs.execute(store, job, clock=clock), PATIENCE)
    first_of_the_formed = min(at for at, ids in requests.seen if {"p000", "p001"} & set(ids))
    assert died_at + liveness.LEASE_SECONDS <= first_of_the_formed <= died_at + liveness.LEASE_SECONDS + 5
    assert outcome.exit_code == 4 and {item.key for item in recovery.held(store, "test")} == {"p002", "p003"}
    assert outcome.status["counts"][ItemState.COMPLETED] == 8 and store.workers("test") == []


class InPairs:
    """The simulator's hook that holds each of the first ``held`` calls (all: None) until another arrived, and lets
    the two go together; the others pass."""

    def __init__(self, held: int | None = None) -> None:
        self.pair = threading.Barrier(2, timeout=PATIENCE)
        self.held = held
        self.calls = 0
        self._count = threading.Lock()

    def __call__(self, ids: list[str]) -> None:
        with self._count:
            self.calls += 1
            paired = self.held is None or self.calls <= self.held
        if paired:
            self.pair.wait()


async def test_the_breaker_counts_transport_failures_in_a_row_across_the_workers_of_a_run(
    tmp_path: Path, store: Store
) -> None:
    """Each of two workers (C = 2: a share of one each) has a call in flight; both fail together, one failure, the
    run's breaker probing; the one probe of the run, whichever worker sends it, fails: open, for both."""
    with Simulator(on_request=(hook := InPairs(held=2)), faults={"rules": [{"fault": "http_500"}]}).start() as sim:
        job = make_job(tmp_path, sim.base_url, posts(20), max_items=2, concurrency=2, request_retries=0)
        with reopened(store) as other:
            clock = Paced()
            outcomes = await asyncio.gather(*(runs.execute(s, job, clock=clock) for s in (store, other)))
    assert hook.calls == 3
    assert [outcome.exit_code for outcome in outcomes] == [4, 4]
    control = store.control(store.run_id("test"))
    assert (control.breaker, control.transport_failures) == (BreakerState.OPEN, 2)
    assert control.reason is not None and control.reason.startswith("2 consecutive transport failures, last: 500")


async def test_three_answers_of_the_run_in_a_row_every_result_invalid_for_one_reason_stop_it_whichever_workers_got_them(
    tmp_path: Path, store: Store
) -> None:
    """Two workers (C = 2: a call in flight each) get answers whose every result lacks its label, two at a time:
    the first two are two of the run's streak, and the next two stop it (the second of them in flight already).
    Counted per worker, each would have stopped at its own third: six calls paid, not four."""
    with Simulator(on_request=(hook := InPairs())).start() as sim:
        job = make_job(tmp_path, sim.base_url, posts(20), max_items=2, concurrency=2,
                       check=lambda result: "result has no label")
        with reopened(store) as other:
            clock = Paced()
            outcomes = await asyncio.gather(*(runs.execute(s, job, clock=clock) for s in (store, other)))
    assert hook.calls == 4 and sorted(owners(store).values()) == [2, 2]
    assert [(outcome.exit_code, outcome.stop_kind) for outcome in outcomes] == [(4, FailureKind.ITEM_INVALID)] * 2
    control = store.control(store.run_id("test"))
    assert (control.breaker, control.kind) == (BreakerState.OPEN, FailureKind.ITEM_INVALID)
    assert control.reason == ("item_invalid: result has no label (every result of 4 answers in a row: the job and the "
                              "model disagree)")


def test_status_shows_each_worker_and_what_it_holds_when_several_work_the_run(tmp_path: Path, store: Store) -> None:
    run_id = runs.prepare(store, make_job(tmp_path, "http://127.0.0.1:9/v1", posts(10)), now=time.time())
    for token in ("first", "second"):
        lease.join(store, "test", token=token, now=time.time())
    store.claim_batch(run_id, max_items=4, max_chars=10**6, now=time.time(), owner="first")
    shown = json.loads(runner_cli("status", "test", "--json", "--db", location_of(store), cwd=tmp_path).stdout)
    text = runner_cli("status", "test", "--db", location_of(store), cwd=tmp_path).stdout
    assert [(w["pid"], w["alive"], w["batches"], w["items"]) for w in shown["workers"]] == [
        (os.getpid(), True, 1, 4), (os.getpid(), True, 0, 0)]
    assert "engine alive (2 workers)" in text and "run test: 2 workers" in text


def test_a_worker_whose_run_ends_while_another_still_runs_it_says_so_in_its_final_table(
    tmp_path: Path, store: Store, sim: Simulator
) -> None:
    runs.prepare(store, make_job(tmp_path, sim.base_url, posts(6)), now=time.time())
    lease.join(store, "test", token="still at work", now=time.time())  # a worker of this very process: alive
    store.end_setup("test", token="still at work")
    ended = runner_cli("run", "test", cwd=tmp_path)
    assert ended.returncode == 0, ended.stderr
    assert "engine alive: another worker still runs it" in ended.stdout
    assert views.standing(store, "test", now=time.time()).counts[ItemState.COMPLETED] == 6


def test_a_worker_started_by_name_while_another_reads_the_input_waits_for_the_run_and_joins_it(
    tmp_path: Path, store: Store, sim: Simulator
) -> None:
    lease.join(store, "test", token="reading", now=time.time())  # a worker of this very process, reading its input
    second = runner_process("run", "test", "--no-wait", cwd=tmp_path)
    assert second.stderr is not None
    assert second.stderr.readline().startswith(f"run 'test' is being set up by another worker (pid {os.getpid()} ")
    preparing.prepare(store, make_job(tmp_path, sim.base_url, posts(6)), lease_token="reading", now=time.time)
    store.end_setup("test", token="reading")
    lease.release(store, "test", token="reading")
    _, said = second.communicate(timeout=PATIENCE)
    assert second.returncode == 0, said
    assert sim.ledger.snapshot()["billed"] == {f"p{i:03d}": 1 for i in range(6)}


def test_a_run_by_name_that_no_worker_is_setting_up_is_refused_at_once(tmp_path: Path, store: Store) -> None:
    refused = runner_cli("run", "test", cwd=tmp_path)
    assert refused.returncode == 1 and refused.stderr.startswith("error: no run named 'test' in ")
    assert refused.stderr.endswith(" (runs: none)\n") and refused.stderr.count("\n") == 1


async def test_a_worker_whose_job_differs_from_the_one_its_run_is_worked_with_is_refused_as_it_joins(
    tmp_path: Path, store: Store
) -> None:
    clock = StepClock()
    job = make_job(tmp_path, "http://127.0.0.1:9/v1", posts(4))
    runs.prepare(store, job, now=clock.now())
    lease.join(store, "test", token="at work", now=clock.now())
    store.end_setup("test", token="at work")
    edited = dataclasses.replace(job, prompt=dataclasses.replace(job.prompt, instructions="Something else."))
    with pytest.raises(RunError, match="^run 'test' is being run by other workers with a different job; join them"):
        await runs.execute(store, edited, clock=clock)
    assert [worker.token for worker in store.workers("test")] == ["at work"]
    assert views.standing(store, "test", now=clock.now()).counts[ItemState.PENDING] == 4


CREW = """name = "crew"
input = "posts.jsonl"
[batch]
max_items = 2
concurrency = 3
[provider]
base_url = "{base_url}"
timeout = 60
"""


class HoldTheFirstCall:
    """The simulator's hook that holds the first call (the victim's) until ``release``, and the others until
    ``joined``: nothing is answered before every worker has joined, however slowly their processes start."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.arrived, self.release, self.joined = threading.Event(), threading.Event(), threading.Event()
        self._first = threading.Lock()

    def __call__(self, ids: list[str]) -> None:
        with self._first:
            first = not self.ids
            if first:
                self.ids = list(ids)
        if first:
            self.arrived.set()
        assert (self.release if first else self.joined).wait(timeout=PATIENCE)


def runner_process(*args: str, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "runner", *args], cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_a_worker_killed_mid_batch_leaves_its_sent_items_held_and_the_others_finish_every_other_item(
    tmp_path: Path, store: Store
) -> None:
    write_jsonl(tmp_path / "posts.jsonl", posts(60))
    with Simulator(latency=0.2, on_request=(hook := HoldTheFirstCall())).start() as sim:
        (tmp_path / "job.toml").write_text(CREW.format(base_url=sim.base_url))
        victim = runner_process("run", "job.toml", cwd=tmp_path)
        assert hook.arrived.wait(timeout=PATIENCE), victim.communicate()  # the victim's first batch is in flight, held
        others = [runner_process("run", "job.toml", cwd=tmp_path) for _ in range(2)]
        until(location_of(store), "crew", lambda standing: len(standing.workers) == 3)
        hook.joined.set()
        victim.send_signal(signal.SIGKILL)
        victim.communicate(timeout=PATIENCE)
        hook.release.set()  # its call goes on upstream, billed, its answer lost with the victim
        ended = [other.communicate(timeout=PATIENCE) for other in others]
        after_the_kill = views.standing(store, "crew", now=0.0)
        held = {item.key for item in recovery.held(store, "crew")}
        assert [other.returncode for other in others] == [4, 4], ended  # held items wait for a person
        assert set(hook.ids) <= held and after_the_kill.counts[ItemState.COMPLETED] == 60 - len(held)
        confirmed = runner_cli("confirm", "crew", "--all", "--yes", cwd=tmp_path)
        assert "twice" in confirmed.stdout, confirmed.stdout
        last = runner_process("run", "job.toml", cwd=tmp_path)
        _, last_err = last.communicate(timeout=PATIENCE)
        ledger = sim.ledger.snapshot()
    assert last.returncode == 0, last_err
    assert views.standing(store, "crew", now=0.0).counts[ItemState.COMPLETED] == 60
    assert ledger["max_in_flight"] <= 3
    assert {key for key, times in ledger["billed"].items() if times > 1} <= held  # each said by confirm
    assert set(ledger["billed"]) == {f"p{i:03d}" for i in range(60)}
