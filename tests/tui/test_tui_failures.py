"""Failures: by kind, an item's detail with its history, and a retry (of a kind or an item) that a real engine sends."""

from __future__ import annotations

import json
import re
from pathlib import Path

from support import StepClock, make_job, posts, write_jsonl
from tui_support import NOW, build, press, settle, shown

from runner import jobs, runs
from runner.jobs import Job
from runner.sim import Simulator
from runner.model import ItemState
from runner.store import Store, views
from tui.app import RunnerApp
from tui.screens.dialog import AskScreen
from tui.screens.failures import FailuresScreen, ItemScreen


async def failed_run(tmp_path: Path, sim: Simulator, store: Store, clock: StepClock) -> Job:
    """Five items sent one by one, in order; p001 and p003 refused (400), never retried on their own.

    One slot: with two, p002's answer could be saved after p003's refusal,
    making the refusals two in a row, which stops the run (exit 4).
    """
    sim.set_faults({"rules": [{"fault": "http_400", "keys": ["p001", "p003"]}]})
    job = make_job(tmp_path, sim.base_url, posts(5), max_items=1, concurrency=1)
    outcome = await runs.execute(store, job, clock=clock)
    assert outcome.exit_code == 3
    sim.set_faults(None)
    return job


def states(store: Store) -> dict[str, str]:
    return {row["key"]: row["state"] for row in views.items(store, store.run_id("test"))}


async def test_t_on_a_kind_retries_its_items_after_asking_and_the_engine_completes_them(
    tmp_path: Path, sim: Simulator, store: Store, clock: StepClock
) -> None:
    job = await failed_run(tmp_path, sim, store, clock)
    app = RunnerApp(store.path, "test")
    async with app.run_test(size=(120, 40)) as pilot:
        await press(pilot, "f")
        assert isinstance(app.screen, FailuresScreen) and app.screen.view is not None
        assert [(k.kind, k.count, k.retryable) for k in app.screen.view.kinds] == [("bad_request", 2, 0)]
        await press(pilot, "shift+tab", "t")
        assert isinstance(app.screen, AskScreen) and app.screen.question == "Retry 2 failed items of kind bad_request?"
        assert str(app.screen.body).startswith("plan: 2 items · 2 charge-safe (cost unknown)")  # refused: never billed
        assert app.screen.warning is None
        await pilot.press("y")
        await settle(pilot)
        assert isinstance(app.screen, FailuresScreen) and app.screen.view is not None
        assert app.screen.view.kinds == ()
    assert states(store)["p001"] == states(store)["p003"] == ItemState.PENDING
    again = await runs.execute(store, job, clock=clock, read_input=False)
    assert again.exit_code == 0 and set(states(store).values()) == {ItemState.COMPLETED}


async def test_an_items_detail_shows_its_history_and_t_retries_only_that_item(
    tmp_path: Path, sim: Simulator, store: Store, clock: StepClock
) -> None:
    await failed_run(tmp_path, sim, store, clock)
    app = RunnerApp(store.path, "test")
    async with app.run_test(size=(120, 40)) as pilot:
        await press(pilot, "f")
        await pilot.press("down", "enter")
        await settle(pilot)
        assert isinstance(app.screen, ItemScreen) and app.screen.view is not None
        item = app.screen.view
        assert (item.key, item.state, item.kind, item.attempts, item.paid_calls) == (
            "p003", "failed", "bad_request", 1, 0
        )
        assert [(h.from_state, h.to_state, h.batch_items) for h in item.history] == [
            ("pending", "queued", 1), ("queued", "running", 1), ("running", "failed", None)
        ]
        assert json.loads(item.input)["id"] == "p003"
        await press(pilot, "t", "y")
        assert isinstance(app.screen, ItemScreen) and app.screen.view is not None
        assert app.screen.view.state == ItemState.PENDING
    assert states(store) == {"p000": "completed", "p001": "failed", "p002": "completed", "p003": "pending",
                             "p004": "completed"}


