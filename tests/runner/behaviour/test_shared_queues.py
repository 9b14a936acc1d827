"""Shared queues (issue 19): runs naming one ``[provider] queue`` share its limit, its quiet time and its breaker.

Two engines in one event loop, each with a connection of its own to one
store file (as two processes would be), against one simulator, which
counts the requests in flight at once.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest
from scenes import reopened
from support import KillAtFirstCall, Paced, Requests, StepClock, make_job, posts, write_jsonl

from runner import runs
from runner.jobs import Job
from runner.model import BreakerState, ItemState
from runner.sim import Simulator
from runner.store import Store

QUEUE = "openai-main"


def queued(tmp_path: Path, sim: Simulator, name: str, *, count: int = 20, concurrency: int = 2,
           **provider: Any) -> Job:
    """A job ``name`` over ``count`` posts keyed ``<name>000``... in the queue ``openai-main``."""
    records = [{**post, "id": f"{name}{post['id'][1:]}"} for post in posts(count)]
    job = make_job(tmp_path, sim.base_url, records, name=name, max_items=2, concurrency=concurrency,
                   request_retries=0)
    return dataclasses.replace(job, provider=dataclasses.replace(job.provider, **{"queue": QUEUE, **provider}))


async def both(store: Store, *jobs: Job, clock: StepClock | None = None) -> list[runs.Outcome]:
    """Run the jobs at once, each by an engine with a store connection of its own."""
    stores = [store, *(reopened(store) for _ in jobs[1:])]
    try:
        return list(await asyncio.gather(*(runs.execute(s, job, clock=clock) for s, job in zip(stores, jobs))))
    finally:
        for other in stores[1:]:
            other.close()


async def test_two_runs_sharing_a_queue_never_exceed_its_concurrency_together(tmp_path: Path, store: Store) -> None:
    with Simulator(latency=0.05).start() as sim:
        store.set_queue(QUEUE, concurrency=2)
        outcomes = await both(store, queued(tmp_path, sim, "a"), queued(tmp_path, sim, "b"))  # on the wall's clock
        assert sim.ledger.snapshot()["max_in_flight"] == 2  # each run alone may have two in flight
    assert [o.status["counts"][ItemState.COMPLETED] for o in outcomes] == [20, 20]


async def test_two_workers_of_one_run_and_another_run_sharing_a_queue_never_exceed_its_concurrency_together(
    tmp_path: Path, store: Store
) -> None:
    with Simulator(latency=0.1).start() as sim:
        store.set_queue(QUEUE, concurrency=3)
        a, b = (queued(tmp_path, sim, name, count=60, concurrency=3) for name in "ab")
        outcomes = await both(store, a, a, b)  # on the wall's clock
        assert sim.ledger.snapshot()["max_in_flight"] == 3  # each run alone may have three in flight
    assert [o.status["counts"][ItemState.COMPLETED] for o in outcomes] == [60, 60, 60]


async def test_a_429_seen_by_one_run_of_a_queue_holds_back_every_run_until_its_retry_after(
    tmp_path: Path, store: Store
) -> None:
    clock = Paced()
    requests = Requests(clock)
    faults = {"rules": [{"fault": "http_429", "times": 1, "keys": ["a004"], "retry_after": 8}]}
    with Simulator(on_request=requests, faults=faults).start() as sim:
        store.set_queue(QUEUE, concurrency=1)
        outcomes = await both(store, queued(tmp_path, sim, "a"), queued(tmp_path, sim, "b"), clock=clock)
    (refused_at,) = [at for at, ids in requests.seen if "a004" in ids][:1]
    (queue,) = store.queues()
    after = [(at, ids[0][0]) for at, ids in requests.seen if at > refused_at]
    assert queue["quiet_until"] >= refused_at + 8
    assert after and all(at >= queue["quiet_until"] for at, _ in after)
    assert {run for _, run in after} == {"a", "b"}
    assert [o.status["counts"][ItemState.COMPLETED] for o in outcomes] == [20, 20]


async def test_a_queue_breaker_opened_by_one_run_holds_the_other_until_a_person_resumes_the_queue(
    tmp_path: Path, store: Store
) -> None:
    from runner import control

    with Simulator(faults={"rules": [{"fault": "http_500"}]}).start() as sim:
        first = await runs.execute(store, queued(tmp_path, sim, "a"), clock=StepClock())
        sim.set_faults(None)
        sent = sim.ledger.snapshot()["requests"]
        held = await runs.execute(store, queued(tmp_path, sim, "b"), clock=StepClock())
        assert sim.ledger.snapshot()["requests"] == sent  # nothing of b's was sent
        assert control.resume_queue(store, QUEUE).breaker is BreakerState.PROBING
        resumed = await runs.execute(store, queued(tmp_path, sim, "b"), clock=StepClock())
    assert (first.exit_code, held.exit_code) == (4, 4)
    assert held.stopped_for is not None and held.stopped_for.startswith(f"breaker open (queue {QUEUE!r}: 2 consecutive")
    assert resumed.status["counts"][ItemState.COMPLETED] == 20
    assert store.queues()[0]["breaker"] == BreakerState.CLOSED


@pytest.mark.slow
async def test_the_slot_a_killed_engine_held_comes_back_to_the_queues_other_runs(tmp_path: Path) -> None:
    """An engine SIGKILLed while its call holds the queue's one slot: the next run of the queue takes it."""
    with Simulator(on_request=(crash := KillAtFirstCall())).start() as sim:
        write_jsonl(tmp_path / "posts.jsonl", posts(3))
        (tmp_path / "job.toml").write_text(f'name = "killed"\ninput = "posts.jsonl"\n[batch]\nconcurrency = 1\n'
                                           f'[provider]\nbase_url = "{sim.base_url}"\nqueue = "{QUEUE}"\n')
        crash.run("run", "job.toml", cwd=tmp_path)
        with Store(tmp_path / "runs.db", create=False) as store:
            held_by_the_dead = [run["held"] for queue in store.queues() for run in queue["runs"]]
            outcome = await runs.execute(store, queued(tmp_path, sim, "b"), clock=StepClock())
    assert held_by_the_dead == [1]
    assert outcome.status["counts"][ItemState.COMPLETED] == 20


