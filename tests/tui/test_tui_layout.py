"""At 80x24 nothing is cut mid-word (the legend, the group table, the batches, the footer, every message); at 140x45
twelve months fit."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets._footer import FooterKey
from textual.widgets.data_table import ColumnKey
from support import make_job
from tui_support import NOW, Hand, build, press, settle, shown, whole_width

from runner.model import FailureKind
from runner.store import Settlement, Store
from runner.store.answers import STATES
from tui.app import RunnerApp
from tui.screens.run import RunScreen
from tui.screens.failures import FailedTable, HistoryTable, KindTable
from tui.widgets import BatchTable, EventLog, GroupTable, StateBar, Table


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


async def cell_lines(pilot: Pilot[None], table: Table, row: int, column: str) -> list[str]:
    """The lines a cell shows on screen, its table scrolled to each in turn (the cell's one space before it dropped)."""
    x = sum(c.get_render_width(table) for c in table.ordered_columns[: table.get_column_index(column)])
    width = table.columns[ColumnKey(column)].get_render_width(table)
    lines = []
    for y in range(sum(r.height for r in table.ordered_rows[:row]), sum(r.height for r in table.ordered_rows[:row + 1])):
        table.scroll_to(y=y, animate=False, immediate=True)
        await pilot.pause()
        lines.append(shown(table)[table.header_height + y - round(table.scroll_y)])
    return [line[x + 1: x + width] for line in lines]


#: An upstream's refusal as long as a real one (the simulator's, as OpenAI words it).
REFUSAL = (
    "400 context_length_exceeded: This model's maximum context length is 128000 tokens. However, your messages "
    "resulted in more tokens. Please reduce the length of the messages. (ContextWindowExceededError)"
)


def with_long_keys(db: Path) -> Path:
    """Beside the fixed runs, ``long``: keys as long as the sample's (``post-00412``), each refused at length."""
    records = [{"id": f"post-{i:05d}", "month": "2026-02", "body": "a post"} for i in range(410, 414)]
    with Store(db, create=False) as store:
        hand = Hand(store, make_job(db.parent, "http://127.0.0.1:9/v1", records, name="long", max_items=4), NOW - 60)
        batch, items = hand.start(NOW - 50)
        refused = {item.id: (FailureKind.BAD_REQUEST, REFUSAL, False) for item in items}
        hand.settle(batch, Settlement(failed=refused), NOW - 40)
        hand.leave()
    return db


WRAPPED = [
    pytest.param(run, keys, table, id=f"{run}-{name}")
    for run in ("posts", "long")
    for keys, table, name in [
        ((), EventLog, "events"), (("f",), KindTable, "failures-by-kind"), (("f",), FailedTable, "failures"),
        (("f", "enter"), HistoryTable, "history"),
    ]
]


@pytest.mark.parametrize("size", [(80, 24), (140, 45)], ids=["80x24", "140x45"])
@pytest.mark.parametrize(("run", "keys", "kind"), WRAPPED)
async def test_a_message_reads_whole_no_word_cut_and_nothing_to_scroll_sideways(
    tmp_path: Path, run: str, keys: tuple[str, ...], kind: type[Table], size: tuple[int, int]
) -> None:
    app = RunnerApp(with_long_keys(build(tmp_path)), run, clock=lambda: NOW)
    async with app.run_test(size=size) as pilot:
        await press(pilot, *keys)
        table = app.screen.query_one(kind)
        assert table.WRAP is not None and table.row_count and whole_width(table)
        for row, key in enumerate(table.ordered_rows):
            message = str(table.get_cell(key.key, ColumnKey(table.WRAP)).renderable.plain)
            lines = await cell_lines(pilot, table, row, table.WRAP)
            assert " ".join(line.strip() for line in lines).split() == message.split()
