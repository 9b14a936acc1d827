"""A pipeline in the TUI: its run screen shows the seven counts per stage under the run's totals, a batch in flight
says its stage, and an item's detail its stage and each stage's result; a run of one stage shows none of it."""

from __future__ import annotations

from pathlib import Path

from rich.padding import Padding
from textual.app import App, ComposeResult
from scenes import live_engine
from staged_run import FAILS, build
from support import runner_cli
from tui_support import NOW, press, settle, shown
from tui_support import build as build_fixed

from runner.store import Store, views
from runner.store.answers import STATES, BatchInFlight
from tui.app import RunnerApp
from tui.screens.failures import HistoryTable, ItemScreen
from tui.screens.run import RunScreen
from tui.widgets import BatchTable, GroupTable, StageTable


def cells(table: StageTable | GroupTable | BatchTable) -> list[list[str]]:
    """The table's header and rows, as text."""
    head = [str(column.label).strip() for column in table.columns.values()]
    def text(cell: object) -> str:
        return str(cell.renderable if isinstance(cell, Padding) else cell).strip()

    return [head, *[[text(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]]


async def test_a_pipeline_shows_a_row_per_stage_with_the_items_there_now_and_those_that_passed_and_skipped_it(
    tmp_path: Path,
) -> None:
    db = await build(tmp_path)
    with Store(db, read_only=True) as store:
        tallies = views.stage_tallies(store, "triage")
    app = RunnerApp(db, "triage")
    async with app.run_test(size=(140, 45)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, RunScreen)
        table = app.screen.query_one(StageTable)
        assert table.display and table.parent is app.screen.query_one("#summary")
        assert app.screen.query_one(GroupTable).display  # room for both
        shown_rows = cells(table)
    assert shown_rows == [
        ["stage", "at it now", "passed", "skipped"],
        ["classify", "", "12", ""],  # every item passed it: nothing there now
        ["extract", "", f"{tallies[1].passed}", f"{tallies[1].skipped}"],
        ["summarize", "11 completed  1 failed", "11", ""],
    ]
    assert tallies[1].passed + tallies[1].skipped == 12


async def test_at_80x24_a_pipeline_shows_its_stage_rows_or_its_group_rows_and_v_switches_them(tmp_path: Path) -> None:
    app = RunnerApp(await build(tmp_path), "triage")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        stages, groups = app.screen.query_one(StageTable), app.screen.query_one(GroupTable)
        assert (stages.display, groups.display) == (True, False)
        await press(pilot, "v")
        assert (stages.display, groups.display) == (False, True)
        assert groups.row_count == 2 and groups.size.height == 3  # both months, no longer squeezed
        await pilot.resize_terminal(140, 45)
        await pilot.pause()
        assert (stages.display, groups.display) == (True, True)


async def test_a_run_of_one_stage_shows_no_stage_rows_and_no_stage_column(tmp_path: Path) -> None:
    app = RunnerApp(build_fixed(tmp_path), "posts", clock=lambda: NOW)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert not app.screen.query_one(StageTable).display
        assert "stage" not in cells(app.screen.query_one(BatchTable))[0]


async def test_a_pipeline_item_shows_its_stage_and_each_stage_result_it_has(tmp_path: Path) -> None:
    db = await build(tmp_path)
    with Store(db, read_only=True) as store:
        item = views.item_view(store, "triage", FAILS, now=0.0)
    assert item.state == "failed" and item.stage != "classify" and list(item.results)[0] == "classify"
    app = RunnerApp(db, "triage")
    async with app.run_test(size=(80, 24)) as pilot:
        await press(pilot, "f", "enter")
        assert isinstance(app.screen, ItemScreen)
        head = shown(app.screen.query_one("#item-head"))[0]
        results = "\n".join(shown(app.screen.query_one("#item-results")))
        history = "\n".join(shown(app.screen.query_one(HistoryTable)))
    assert head.split() == [FAILS, "group", item.group, "stage", item.stage, "failed"]
    lines = [line.strip("│ ") for line in results.splitlines()]
    assert lines[:3] == ["classify", "{", f'"id": "{FAILS}",'] and lines[3].startswith('"label": ')
    assert "on to stage" in history  # each move between stages said in the item's history


class Batches(App[None]):
    def compose(self) -> ComposeResult:
        yield BatchTable()


async def test_a_pipeline_batch_in_flight_says_its_stage() -> None:
    batch = BatchInFlight(id=7, group="2026-01", state="running", size=4, age=3.0, upstream_id=None, retries=0,
                          round=0, stage="extract")
    app = Batches()
    async with app.run_test(size=(80, 10)) as pilot:
        table = app.query_one(BatchTable)
        table.show([batch], staged=True)
        await pilot.pause()
        staged = cells(table)
        table.show([batch])
        await pilot.pause()
        one_stage = cells(table)
    assert staged == [["batch", "stage", "group", "state", "items", "age", "upstream id", "retries"],
                      ["7", "extract", "2026-01", "running", "4", "3s", "", ""]]
    assert one_stage[0] == ["batch", "group", "state", "items", "age", "upstream id", "retries"]


async def test_throughput_counts_the_items_done_with_a_stage_while_none_has_completed(tmp_path: Path) -> None:
    assert runner_cli("demo", "--pipeline", "--latency", "0", cwd=tmp_path).returncode == 4  # it stops at the review
    with Store(tmp_path / "runs.db") as store:
        last = views.last_event_at(store, store.run_id("pipeline"))
        assert last is not None
        live_engine(store, "pipeline", "live", started_at=last - 60, heartbeat_at=last)
        view = views.run_view(store, "pipeline", now=last + 1)
    assert view.standing.counts["completed"] == view.standing.counts["failed"] == 0
    assert view.per_minute > 0
