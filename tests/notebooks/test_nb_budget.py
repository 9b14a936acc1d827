"""The budget from a notebook: ``Run(..., budget=...)`` stops the run at it, and the panel's budget field and button
(or ``run.budget()``) give a new one, which lets the run go on."""

from __future__ import annotations

from pathlib import Path

from support import StepClock, posts

from runner.model import BreakerState
from runner.notebook import Run
from runner.rules.budget import Budget
from runner.sim import Simulator
from runner.store import Store
from runner.widgets import RunPanel

PRICE = {"input": 0.0, "output": 1.0, "per": 1}


def budgeted_run(tmp_path: Path, sim: Simulator) -> Run:
    return Run("test", items=posts(8), db=tmp_path / "runs.db", base_url=sim.base_url, model="sim-model",
               price=PRICE, batch={"max_items": 4, "concurrency": 2}, budget={"max_cost": 1000}, clock=StepClock())


async def test_the_panel_shows_the_budget_and_its_button_gives_a_new_one_that_lets_the_run_go_on(
    tmp_path: Path, sim: Simulator
) -> None:
    run = budgeted_run(tmp_path, sim)
    assert (await run.go()).exit_code == 4
    panel = RunPanel(tmp_path / "runs.db", "test", live=False)
    try:
        assert "budget $" in panel.cost.value and " of $1,000.00" in panel.cost.value
        assert panel.budget.field.value == 1000.0
        panel.budget.field.value = 4000.0
        panel.budget.button.click()
        assert "budget set: $4,000.00" in panel.message.value and " of $4,000.00" in panel.cost.value
    finally:
        panel.close()
    with Store(tmp_path / "runs.db") as store:
        assert store.control(store.run_id("test")).breaker is BreakerState.CLOSED
    assert (await run.go()).exit_code == 0


async def test_run_budget_gives_a_new_budget_from_python(tmp_path: Path, sim: Simulator) -> None:
    run = budgeted_run(tmp_path, sim)
    await run.go()
    assert run.budget(max_tokens=50_000) == Budget(1000.0, 50_000)
    assert run.status()["budget"]["max_tokens"] == 50_000
