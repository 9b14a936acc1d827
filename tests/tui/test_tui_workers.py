"""A run that several workers work (issue 20): its screen lists each worker, whether it lives, and what it holds."""

from __future__ import annotations

import os
import time
from pathlib import Path

from scenes import engine_row, no_engine
from tui_support import NOW, Hand, job, settle, shown, whole_width

from runner import lease, liveness
from runner.store import Store
from tui.app import RunnerApp
from tui.screens.run import RunScreen
from tui.widgets import WorkerTable

#: This host's name, as a live worker of this process records it.
HERE = f"{liveness.this_host()}:{os.getpid()}"


def crew(folder: Path, *, dead: bool = True, groups: int = 1, third: bool = False) -> Path:
    """Run ``crew`` of 24 items in ``groups`` groups, in batches of 4: two workers of this process at work, holding
    two batches and one (and a ``third``, one); and (``dead``) one on another host whose heartbeat stopped 40 s
    ago, holding one batch."""
    db = folder / "runs.db"
    with Store(db) as store:
        hand = Hand(store, job(folder, "crew", 24, groups=groups, max_items=4, concurrency=4), NOW - 100)
        no_engine(store, "crew")
        live = ["first", "second", *(["third"] if third else [])]
        for token in live:
            lease.join(store, "crew", token=token, now=NOW - 1)
        holders = ["first", *live]
        if dead:
            engine_row(store, "crew", "gone", pid=4242, host="elsewhere", started_at=NOW - 90, heartbeat_at=NOW - 40)
            holders.append("gone")
        for owner in holders:
            store.claim_batch(hand.run_id, max_items=4, max_chars=10**6, now=NOW - 30, owner=owner)
    return db


def rows(table: WorkerTable) -> list[list[str]]:
    """The table's cells as text, each without the space that parts it from the column before."""
    return [[str(cell).strip() for cell in table.get_row_at(i)] for i in range(table.row_count)]


async def test_the_run_screen_lists_each_of_several_workers_and_what_it_holds_in_sight_at_80x24(tmp_path: Path) -> None:
    # A year by month: the groups fill what the panel leaves of the screen.
    app = RunnerApp(crew(tmp_path, groups=12, third=True), "crew", clock=lambda: NOW)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, RunScreen)
        table = app.screen.query_one(WorkerTable)
        assert table.display and whole_width(table)
        assert table.region.height == table.row_count + 1 and table.region.bottom <= 24 - 1  # above the keys' line
        assert [(row[0], row[3], row[4]) for row in rows(table)] == [
            ("elsewhere:4242", "1", "2"), (HERE, "2", "4"), (HERE, "1", "2"), (HERE, "1", "2")]  # a group's 2 items
        assert any("engine alive (3 workers)" in line for line in shown(app.screen.query_one("#run-panel")))


async def test_a_worker_whose_heartbeat_stopped_is_shown_dead_with_what_it_still_holds(tmp_path: Path) -> None:
    app = RunnerApp(crew(tmp_path), "crew", clock=lambda: NOW)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, RunScreen)
        shown_rows = rows(app.screen.query_one(WorkerTable))
    assert [row[1:] for row in shown_rows] == [
        ["40s ago", "dead", "1", "4"], ["1s ago", "alive", "2", "8"], ["1s ago", "alive", "1", "4"]]


async def test_a_run_of_one_worker_shows_no_workers_table(tmp_path: Path) -> None:
    db = crew(tmp_path, dead=False)
    with Store(db) as store:
        store.leave_run("crew", token="second")
    app = RunnerApp(db, "crew", clock=lambda: NOW)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, RunScreen)
        assert not app.screen.query_one(WorkerTable).display


async def test_a_dead_worker_taken_over_leaves_the_workers_table_and_the_event_log_says_what_became_of_its_batch(
    tmp_path: Path,
) -> None:
    db = crew(tmp_path)
    with Store(db) as store:
        store.recover(store.run_id("crew"), now=NOW, lives=lease.judged_at(NOW))  # a live worker's beat notices it
    app = RunnerApp(db, "crew", clock=lambda: NOW)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, RunScreen) and app.screen.view is not None
        assert [row[0] for row in rows(app.screen.query_one(WorkerTable))] == [HERE, HERE]
        newest = app.screen.view.log[0]
    beat = time.strftime("%H:%M:%S", time.localtime(NOW - 40))
    assert (newest.what, newest.detail) == (
        "worker found dead", f"elsewhere:4242 stopped beating at {beat}; its 1 batch taken over: 4 items back to "
                             "pending")
