"""At 80x24 nothing is cut mid-word (the legend, the group table, the batches, the footer); at 140x45 twelve months fit."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import DataTable
from textual.widgets._footer import FooterKey
from tui_support import NOW, build, settle, shown

from runner.store.answers import STATES
from tui.app import RunnerApp
from tui.screens.run import RunScreen
from tui.widgets import BatchTable, GroupTable, StateBar


def whole_width(table: DataTable[object]) -> bool:
    """Every column of the table in sight: nothing to scroll to sideways."""
    return table.max_scroll_x == 0


async def test_at_80x24_the_legend_groups_batches_and_footer_are_whole(tmp_path: Path) -> None:
    app = RunnerApp(build(tmp_path), "posts", clock=lambda: NOW)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunScreen) and screen.view is not None
        legend = shown(screen.query_one(StateBar))[1:]
        counts = screen.view.standing.counts
        assert [s for s in STATES if not any(f"■ {s} {counts[s]:,}" in line for line in legend)] == []
        assert whole_width(screen.query_one(GroupTable)) and whole_width(screen.query_one(BatchTable))
        keys = list(screen.query(FooterKey))
        assert keys and [k.region for k in keys if k.region.right > 80 or k.region.width == 0] == []


async def test_twelve_months_fit_at_140x45_and_scroll_in_sight_at_80x24(tmp_path: Path) -> None:
    db = build(tmp_path)
    fits: dict[tuple[int, int], tuple[int, bool, bool]] = {}
    for size in ((140, 45), (80, 24)):
        app = RunnerApp(db, "months", clock=lambda: NOW)
        async with app.run_test(size=size) as pilot:
            await settle(pilot)
            groups = app.screen.query_one(GroupTable)
            fits[size] = (groups.row_count, groups.max_scroll_y == 0, groups.show_vertical_scrollbar)
    assert fits == {(140, 45): (12, True, False), (80, 24): (12, False, True)}