async def test_cancelling_a_retry_changes_nothing(tmp_path: Path, sim: Simulator, store: Store, clock: StepClock) -> None:
    await failed_run(tmp_path, sim, store, clock)
    app = RunnerApp(store.path, "test")
    async with app.run_test(size=(120, 40)) as pilot:
        await press(pilot, "f")
        await press(pilot, "t", "escape")
        assert isinstance(app.screen, FailuresScreen)
    assert states(store)["p001"] == states(store)["p003"] == ItemState.FAILED


async def test_the_failures_screen_starts_on_its_items_so_enter_opens_the_first(tmp_path: Path) -> None:
    app = RunnerApp(build(tmp_path), "posts", clock=lambda: NOW)
    async with app.run_test(size=(80, 24)) as pilot:
        await press(pilot, "f", "enter")
        assert isinstance(app.screen, ItemScreen) and app.screen.view is not None
        assert app.screen.view.key == "p005"


async def test_an_items_long_input_wraps_in_full_at_80_columns(
    tmp_path: Path, sim: Simulator, store: Store, clock: StepClock
) -> None:
    body = " ".join(f"word{i:02d}" for i in range(60))
    sim.set_faults({"rules": [{"fault": "http_400", "keys": ["p000"]}]})
    outcome = await runs.execute(store, make_job(tmp_path, sim.base_url, posts(1, body=body)), clock=clock)
    assert outcome.exit_code == 3
    app = RunnerApp(store.path, "test")
    async with app.run_test(size=(80, 24)) as pilot:
        await press(pilot, "f", "enter")
        box = app.screen.query_one("#item-input")
        words = re.findall(r"word\d\d", " ".join(shown(box)))
    assert words == [f"word{i:02d}" for i in range(60)]


async def test_the_failures_title_counts_one_failed_item_in_the_singular(
    tmp_path: Path, sim: Simulator, store: Store, clock: StepClock
) -> None:
    sim.set_faults({"rules": [{"fault": "http_400", "keys": ["p001"]}]})
    assert (await runs.execute(store, make_job(tmp_path, sim.base_url, posts(3), max_items=1), clock=clock)).exit_code == 3
    app = RunnerApp(store.path, "test")
    async with app.run_test(size=(120, 40)) as pilot:
        await press(pilot, "f")
        assert " ".join(shown(app.screen.query_one("#failures-title"))).startswith("1 failed item of test, by kind")


#: A pipeline of two stages over the simulator: ``classify``, then ``summarize`` (a string).
PIPELINE = """name = "triage"
input = "posts.jsonl"
key = "id"
[batch]
max_items = 1
concurrency = 1
[provider]
base_url = "{url}"
[[stage]]
name = "classify"
{stages}"""
SUMMARIZE = '[[stage]]\nname = "summarize"\n[stage.output.schema]\nrequired = ["summary"]\n'


async def test_in_a_pipeline_each_failed_item_shows_its_stage_and_a_retry_says_it_is_sent_again_there(
    tmp_path: Path, sim: Simulator, store: Store, clock: StepClock
) -> None:
    write_jsonl(tmp_path / "posts.jsonl", posts(2))
    job_file = tmp_path / "pipeline.toml"
    job_file.write_text(PIPELINE.format(url=sim.base_url, stages=""))
    await runs.execute(store, jobs.load(job_file), clock=clock)
    sim.set_faults({"rules": [{"fault": "http_400", "keys": ["p001"]}]})
    job_file.write_text(PIPELINE.format(url=sim.base_url, stages=SUMMARIZE))
    assert (await runs.execute(store, jobs.load(job_file), clock=clock)).exit_code == 3
    app = RunnerApp(store.path, "triage")
    async with app.run_test(size=(120, 40)) as pilot:
        await press(pilot, "f")
        assert " ".join(shown(app.screen.query_one("#failed"))).count("at summarize:") == 1
        await press(pilot, "t")
        assert isinstance(app.screen, AskScreen)
        assert str(app.screen.body).startswith("plan: 1 item · 1 charge-safe")  # answered at classify only
        assert "It is sent again at stage summarize; the results of the stages before it are kept." in str(
            app.screen.body)
