"""The notebook API takes issue 19's queue keys: ``schedule=``, ``priority=``, ``queue=`` and a kind's own retry limits."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from support import add_all, make_job, posts

from runner.job_queue import KindRetry, Schedule
from runner.notebook import Run
from runner.sim import Simulator
from runner.store import Store
from runner.widgets import RunPanel


async def test_a_run_defined_in_python_sends_its_highest_priority_items_first_and_none_before_its_time(
    tmp_path: Path, sim: Simulator
) -> None:
    records = [{**post, "rank": rank} for post, rank in zip(posts(3), [0, 2, 1], strict=True)]
    records[0]["send_at"] = "2000-01-01T00:00:00Z"  # long past: at once
    run = Run("nb", records, db=tmp_path / "runs.db", base_url=sim.base_url, schedule="send_at", priority="rank",
              batch={"max_items": 1, "concurrency": 1}, retry={"transport": {"max_attempts": 5}})
    assert (run.job.schedule.field, run.job.batch.priority_field) == ("send_at", "rank")
    assert run.job.retry.transport == KindRetry(max_attempts=5)
    assert (await run.go()).exit_code == 0
    assert [call["ids"] for call in sim.ledger.snapshot()["calls"]] == [["p001"], ["p002"], ["p000"]]


def test_the_panel_shows_scheduled_items_apart_with_the_next_time(tmp_path: Path) -> None:
    records = posts(3)
    records[1]["send_at"] = 4_000_000_000  # in 2096
    job = dataclasses.replace(make_job(tmp_path, "http://127.0.0.1:9/v1", records), schedule=Schedule("send_at"))
    with Store(tmp_path / "runs.db") as store:
        add_all(store, job, now=1_800_000_000.0)
    panel = RunPanel(tmp_path / "runs.db", "test", live=False)
    try:
        assert "1 item scheduled, the next at 2096-" in panel.breaker.value
        assert panel.numbers["waiting"].value == "1"
    finally:
        panel.close()


async def test_a_run_defined_in_python_takes_turns_in_the_shared_queue_it_names(tmp_path: Path, sim: Simulator) -> None:
    run = Run("nb", posts(4), db=tmp_path / "runs.db", base_url=sim.base_url, queue="openai-main", queue_priority=3,
              batch={"max_items": 1, "concurrency": 3})
    assert (await run.go()).exit_code == 0
    with Store(tmp_path / "runs.db") as store:
        (queue,) = store.queues()
    assert (queue["name"], queue["concurrency"]) == ("openai-main", 3)
    assert [(held["run"], held["priority"]) for held in queue["runs"]] == [("nb", 3)]


def test_the_panel_shows_the_shared_queue_of_its_run(tmp_path: Path) -> None:
    job = make_job(tmp_path, "http://127.0.0.1:9/v1", posts(2))
    job = dataclasses.replace(job, provider=dataclasses.replace(job.provider, queue="openai-main"))
    with Store(tmp_path / "runs.db") as store:
        add_all(store, job, now=1_800_000_000.0)
    panel = RunPanel(tmp_path / "runs.db", "test", live=False)
    try:
        assert "queue openai-main: 0 of 2 in flight, this run 0 · breaker closed" in panel.breaker.value
    finally:
        panel.close()
