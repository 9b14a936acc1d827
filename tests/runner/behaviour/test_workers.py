"""Several workers on one run (issue 20): ``runner run NAME`` started again on the same store joins the run.

Workers in one event loop, each with a connection of its own to one store
file (as processes would be), against one simulator, which counts the
requests in flight at once and bills each item; the SIGKILL trial runs real
``runner run`` processes.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from support import PATIENCE, ROOT, StepClock, make_job, posts, write_jsonl

from runner import runs
from runner.jobs import Job
from runner.model import ItemState
from runner.sim import Simulator
from runner.store import Store, views

WORKERS = 3


class Paced(StepClock):
    """A clock the workers share, twice as fast as the wall's: a sleep moves it on at once and gives the others'
    calls half of it in real time, so that none runs far ahead of the others' heartbeats (they would take it
    for dead after ``LEASE_SECONDS``)."""

    async def sleep(self, seconds: float) -> None:
        self.time += seconds
        await asyncio.sleep(seconds / 2)


async def together(store: Store, job: Job, *, clock: StepClock | None = None) -> list[runs.Outcome]:
    """``WORKERS`` engines on ``job``'s one run at once, each with a store connection of its own."""
    stores = [store, *(Store(store.path, create=False) for _ in range(WORKERS - 1))]
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


class Requests:
    """When (by the workers' clock) each request arrived, and the items it held."""

    def __init__(self, clock: StepClock) -> None:
        self.clock, self.seen = clock, list[tuple[float, list[str]]]()

    def __call__(self, ids: list[str]) -> None:
        self.seen.append((self.clock.now(), list(ids)))


async def test_a_429_one_worker_saw_holds_back_every_worker_of_the_run_until_its_retry_after(
    tmp_path: Path, store: Store
) -> None:
    clock = Paced()
    requests = Requests(clock)
    faults = {"rules": [{"fault": "http_429", "times": 1, "keys": ["p010"], "retry_after": 8}]}
    with Simulator(on_request=requests, faults=faults).start() as sim:
        job = make_job(tmp_path, sim.base_url, posts(40), max_items=2, concurrency=3, request_retries=0)
        outcomes = await together(store, job, clock=clock)
    (refused_at,) = [at for at, ids in requests.seen if "p010" in ids][:1]
    after = [at for at, _ in requests.seen if at > refused_at]
    assert after and min(after) >= refused_at + 8
    assert [outcome.status["counts"][ItemState.COMPLETED] for outcome in outcomes] == [40] * WORKERS
