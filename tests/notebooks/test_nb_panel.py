"""The notebook panel in plain pytest: it shows what the store says, and its buttons steer real engines.

Each test runs a real engine (``runner.runs.execute``) against the simulator
over loopback; the panel only reads the store and writes commands, and the
engine, in this loop or in a killed CLI process, obeys them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from comm import DummyComm
from support import KillAtFirstCall, commands_given, make_job, posts, python_run, write_jsonl
from scenes import engine_row, write_lock_held
from unwritable import NOW, SMALL_COUNTS, Folder, small_store

from runner import archiving, cli, jobs, lease, liveness, runs
from runner.store import views
from runner.jobs import RetryLimits
from runner.sim import Simulator
from runner.panel_html import ERROR_COLOUR
from runner.store import Store
from runner.store.answers import STATES
from runner.widgets import RunPanel

NEEDS_LABEL = {"type": "object", "required": ["label"]}


def shown(panel: RunPanel) -> dict[str, int]:
    """The seven numbers the panel shows."""
    return {state: int(label.value) for state, label in panel.numbers.items()}


def table(html: str) -> dict[str, dict[str, int]]:
    """The group x state table, read back from the panel's HTML."""
    rows = {}
    for group, cells in re.findall(r"<tr><td[^>]*><b>(.*?)</b></td>(.*?)</tr>", html):
        numbers = [0 if n == "·" else int(n) for n in re.findall(r">(\d+|·)</td>", cells)]
        rows[group] = dict(zip(STATES, numbers[:7], strict=True))
    return rows


def requests(sim: Simulator) -> int:
    return int(sim.ledger.snapshot()["requests"])


