"""What the widgets compute from the data they are given."""

from __future__ import annotations

import pytest

from runner.rules.breaker import Control
from runner.store.answers import STATES, Standing
from tui.run_panel import settled
from tui.widgets import bar_cells


@pytest.mark.parametrize("width", [7, 40, 113])
def test_the_bar_fills_its_width_and_shows_every_state_that_has_items(width: int) -> None:
    counts = {"pending": 10_000, "queued": 1, "waiting": 0, "running": 3, "received": 0, "completed": 500, "failed": 2}
    cells = bar_cells(counts, width)
    assert sum(cells.values()) == width
    assert {state for state, n in cells.items() if n} == {s for s, n in counts.items() if n}


def test_the_bar_is_in_proportion() -> None:
    counts = {"pending": 50, "queued": 0, "waiting": 0, "running": 0, "received": 0, "completed": 30, "failed": 20}
    assert bar_cells(counts, 100) == {
        "pending": 50, "queued": 0, "waiting": 0, "running": 0, "received": 0, "completed": 30, "failed": 20
    }


def test_a_settled_run_tells_its_completed_items_from_its_failed_and_cancelled_ones() -> None:
    counts = {state: 0 for state in STATES} | {"completed": 3, "failed": 2}
    run = Standing(name="r", counts=counts, groups={}, control=Control(), held=0, engine_alive=False,
                   duplicate_tasks=0, idle_for=None, cancelled=1)
    assert settled(run) == "3 items completed, 2 failed (1 of them cancelled)"
    assert settled(run._replace(counts=counts | {"failed": 0}, cancelled=0)) == "3 items completed"
