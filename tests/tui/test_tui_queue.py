"""The TUI shows scheduled items (issue 19): the run panel counts them with the next time, the run screen's w lists
them, each with its time, and an item's detail says when it is sent."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from textual.screen import Screen
from textual.widgets._footer import FooterKey
from support import add_all, make_job, posts, write_jsonl
from tui_support import NOW, press, shown

from runner import adding
from runner.job_queue import Schedule
from runner.store import Store, views
from tui.app import RunnerApp
from tui.run_panel import run_text
from tui.screens.failures import ItemScreen
from tui.screens.run import RunScreen
from tui.screens.scheduled import ScheduledScreen, ScheduledTable

def footer_keys(screen: Screen[None]) -> list[str]:
    """The descriptions of the keys the screen's footer shows."""
    return [key.description for key in screen.query(FooterKey)]


#: In 2096: a date, not today's, whatever day the test runs.
LATER = 4_000_000_000


def test_the_run_panel_shows_scheduled_items_apart_with_the_next_time(tmp_path: Path) -> None:
    records = posts(4)
    records[0]["send_at"] = records[3]["send_at"] = LATER
    job = dataclasses.replace(make_job(tmp_path, "http://127.0.0.1:9/v1", records), schedule=Schedule("send_at"))
    with Store(tmp_path / "runs.db") as store:
        add_all(store, job, now=1_800_000_000.0)
        text = run_text(views.run_view(store, "test", now=1_800_000_000.0)).plain
    assert "2 items scheduled, the next at 2096-" in text
    assert "left 4 items, 2 scheduled for later;" in text


async def test_the_run_screen_lists_the_scheduled_items_each_with_its_time_and_the_detail_says_it(
    tmp_path: Path,
) -> None:
    with Store(tmp_path / "runs.db") as store:
        add_all(store, make_job(tmp_path, "http://127.0.0.1:9/v1", posts(2)), now=NOW)
        adding.add(store, "test", write_jsonl(tmp_path / "later.jsonl", posts(5)[2:]), at=LATER + 60, now=NOW)
        adding.add(store, "test", write_jsonl(tmp_path / "sooner.jsonl", posts(6)[5:]), at=LATER, now=NOW)
    app = RunnerApp(tmp_path / "runs.db", "test", clock=lambda: NOW)
    async with app.run_test(size=(120, 30)) as pilot:
        await press(pilot)
        assert isinstance(app.screen, RunScreen)
        assert "Scheduled" in footer_keys(app.screen)
        await press(pilot, "w")
        assert isinstance(app.screen, ScheduledScreen)
        lines = shown(app.screen.query_one(ScheduledTable))
        title = " ".join(shown(app.screen.query_one("#scheduled-title")))
        await press(pilot, "enter")
        assert isinstance(app.screen, ItemScreen)
        head = " ".join(shown(app.screen.query_one("#item-head")))
    assert "4 items of test scheduled, the earliest first" in title
    rows = [line for line in lines[1:] if line]
    assert [line.split()[0] for line in rows] == ["p005", "p002", "p003", "p004"]
    assert all("scheduled for 2096-" in line for line in rows)
    assert "p005" in head and "scheduled for 2096-" in head


async def test_the_scheduled_key_shows_only_while_items_are_scheduled(tmp_path: Path) -> None:
    with Store(tmp_path / "runs.db") as store:
        add_all(store, make_job(tmp_path, "http://127.0.0.1:9/v1", posts(2)), now=NOW)
    app = RunnerApp(tmp_path / "runs.db", "test", clock=lambda: NOW)
    async with app.run_test(size=(120, 30)) as pilot:
        await press(pilot)
        footer = footer_keys(app.screen)
    assert "Scheduled" not in footer and "Failures" in footer


def test_the_run_panel_and_the_runs_table_show_the_shared_queue_a_run_takes_turns_in(tmp_path: Path) -> None:
    from tui.screens.runs import _cells

    job = make_job(tmp_path, "http://127.0.0.1:9/v1", posts(2))
    job = dataclasses.replace(job, provider=dataclasses.replace(job.provider, queue="openai-main"))
    with Store(tmp_path / "runs.db") as store:
        add_all(store, job, now=1_800_000_000.0)
        store.set_queue("openai-main", concurrency=8)
        text = run_text(views.run_view(store, "test", now=1_800_000_000.0)).plain
        cells = _cells(views.standing(store, "test", now=1_800_000_000.0))
    assert "queue openai-main: 0 of 8 in flight, this run 0 · breaker closed" in text
    assert any(str(cell) == "closed\nqueue openai-main" for cell in cells)


async def test_at_80_columns_the_scheduled_screens_title_wraps_whole(tmp_path: Path) -> None:
    with Store(tmp_path / "runs.db") as store:
        add_all(store, make_job(tmp_path, "http://127.0.0.1:9/v1", posts(2)), now=NOW)
        adding.add(store, "test", write_jsonl(tmp_path / "later.jsonl", posts(5)[2:]), at=LATER, now=NOW)
    app = RunnerApp(tmp_path / "runs.db", "test", clock=lambda: NOW)
    async with app.run_test(size=(80, 24)) as pilot:
        await press(pilot, "w")
        title = " ".join(line.strip() for line in shown(app.screen.query_one("#scheduled-title")))
    assert title.endswith("nothing is sent for an item before its time · Enter: detail"), title
