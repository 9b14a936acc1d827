"""Running the same job again continues the same run; it never pays again for finished work."""

from __future__ import annotations

from pathlib import Path

from support import make_job, posts

from runner import runs
from runner.sim import Simulator
from runner.states import FailureKind, ItemState
from runner.store import Store


async def test_running_a_finished_job_again_makes_no_upstream_call(tmp_path: Path, sim: Simulator, store: Store) -> None:
    job = make_job(tmp_path, sim.base_url, posts(40, groups=2))
    runs.prepare(store, job, now=1.0)
    await runs.execute(store, job)
    calls = sim.ledger.snapshot()["requests"]
    runs.prepare(store, job, now=2.0)
    outcome = await runs.execute(store, job)
    assert sim.ledger.snapshot()["requests"] == calls > 0
    assert outcome.status["counts"][ItemState.COMPLETED] == 40
    assert outcome.exit_code == 0


async def test_new_items_are_added_to_the_run_and_only_they_are_sent(tmp_path: Path, sim: Simulator, store: Store) -> None:
    runs.prepare(store, make_job(tmp_path, sim.base_url, posts(20)), now=1.0)
    await runs.execute(store, make_job(tmp_path, sim.base_url, posts(20)))
    sim.ledger.reset()
    job = make_job(tmp_path, sim.base_url, posts(30))
    runs.prepare(store, job, now=2.0)
    outcome = await runs.execute(store, job)
    assert sorted(sim.ledger.snapshot()["billed"]) == [f"p{i:03d}" for i in range(20, 30)]
    assert outcome.status["total"] == outcome.status["counts"][ItemState.COMPLETED] == 30


async def test_a_completed_item_whose_input_changed_is_not_restored(tmp_path: Path, sim: Simulator, store: Store) -> None:
    runs.prepare(store, make_job(tmp_path, sim.base_url, posts(5)), now=1.0)
    await runs.execute(store, make_job(tmp_path, sim.base_url, posts(5)))
    sim.ledger.reset()
    changed = posts(5)
    changed[2]["body"] = "an edited post"
    job = make_job(tmp_path, sim.base_url, changed)
    runs.prepare(store, job, now=2.0)
    outcome = await runs.execute(store, job)
    assert sim.ledger.snapshot()["requests"] == 0
    assert outcome.exit_code == 3
    [failure] = store.failures("test")
    assert (failure["key"], failure["kind"], failure["retryable"]) == ("p002", FailureKind.INPUT_CHANGED, True)
