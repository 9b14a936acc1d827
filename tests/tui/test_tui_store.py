"""The TUI over a store others write: reads that never lock an engine out, plain words when something is missing."""

from __future__ import annotations

import asyncio
from pathlib import Path

from scenes import live_engine, no_engine, write_lock_held
from support import make_job, posts, python_run
from tui_support import NOW, RUNS, Hand, Told, build, job, settle, shown_runs, whole_width

from runner import runs
from runner.store import Settlement, Store, views
from runner.store.answers import RunState
from tui.app import RunnerApp
from tui.screens.failures import FailuresScreen
from tui.screens.run import RunScreen
from tui.screens.runs import RunsTable


async def test_the_tui_reads_on_while_another_process_holds_the_write_lock(tmp_path: Path) -> None:
    db = build(tmp_path)
    app = RunnerApp(db, clock=lambda: NOW)
    async with app.run_test() as pilot:
        await settle(pilot)
        with write_lock_held(db):
            await asyncio.wait_for(settle(pilot, read=True), 2.0)
        assert shown_runs(app) == RUNS


async def test_a_missing_store_is_told_once_and_its_runs_shown_when_it_appears(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    told = Told()
    app = RunnerApp(db)
    async with app.run_test(message_hook=told) as pilot:
        await settle(pilot)
        await settle(pilot, read=True)
        assert told.messages == [f"{db}: no run store here (runner run or runner demo makes one)"]
        with Store(db) as store:
            runs.prepare(store, make_job(tmp_path, "http://127.0.0.1:9/v1", posts(3)), now=0.0)
        await settle(pilot, read=True)
        assert shown_runs(app) == ["test"]


async def test_an_unknown_run_is_a_notification_not_a_crash(tmp_path: Path) -> None:
    db = build(tmp_path)
    told = Told()
    app = RunnerApp(db, "nope", clock=lambda: NOW)
    async with app.run_test(message_hook=told) as pilot:
        await settle(pilot)
        assert app.is_running
    assert told.messages == [f"no run named 'nope' in {db} (runs: {', '.join(RUNS)})"]


def test_each_run_reads_as_how_its_engine_works_or_ended(tmp_path: Path) -> None:
    with Store(build(tmp_path), create=False) as store:
        before = {run.name: run.state for run in views.runs_overview(store, now=NOW)}
        no_engine(store, "posts")
        gave_back = views.standing(store, "posts", now=NOW).state
        live_engine(store, "posts", "live", started_at=NOW - 60, heartbeat_at=NOW - 1)
        after = views.standing(store, "posts", now=NOW).state
    assert before == {
        "archive": RunState.DONE, "drafts": RunState.STOPPED, "months": RunState.DONE, "posts": RunState.ENGINE_DIED,
        "summaries": RunState.PAUSED, "tags": RunState.DONE_WITH_FAILURES, "tickets": RunState.NEEDS_PERSON,
    }
    assert (gave_back, after) == (RunState.STOPPED, RunState.RUNNING)


def test_an_engine_that_died_is_told_by_its_lease_left_behind_and_how_long_it_is_silent(tmp_path: Path) -> None:
    with Store(build(tmp_path), create=False) as store:
        died = views.standing(store, "posts", now=NOW)
        ended = views.standing(store, "drafts", now=NOW)
    assert (died.engine_alive, died.engine_silent_for) == (False, 20.0)
    assert (ended.engine_alive, ended.engine_silent_for) == (False, None)


def test_a_finished_run_took_from_its_first_start_to_its_last_finish_and_a_live_one_keeps_its_rate(
    tmp_path: Path,
) -> None:
    with Store(build(tmp_path), create=False) as store:
        tags = views.run_view(store, "tags", now=NOW)
        posts_dead = views.run_view(store, "posts", now=NOW)
        no_engine(store, "posts")
        live_engine(store, "posts", "live", started_at=NOW - 60, heartbeat_at=NOW - 1)
        posts_live = views.run_view(store, "posts", now=NOW)
    assert (tags.took, tags.per_minute) == (40.0, 0.0)
    assert posts_dead.took == 81.0
    assert (posts_live.took, posts_live.per_minute) == (None, 16.0)


def test_throughput_counts_the_last_minute_and_the_time_left_follows_from_it(tmp_path: Path) -> None:
    with Store(build(tmp_path), create=False) as store:
        no_engine(store, "posts")
        live_engine(store, "posts", "live", started_at=NOW - 60, heartbeat_at=NOW - 1)
        view = views.run_view(store, "posts", now=NOW)
    # In the last minute: 12 completed in three batches, 1 more completed and 3 failed in another.
    assert (view.per_minute, view.standing.unfinished, view.eta) == (16.0, 12, 45.0)
    assert [(b.id, b.state, b.age) for b in view.batches] == [(8, "running", 8.0), (9, "queued", 3.0)]


def test_the_event_log_shows_a_batchs_move_as_one_line_with_how_many_items_moved_and_a_splits_parent(
    tmp_path: Path,
) -> None:
    with Store(tmp_path / "runs.db") as store:
        hand = Hand(store, job(tmp_path, "split", 4, groups=1, max_items=4), NOW - 100)
        batch, items = hand.start(NOW - 90)
        ids = [item.id for item in items]
        hand.settle(batch, Settlement(split=[ids[:2], ids[2:]]), NOW - 80)
        view = views.run_view(store, "split", now=NOW)
    assert [(line.what, line.tone) for line in view.log] == [
        ("batch 3 (split from 1): 2 items running → queued", "queued"),
        ("batch 2 (split from 1): 2 items running → queued", "queued"),
        ("batch 1: 4 items queued → running", "running"),
        ("batch 1: 4 items pending → queued", "queued"),
        ("4 items new, pending", "pending"),
    ]


def test_throughput_after_a_resume_counts_from_when_work_began_again(tmp_path: Path) -> None:
    with Store(tmp_path / "runs.db") as store:
        hand = Hand(store, job(tmp_path, "slow", 8, groups=1, max_items=4), NOW - 3_600)
        hand.complete(NOW - 3_590, NOW - 3_580)
        hand.complete(NOW - 10, NOW - 5)
        view = views.run_view(store, "slow", now=NOW)
    assert view.per_minute == 24.0


async def test_a_run_defined_with_a_python_handler_shows_its_handler_and_its_failures(
    tmp_path: Path, store: Store
) -> None:
    await python_run(store, tmp_path)
    app = RunnerApp(store.path, "test")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, RunScreen) and app.screen.view is not None
        assert app.screen.view.provider == "python · support.label_all_but_p001"
        assert (app.screen.view.standing.counts["completed"], app.screen.view.standing.counts["failed"]) == (3, 1)
        await pilot.press("f")
        await settle(pilot)
        assert isinstance(app.screen, FailuresScreen) and app.screen.view is not None
        assert [(k.kind, k.count) for k in app.screen.view.kinds] == [("item_invalid", 1)]


async def test_the_runs_list_tells_a_held_run_whose_engine_waits_from_one_with_no_engine(tmp_path: Path) -> None:
    db = build(tmp_path)
    with Store(db, create=False) as store:
        live_engine(store, "summaries", "live", started_at=NOW - 60, heartbeat_at=NOW - 1)
    app = RunnerApp(db, clock=lambda: NOW)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(RunsTable)
        states = {run: table.get_cell(run, "state").plain.split("\n") for run in ("summaries", "tickets", "drafts")}
        assert whole_width(table)
    assert states == {
        "summaries": [" paused", " engine waits"], "tickets": [" needs a person", " no engine"], "drafts": [" stopped"],
    }
