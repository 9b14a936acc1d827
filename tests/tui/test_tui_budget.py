"""The run screen's budget: shown beside the cost line, and ``b`` opens a dialog that gives a new one, which lets a
run stopped at its budget go on."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from support import StepClock, make_job, posts, write_jsonl
from textual.widgets._footer import FooterKey
from tui_support import Told, press, settle

from runner import adding, runs
from runner.model import BreakerState
from runner.rules.budget import Budget
from runner.sim import Simulator
from runner.store import Store
from tui.app import RunnerApp
from tui.run_panel import RunPanel
from tui.screens.budget import BudgetScreen
from tui.screens.dialog import AskScreen


async def stopped_at_budget(tmp_path: Path, sim: Simulator, store: Store) -> None:
    job = make_job(tmp_path, sim.base_url, posts(8), max_items=4, concurrency=2)
    job = dataclasses.replace(job.with_provider(price={"input": 0.0, "output": 1.0, "per": 1}),
                              budget=Budget(max_cost=1000))
    assert (await runs.execute(store, job, clock=StepClock())).exit_code == 4


async def test_b_gives_a_run_stopped_at_its_budget_a_new_one_and_its_breaker_closes(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    await stopped_at_budget(tmp_path, sim, store)
    told = Told()
    app = RunnerApp(store.path, "test")
    async with app.run_test(size=(120, 40), message_hook=told) as pilot:
        await press(pilot, "b")
        assert isinstance(app.screen, BudgetScreen)
        await pilot.press("ctrl+a", "ctrl+k", *"5000", "ctrl+s")
        await settle(pilot, read=True)
        assert " of $5,000.00" in str(app.screen.query_one(RunPanel).render())
    assert store.budget(store.run_id("test")) == Budget(5000.0, None)
    assert store.control(store.run_id("test")).breaker is BreakerState.CLOSED
    assert told.messages and told.messages[-1].startswith("test: budget $")


async def test_the_budget_dialog_keeps_nothing_it_was_not_given(tmp_path: Path, sim: Simulator, store: Store) -> None:
    await stopped_at_budget(tmp_path, sim, store)
    app = RunnerApp(store.path, "test")
    async with app.run_test(size=(120, 40)) as pilot:
        await press(pilot, "b")
        await pilot.press("ctrl+a", "ctrl+k", "ctrl+s")
        await settle(pilot)
        assert isinstance(app.screen, BudgetScreen)  # not saved: nothing given
        await pilot.press("escape")
        await settle(pilot)
    assert store.budget(store.run_id("test")) == Budget(1000.0, None)
    assert store.control(store.run_id("test")).breaker is BreakerState.OPEN


async def test_a_run_without_a_budget_is_given_its_first_from_the_command_palette(
    tmp_path: Path, store: Store
) -> None:
    job = make_job(tmp_path, "http://127.0.0.1:9/v1", posts(3)).with_provider(price={"input": 1.0, "output": 1.0, "per": 1})
    runs.prepare(store, job, now=0.0)
    app = RunnerApp(store.path, "test")
    told = Told()
    async with app.run_test(size=(80, 24), message_hook=told) as pilot:
        await settle(pilot)
        assert "budget" not in {key.action for key in app.screen.query(FooterKey)}  # no room at 80 columns
        await pilot.press("ctrl+p", *"budget", "enter")
        await settle(pilot)
        assert isinstance(app.screen, BudgetScreen)
        await pilot.press(*"5", "ctrl+s")
        await settle(pilot, read=True)
        await pilot.pause()
        assert "budget" in {key.action for key in app.screen.query(FooterKey)}  # b from now on
    assert store.budget(store.run_id("test")) == Budget(5.0, None)
    assert told.messages[-1].startswith("test: budget $")


async def test_at_80_columns_the_run_screens_footer_keeps_esc_and_q_and_cuts_no_key(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    await stopped_at_budget(tmp_path, sim, store)
    adding.add(store, "test", write_jsonl(tmp_path / "later.jsonl", posts(12)[8:]), at=4_000_000_000, now=0.0)
    app = RunnerApp(store.path, "test")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        keys = list(app.screen.query(FooterKey))
        palette = next(key for key in keys if key.has_class("-command-palette"))
        shown = [key for key in keys if key.display and key is not palette]
        assert [key.description for key in shown[:2]] == ["Runs", "Quit"]
        assert [key.region for key in shown if key.region.right > palette.region.x or key.region.width == 0] == []
        assert {"Budget", "Scheduled"} & {key.description for key in keys if not key.display}  # no room for both
        await pilot.press("ctrl+p", *"cancel run", "enter")  # a key the footer keeps out: in the palette
        await settle(pilot)
        assert isinstance(app.screen, AskScreen)


async def test_with_no_engine_alive_the_panel_says_runner_run_goes_on_not_that_s_steps(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    await stopped_at_budget(tmp_path, sim, store)
    app = RunnerApp(store.path, "test")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        said = app.screen.query_one(RunPanel).render()
    text = " ".join(str(said).split())
    assert "stopped at its budget: b gives a larger one; s allows one batch past it; no engine works on it: " \
           "`runner run test --db" in text and "s steps" not in text
