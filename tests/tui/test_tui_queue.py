"""The TUI's run panel shows scheduled items apart, with the next time (issue 19)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from support import add_all, make_job, posts

from runner.job_queue import Schedule
from runner.store import Store, views
from tui.run_panel import run_text


def test_the_run_panel_shows_scheduled_items_apart_with_the_next_time(tmp_path: Path) -> None:
    records = posts(4)
    records[0]["send_at"] = records[3]["send_at"] = 4_000_000_000  # in 2096
    job = dataclasses.replace(make_job(tmp_path, "http://127.0.0.1:9/v1", records), schedule=Schedule("send_at"))
    with Store(tmp_path / "runs.db") as store:
        add_all(store, job, now=1_800_000_000.0)
        text = run_text(views.run_view(store, "test", now=1_800_000_000.0)).plain
    assert "2 items scheduled, the next at 2096-" in text


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
