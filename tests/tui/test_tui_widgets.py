"""What the widgets compute from the data they are given."""

from __future__ import annotations

import pytest

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