async def until(condition: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


@pytest.fixture
def panels() -> Iterator[list[RunPanel]]:
    made: list[RunPanel] = []
    yield made
    for panel in made:
        panel.close()


def panel_of(panels: list[RunPanel], db: Path, name: str = "test", **options: object) -> RunPanel:
    panel = RunPanel(db, name, live=False, **options)  # type: ignore[arg-type]
    panels.append(panel)
    return panel


async def test_the_panel_shows_the_numbers_runner_status_prints(
    tmp_path: Path, store: Store, panels: list[RunPanel]
) -> None:
    with Simulator(faults={"rules": [{"fault": "invalid_items", "keys": ["p003", "p006"]}]}).start() as sim:
        job = make_job(tmp_path, sim.base_url, posts(20, groups=2), max_items=5, max_attempts=1, schema=NEEDS_LABEL)
        await runs.execute(store, job)
    panel = panel_of(panels, store.path)
    printed = json.loads(CliRunner().invoke(cli.main, ["status", "test", "--db", str(store.path), "--json"]).output)
    assert shown(panel) == printed["counts"] == views.status(store, "test", now=time.time())["counts"]
    assert printed["counts"]["completed"] == 18 and printed["counts"]["failed"] == 2
    assert table(panel.groups.value) == printed["groups"]
    assert panel.tabs.titles == ("By group", "Failures (2)", "Confirmations (0)", "Decisions (0)")
    assert "20 items" in panel.title.value and "no engine running" in panel.title.value
    assert "closed" in panel.breaker.value
    tokens = printed["cost"]["tokens"]  # the cost line, as runner status has it (sim-model: no price)
    assert f"tokens {tokens['input']:,} in" in panel.cost.value and "cost unknown" in panel.cost.value
    assert (panel.pause_button.disabled, panel.resume_button.disabled, panel.step_button.disabled) == (
        False, True, True,
    )


def several_workers(tmp_path: Path, store: Store, now: float) -> None:
    """Run ``test`` of 10 items worked by two workers of this process (the first holding a batch of 4) and, first
    to join, one on another host whose heartbeat stopped 40 s ago."""
    run_id = runs.prepare(store, make_job(tmp_path, "http://127.0.0.1:9/v1", posts(10)), now=now)
    engine_row(store, "test", "gone", pid=4242, host="elsewhere", started_at=now - 90, heartbeat_at=now - 40)
    for token in ("first", "second"):
        lease.join(store, "test", token=token, now=now)
    store.claim_batch(run_id, max_items=4, max_chars=10**6, now=now, owner="first")


def worker_lines(panel: RunPanel) -> list[str]:
    """The lines under the panel's head, one per worker, as text."""
    return [re.sub(r"<[^>]+>", "", line) for line in re.findall(r"<div>(.*?)</div>", panel.title.value)]


def test_the_panel_shows_a_line_per_worker_with_what_it_holds_when_several_work_the_run(
    tmp_path: Path, store: Store, panels: list[RunPanel]
) -> None:
    now = time.time()
    several_workers(tmp_path, store, now)
    here = f"{liveness.this_host()}:{os.getpid()}"
    assert worker_lines(panel_of(panels, store.path, now=lambda: now)) == [
        "elsewhere:4242 · dead · beat 40s ago · holds 0 batches (0 items)",
        f"{here} · alive · beat 0s ago · holds 1 batch (4 items)",
        f"{here} · alive · beat 0s ago · holds 0 batches (0 items)",
    ]


def test_the_panel_of_a_run_one_worker_works_shows_no_worker_lines(
    tmp_path: Path, store: Store, panels: list[RunPanel]
) -> None:
    now = time.time()
    several_workers(tmp_path, store, now)
    for token in ("gone", "second"):
        store.leave_run("test", token=token)
    panel = panel_of(panels, store.path, now=lambda: now)
    assert worker_lines(panel) == [] and "engine running ·" in panel.title.value


async def test_the_panel_of_a_run_defined_with_a_python_handler_shows_its_numbers_and_failures(
    tmp_path: Path, store: Store, panels: list[RunPanel]
) -> None:
    await python_run(store, tmp_path)
    panel = panel_of(panels, store.path)
    assert (shown(panel)["completed"], shown(panel)["failed"]) == (3, 1)
    assert panel.tabs.titles == ("By group", "Failures (1)", "Confirmations (0)", "Decisions (0)")


async def test_the_failures_explorer_shows_an_item_in_full(
    tmp_path: Path, store: Store, panels: list[RunPanel]
) -> None:
    with Simulator(faults={"rules": [{"fault": "invalid_items", "keys": ["p003"]}]}).start() as sim:
        job = make_job(tmp_path, sim.base_url, posts(10), max_items=5, max_attempts=2, schema=NEEDS_LABEL)
        job = dataclasses.replace(job, retry=RetryLimits(backoff=0.01, max_attempts=2))
        await runs.execute(store, job)
    panel = panel_of(panels, store.path)
    assert panel.kinds.options == (("item_invalid (1)", "item_invalid"),)
    assert panel.failed.value == "p003"
    detail = panel.detail.value
    assert "<b>p003</b>" in detail and "kind <b>item_invalid</b>" in detail
    assert "2 attempts · 2 paid calls" in detail
    assert "Something about the product #3" in detail  # the input
    assert ">{&quot;id&quot;:&quot;p003&quot;}<" in detail  # the model's output for it: its id alone
    assert "result does not fit the output schema" in detail
    history = re.findall(r"<td[^>]*>(\w*) → (\w+)</td>", detail)
    assert history == [
        ("pending", "queued"), ("queued", "running"), ("running", "received"), ("received", "completed"),
        ("received", "waiting"), ("waiting", "queued"), ("queued", "running"), ("running", "received"),
        ("received", "failed"),
    ]
    assert "batch 1: 4 items" in detail and "batch 3: 1 item<" in detail  # its batches' moves, with how many moved


async def test_pause_lets_the_batches_in_flight_finish_and_starts_no_new_one(
    tmp_path: Path, store: Store, panels: list[RunPanel]
) -> None:
    gate = threading.Event()
    with Simulator(on_request=lambda ids: gate.wait(10)).start() as sim:
        try:
            job = make_job(tmp_path, sim.base_url, posts(40, groups=4), max_items=5, concurrency=2)
            engine = asyncio.create_task(runs.execute(store, job))
            await until(lambda: sim.ledger.snapshot()["in_flight"] == 2)
            panel = panel_of(panels, store.path)
            assert shown(panel)["running"] == 10 and "engine running" in panel.title.value
            panel.pause_button.click()
        finally:
            gate.set()
        outcome = await asyncio.wait_for(engine, 30)
        assert requests(sim) == 2
    assert outcome.stopped_for == "paused by a person"
    panel.refresh()
    assert shown(panel) == {**dict.fromkeys(STATES, 0), "completed": 10, "pending": 30}
    assert "paused" in panel.breaker.value
    assert (panel.pause_button.disabled, panel.resume_button.disabled, panel.step_button.disabled) == (
        True, False, False,
    )
    assert commands_given(store) == ["pause"]


async def test_step_runs_one_batch_of_a_live_engine_and_resume_lets_it_finish(
    tmp_path: Path, store: Store, panels: list[RunPanel]
) -> None:
    with Simulator().start() as sim:
        job = make_job(tmp_path, sim.base_url, posts(40, groups=4), max_items=5)
        runs.prepare(store, job, now=time.time())
        panel = panel_of(panels, store.path)
        panel.pause_button.click()
        assert "no engine is running this run" in panel.message.value
        engine = asyncio.create_task(runs.execute(store, job, wait_for_person=True, read_input=False))
        await until(lambda: views.status(store, "test", now=time.time())["engine"]["alive"])
        panel.step_button.click()
        await until(lambda: views.status(store, "test", now=time.time())["counts"]["completed"] == 5)
        await asyncio.sleep(1.2)  # two turns of the engine's loop: no second batch starts
        assert requests(sim) == 1
        panel.refresh()
        assert shown(panel)["completed"] == 5 and "paused" in panel.breaker.value
        panel.resume_button.click()
        outcome = await asyncio.wait_for(engine, 30)
        assert requests(sim) == 8
    assert outcome.exit_code == 0
    panel.refresh()
    assert shown(panel) == {**dict.fromkeys(STATES, 0), "completed": 40}
    assert commands_given(store) == ["pause", "step", "resume"]


async def test_retry_sends_the_chosen_kind_back_and_a_real_engine_completes_it(
    tmp_path: Path, store: Store, panels: list[RunPanel]
) -> None:
    plan = {"rules": [{"fault": "invalid_items", "keys": ["p001", "p002"]}, {"fault": "http_400", "keys": ["p009"]}]}
    with Simulator(faults=plan).start() as sim:
        job = make_job(tmp_path, sim.base_url, posts(10), max_items=5, max_attempts=1, schema=NEEDS_LABEL)
        assert (await runs.execute(store, job)).exit_code == 3
        panel = panel_of(panels, store.path)
        assert {kind: label for label, kind in panel.kinds.options} == {
            "bad_request": "bad_request (1)", "item_invalid": "item_invalid (2)",
        }
        panel.kinds.value = "item_invalid"
        assert panel.retry_button.description == "Retry item_invalid (2)"
        panel.retry_button.click()  # the plan first: answered items may be billed again
        assert panel.plan.text.value == "<b>plan: 2 items · 0 charge-safe · 2 may be billed again (cost unknown)</b>"
        assert "pending again" not in panel.message.value and panel.plan.widget.layout.display is None
        panel.plan.go_button.click()
        assert "2 item_invalid items pending again" in panel.message.value
        assert panel.plan.widget.layout.display == "none"
        sim.set_faults(None)
        outcome = await runs.execute(store, job, read_input=False)
    assert outcome.exit_code == 3
    assert {f["kind"] for f in views.failures(store, "test")} == {"bad_request"}
    panel.refresh()
    assert shown(panel)["completed"] == 9 and panel.kinds.options == (("bad_request (1)", "bad_request"),)


JOB = """name = "crash"
input = "posts.jsonl"
[batch]
max_items = 5
concurrency = 1
[provider]
base_url = "{base_url}"
"""


def crash_a_cli_engine(folder: Path, sim: Simulator, crash: KillAtFirstCall) -> jobs.Job:
    """``runner run`` in a process of its own, killed while the simulator holds its first call."""
    write_jsonl(folder / "posts.jsonl", posts(10))
    (folder / "job.toml").write_text(JOB.format(base_url=sim.base_url))
    crash.run("run", "job.toml", cwd=folder)
    return jobs.load(folder / "job.toml")


async def test_confirm_warns_of_a_double_charge_and_releases_held_items_to_a_real_engine(
    tmp_path: Path, panels: list[RunPanel]
) -> None:
    crash = KillAtFirstCall()
    with Simulator(on_request=crash).start() as sim:
        job = crash_a_cli_engine(tmp_path, sim, crash)
        with Store(tmp_path / "runs.db") as store:
            assert (await runs.execute(store, job)).exit_code == 4
            panel = panel_of(panels, store.path, "crash")
            assert panel.tabs.titles[2] == "Confirmations (5)"
            assert "may run and charge twice" in panel.held.value
            assert all(f">{key}</td>" in panel.held.value for key in crash.ids)
            assert panel.confirm_button.disabled and panel.confirm_button.description == "Confirm 5 held"
            panel.confirm_button.click()  # not ticked: refused
            assert "tick the box first" in panel.message.value
            assert views.status(store, "crash", now=time.time())["needs_confirmation"] == 5
            panel.acknowledge.value = True
            assert not panel.confirm_button.disabled
            panel.confirm_button.click()
            assert panel.plan.text.value.startswith("<b>plan: 5 items · 0 charge-safe · 5 may be billed again")
            panel.plan.cancel_button.click()  # nothing sent
            assert views.status(store, "crash", now=time.time())["needs_confirmation"] == 5
            panel.confirm_button.click()
            panel.plan.go_button.click()
            assert "5 items: sends the items again" in panel.message.value
            assert views.status(store, "crash", now=time.time())["needs_confirmation"] == 0
            assert (await runs.execute(store, job)).exit_code == 0
            panel.refresh()
        billed = sim.ledger.snapshot()["billed"]
    assert sorted(key for key, n in billed.items() if n == 2) == crash.ids
    assert shown(panel)["completed"] == 10
    assert panel.tabs.titles[2] == "Confirmations (0)" and panel.confirm_button.disabled
    assert not panel.acknowledge.value


def waits_neutrally(panel: RunPanel) -> bool:
    """The panel says, in no error colour and with its buttons off, that its run is not there yet."""
    buttons = (panel.pause_button, panel.resume_button, panel.step_button)
    return ("no run 'test' yet in runs.db" in panel.title.value and ERROR_COLOUR not in panel.title.value
            and all(button.disabled for button in buttons))


async def test_a_panel_made_before_its_run_says_it_waits_for_it_then_fills_in_on_the_running_loop(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    panel = RunPanel(db, "test", interval=0.05)
    try:
        assert waits_neutrally(panel)  # no store yet
        with Simulator(latency=0.01).start() as sim, Store(db) as store:
            panel.refresh()
            assert waits_neutrally(panel)  # a store, but not this run in it
            await runs.execute(store, make_job(tmp_path, sim.base_url, posts(20, groups=2), max_items=5))
            await until(lambda: panel.numbers["completed"].value == "20")
        assert panel.status is not None and panel.status["total"] == 20
        assert "20 items" in panel.title.value and not panel.pause_button.disabled
    finally:
        panel.close()
    assert panel._task is None


async def test_stop_sends_the_whole_last_state_so_that_a_notebook_saved_afterwards_shows_the_end(
    tmp_path: Path, store: Store, panels: list[RunPanel], monkeypatch: pytest.MonkeyPatch
) -> None:
    panel = panel_of(panels, store.path)  # made before its run, as in notebook 02
    await python_run(store, tmp_path)
    panel.refresh()  # a periodic refresh: its messages belong to the cell that made the panel
    sent: dict[str, dict[str, Any]] = {}

    def record(comm: Any, data: dict[str, Any] | None = None, **_: Any) -> None:
        if data and data.get("method") == "update":
            sent.setdefault(comm.comm_id, {}).update(data["state"])

    monkeypatch.setattr(DummyComm, "send", record)
    panel.stop()  # nothing changed since that refresh, and yet all of it is sent from here
    assert {state: int(sent[label.model_id]["value"]) for state, label in panel.numbers.items()} == {
        **dict.fromkeys(STATES, 0), "completed": 3, "failed": 1,
    }
    assert sent[panel.tabs.model_id]["titles"] == ("By group", "Failures (1)", "Confirmations (0)", "Decisions (0)")
    assert sent[panel.numbers["failed"].model_id]["description"] == "failed"
    assert sent[panel.acknowledge.layout.model_id]["display"] == "none"
    assert panel._task is None and shown(panel)["completed"] == 3


@pytest.mark.parametrize("made", ["read_only", "fill"])
def test_the_panel_shows_a_store_it_cannot_write_and_says_why_a_pause_was_not_written(
    unwritable: Folder, panels: list[RunPanel], made: str
) -> None:
    db = small_store(unwritable.path)
    getattr(unwritable, made)()
    panel = panel_of(panels, db, "posts")
    assert shown(panel) == SMALL_COUNTS and panel.tabs.titles[1] == "Failures (1)"
    panel.pause_button.click()
    assert panel.message.value.startswith(f"<span style='color:{ERROR_COLOUR}'>{db} cannot be written here (")
    assert panel.message.value.endswith("); nothing was written</span>")
    assert shown(panel) == SMALL_COUNTS and not panel.pause_button.disabled


def test_the_panel_opens_while_another_process_holds_the_write_lock(panels: list[RunPanel], tmp_path: Path) -> None:
    db = small_store(tmp_path)
    with write_lock_held(db):  # its breaker opened but not committed: not shown
        panel = panel_of(panels, db, "posts")
        assert shown(panel) == SMALL_COUNTS and "closed" in panel.breaker.value


def test_cancel_run_asks_with_a_first_click_and_cancels_the_unfinished_items_with_the_second(
    tmp_path: Path, store: Store, panels: list[RunPanel]
) -> None:
    runs.prepare(store, make_job(tmp_path, "http://127.0.0.1:9/v1", posts(3)), now=time.time())
    panel = panel_of(panels, store.path)
    panel.cancel_button.click()
    asked, counts_asked = panel.message.value, shown(panel)
    panel.cancel_button.click()
    assert "click Cancel run again to fail 3 unfinished items as cancelled" in asked
    assert "batches in flight finish first" in asked and counts_asked["pending"] == 3
    assert "3 items cancelled" in panel.message.value
    assert shown(panel)["failed"] == 3 and panel.cancel_button.disabled
    assert {f["kind"] for f in views.failures(store, "test")} == {"cancelled"}


def test_the_panel_says_how_many_items_are_archived_beside_the_run_s_items(
    tmp_path: Path, panels: list[RunPanel]
) -> None:
    db = small_store(tmp_path)
    panel = panel_of(panels, db, "posts")
    assert "archived" not in panel.title.value
    with Store(db) as store:
        archiving.archive(store, "posts", ages={"completed": "0m", "failed": "0m"}, now=NOW)
    panel.refresh()
    assert "3 items · 2 archived · no engine running" in panel.title.value