async def test_a_persons_step_lets_one_batch_of_a_run_held_by_its_queues_breaker_start(
    tmp_path: Path, store: Store
) -> None:
    from runner import control

    with Simulator(faults={"rules": [{"fault": "http_500"}]}).start() as sim:
        await runs.execute(store, queued(tmp_path, sim, "a"), clock=StepClock())
        sim.set_faults(None)
        sent = sim.ledger.snapshot()["requests"]
        runs.prepare(store, queued(tmp_path, sim, "b"), now=0.0)
        control.step(store, "b", now=0.0)
        stepped = await runs.execute(store, queued(tmp_path, sim, "b"), clock=StepClock())
        assert sim.ledger.snapshot()["requests"] == sent + 1
    assert stepped.exit_code == 4 and stepped.status["counts"][ItemState.COMPLETED] == 2


async def test_a_run_that_left_its_queue_keeps_its_breaker_to_itself(tmp_path: Path, store: Store) -> None:
    """A run run once in a queue, then with none: its failures move its own breaker, not the queue's it left."""
    with Simulator().start() as sim:
        await runs.execute(store, queued(tmp_path, sim, "a", count=2), clock=StepClock())
        sim.set_faults({"rules": [{"fault": "http_500"}]})
        alone = queued(tmp_path, sim, "a", count=4, queue="")
        outcome = await runs.execute(store, alone, clock=StepClock())
    assert outcome.status["breaker"]["state"] == BreakerState.OPEN and outcome.status["queue"] is None
    assert [(queue["breaker"], queue["runs"]) for queue in store.queues()] == [(BreakerState.CLOSED, [])]
