"""Running the same job again continues the same run; it never pays again for finished work."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from scenes import reopened
from support import make_job, posts

from runner import runs
from runner.store import views
from runner.errors import RunError
from runner.sim import Simulator
from runner.model import FailureKind, ItemState
from runner.store import Store


async def test_running_a_finished_job_again_makes_no_upstream_call(tmp_path: Path, sim: Simulator, store: Store) -> None:
    job = make_job(tmp_path, sim.base_url, posts(40, groups=2))
    await runs.execute(store, job)
    calls = sim.ledger.snapshot()["requests"]
    outcome = await runs.execute(store, job)
    assert sim.ledger.snapshot()["requests"] == calls > 0
    assert outcome.status["counts"][ItemState.COMPLETED] == 40
    assert outcome.exit_code == 0


async def test_new_items_are_added_to_the_run_and_only_they_are_sent(tmp_path: Path, sim: Simulator, store: Store) -> None:
    await runs.execute(store, make_job(tmp_path, sim.base_url, posts(20)))
    sim.ledger.reset()
    job = make_job(tmp_path, sim.base_url, posts(30))
    outcome = await runs.execute(store, job)
    assert sorted(sim.ledger.snapshot()["billed"]) == [f"p{i:03d}" for i in range(20, 30)]
    assert outcome.status["total"] == outcome.status["counts"][ItemState.COMPLETED] == 30


async def test_a_completed_item_whose_input_changed_is_not_restored(tmp_path: Path, sim: Simulator, store: Store) -> None:
    await runs.execute(store, make_job(tmp_path, sim.base_url, posts(5)))
    sim.ledger.reset()
    changed = posts(5)
    changed[2]["body"] = "an edited post"
    job = make_job(tmp_path, sim.base_url, changed)
    outcome = await runs.execute(store, job)
    assert sim.ledger.snapshot()["requests"] == 0
    assert outcome.exit_code == 3
    [failure] = views.failures(store, "test")
    assert (failure["key"], failure["kind"], failure["retryable"]) == ("p002", FailureKind.INPUT_CHANGED, True)


async def test_a_failed_item_whose_input_was_fixed_is_tried_again(tmp_path: Path, sim: Simulator, store: Store) -> None:
    records = posts(3)
    records[1]["body"] = "x" * 400
    await runs.execute(store, make_job(tmp_path, sim.base_url, records, max_chars=300))
    assert [f["kind"] for f in views.failures(store, "test")] == [FailureKind.BAD_REQUEST]
    fixed = make_job(tmp_path, sim.base_url, posts(3), max_chars=300)
    outcome = await runs.execute(store, fixed)
    assert outcome.status["counts"][ItemState.COMPLETED] == 3
    assert sim.ledger.snapshot()["billed"]["p001"] == 1


async def test_preparing_a_run_that_a_live_engine_holds_is_refused(tmp_path: Path, store: Store) -> None:
    arrived, release = threading.Event(), threading.Event()

    def hold(ids: list[str]) -> None:
        arrived.set()
        release.wait(timeout=30)

    with Simulator(on_request=hold).start() as sim:
        job = make_job(tmp_path, sim.base_url, posts(5))
        engine = asyncio.create_task(runs.execute(store, job))
        await asyncio.to_thread(arrived.wait, 30)
        changed = posts(5)
        changed[0]["body"] = "edited while in flight"
        with reopened(store) as other, pytest.raises(RunError, match="is being run by another engine"):
            runs.prepare(other, make_job(tmp_path, sim.base_url, changed), now=time.time())
        release.set()
        outcome = await engine
    assert outcome.status["counts"][ItemState.COMPLETED] == 5
