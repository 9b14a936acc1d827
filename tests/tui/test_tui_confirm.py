"""Confirmations: held items shown with their case, a confirm that asks once more, and a real engine after it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from scenes import dead_engine
from support import StepClock, make_job, posts
from tui_support import press, settle

from runner import recovery, runs
from runner.jobs import Job
from runner.sim import Simulator
from runner.model import ItemState
from runner.store import Store, views
from tui.app import RunnerApp
from tui.screens.confirmations import ConfirmationsScreen
from tui.screens.dialog import AskScreen


@pytest.fixture
def upstream() -> Iterator[Simulator]:
    with Simulator(batch_seconds=0.0).start() as sim:
        yield sim


def crashed(store: Store, job: Job, *, submits: bool) -> None:
    """A dead engine's batch of every item: created upstream unrecorded (submits), or a call sent."""
    run_id = runs.prepare(store, job, now=1.0)
    batch = store.claim_batch(run_id, max_items=25, max_chars=10**6, now=1.0, owner="dead")
    assert batch is not None
    with dead_engine(store, "test") as lease:
        store.start_batch(batch.id, lease=lease, max_attempts=3, now=1.0, intent=not submits)
        if submits:
            store.mark_intent(batch.id, now=1.0)
            store.mark_create_sent(batch.id, lands_by=181.0)


def held(store: Store) -> dict[str, int]:
    """Items by hold: ``confirm`` held, ``confirmed`` (to poll or look for), ``none`` neither."""
    return views.holds(store, store.run_id("test"))


def batch_job(tmp_path: Path, sim: Simulator) -> Job:
    job = make_job(tmp_path, sim.base_url, posts(5))
    return replace(job, provider=replace(job.provider, kind="openai-batch"))


async def test_confirming_all_in_the_tui_releases_held_items_and_the_engine_adopts_their_task(
    tmp_path: Path, upstream: Simulator, store: Store, clock: StepClock
) -> None:
    job = batch_job(tmp_path, upstream)
    crashed(store, job, submits=True)
    stopped = await runs.execute(store, job, clock=clock)
    assert stopped.exit_code == 4 and held(store) == {"confirm": 5}
    app = RunnerApp(store.path, "test")
    async with app.run_test(size=(120, 40)) as pilot:
        await press(pilot, "c")
        assert isinstance(app.screen, ConfirmationsScreen) and app.screen.view is not None
        assert {item.case for item in app.screen.view.items} == {recovery.Case.ADOPT}
        await press(pilot, "c")
        assert isinstance(app.screen, AskScreen) and app.screen.warning is None
        assert str(app.screen.body).startswith("plan: 5 items · 5 charge-safe")  # a create looked for, then polled
        await pilot.press("y")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmationsScreen) and app.screen.view is not None
        assert app.screen.view.items == ()
    assert held(store) == {"confirmed": 5}
    done = await runs.execute(store, job, clock=clock)
    assert done.status["counts"][ItemState.COMPLETED] == 5
    assert upstream.ledger.snapshot()["batches_created"] == 1


async def test_a_resubmit_asks_with_the_double_charge_warning_and_cancelling_keeps_items_held(
    tmp_path: Path, sim: Simulator, store: Store, clock: StepClock
) -> None:
    job = make_job(tmp_path, sim.base_url, posts(5))
    crashed(store, job, submits=False)
    await runs.execute(store, job, clock=clock)
    app = RunnerApp(store.path, "test")
    async with app.run_test(size=(120, 40)) as pilot:
        await press(pilot, "c", "c")
        assert isinstance(app.screen, AskScreen)
        assert str(app.screen.body).startswith("plan: 5 items · 0 charge-safe · 5 may be billed again (cost unknown)")
        assert app.screen.warning == (
            "5 items would be SENT AGAIN: the first call may have run, so confirming may run and charge twice."
        )
        await pilot.press("n")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmationsScreen)
    assert held(store) == {"confirm": 5}


async def test_enter_confirms_one_held_item_and_the_engine_sends_it_again(
    tmp_path: Path, sim: Simulator, store: Store, clock: StepClock
) -> None:
    job = make_job(tmp_path, sim.base_url, posts(5))
    crashed(store, job, submits=False)
    await runs.execute(store, job, clock=clock)
    app = RunnerApp(store.path, "test")
    async with app.run_test(size=(120, 40)) as pilot:
        await press(pilot, "c")
        await press(pilot, "down", "enter")
        assert isinstance(app.screen, AskScreen) and app.screen.question == "Confirm held item p001?"
        assert str(app.screen.body).startswith("plan: 1 item · 0 charge-safe · 1 may be billed again")
        await pilot.click("#yes")
        await settle(pilot)
    assert held(store) == {"none": 1, "confirm": 4}
    again = await runs.execute(store, job, clock=clock)
    states = {row["key"]: row["state"] for row in views.items(store, store.run_id("test"))}
    assert states["p001"] == ItemState.COMPLETED
    assert {states[k] for k in states if k != "p001"} == {ItemState.RUNNING}
    assert again.exit_code == 4 and sim.ledger.snapshot()["billed"] == {"p001": 1}
