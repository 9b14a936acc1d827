"""A run's screen says how its engine stands or ended, how long a finished run took, the breaker's slots (or, held,
what a person lets start), and a person's commands in words."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from scenes import live_engine, no_engine
from support import make_job, posts
from textual.notifications import Notify
from tui_support import LEASE, NOW, Hand, build, job, press, settle, shown

from runner import archiving, runs
from runner.breaker import Control
from runner.model import BreakerState, FailureKind
from runner.store import Settlement, Store
from runner.store.answers import STATES, RunState, RunView, Standing
from tui import format
from tui.app import RunnerApp
from tui.run_panel import RunPanel, engine
from tui.screens.run import RunScreen
from tui.widgets import EventLog


async def run_screen(
    tmp_path: Path, run: str, size: tuple[int, int] = (140, 45), *, opened_as: str | None = None
) -> list[str]:
    """What the run panel of ``run`` shows, over the fixed store at ``NOW``, opened by its full path or as given."""
    db = build(tmp_path)
    app = RunnerApp(opened_as or db, run, clock=lambda: NOW)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, RunScreen)
        return [line.strip("│ ") for line in shown(app.screen.query_one(RunPanel))]


@pytest.mark.parametrize("run, engine", [
    ("posts", "engine died: no heartbeat for 20s; `runner run posts` recovers the run"),
    ("archive", "engine ended: every item completed"),
    ("tags", "engine ended: every item finished, 1 failed (f shows them)"),
    ("drafts", "engine ended: stopped with 5 items to do; `runner run drafts` goes on"),
    ("summaries", "engine ended: stopped for a person: paused"),
    ("tickets", "engine ended: stopped for a person: 9 items await confirmation"),
])
async def test_a_run_says_how_its_engine_ended_and_died_only_when_its_lease_was_left_behind(
    tmp_path: Path, run: str, engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert engine in await run_screen(tmp_path, run, opened_as="runs.db")


async def test_a_run_with_archived_items_says_how_many_beside_its_items(tmp_path: Path) -> None:
    db = build(tmp_path)
    with Store(db) as store:
        archiving.archive(store, "archive", ages={"completed": "1d"}, now=NOW)
    app = RunnerApp(db, "archive", clock=lambda: NOW)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert "archive   done   8 items · 8 archived · openai-chat" in shown(app.screen.query_one(RunPanel))[0]


async def test_a_run_read_from_another_store_names_it_in_the_command_that_goes_on(tmp_path: Path) -> None:
    said = " ".join(await run_screen(tmp_path, "drafts"))
    assert f"engine ended: stopped with 5 items to do; `runner run drafts --db {tmp_path / 'runs.db'}` goes on" in said


async def test_a_finished_run_shows_how_long_it_took_for_how_many_completed_and_failed_not_a_rate(
    tmp_path: Path,
) -> None:
    lines = await run_screen(tmp_path, "tags")
    assert "took 40s: 5 items completed, 1 failed" in lines  # the failed told apart, never "finished"
    assert not [line for line in lines if "items/min" in line]


async def test_the_breaker_line_names_the_breaker_and_the_slots_free_apart(tmp_path: Path) -> None:
    assert "breaker closed, 2 of 2 slots free" in await run_screen(tmp_path, "archive")
    (tmp_path / "again").mkdir()
    assert "breaker probing, 0 of 2 slots free" in await run_screen(tmp_path / "again", "posts")


async def test_a_run_a_429_holds_back_says_until_when_no_batch_starts_and_gives_no_estimate(tmp_path: Path) -> None:
    with Store(tmp_path / "runs.db") as store:
        hand = Hand(store, job(tmp_path, "limited", 8, groups=1, max_items=4), NOW - 60)
        hand.complete(NOW - 50, NOW - 45)
        batch, items = hand.start(NOW - 5)
        limited = {item.id: (FailureKind.RATE_LIMITED, "429 Too Many Requests") for item in items}
        hand.settle(batch, Settlement(retry=limited, not_before=NOW + 3), NOW - 4)
        no_engine(store, "limited")
        live_engine(store, "limited", LEASE, started_at=NOW - 60, heartbeat_at=NOW - 1)
    app = RunnerApp(tmp_path / "runs.db", "limited", clock=lambda: NOW)
    async with app.run_test(size=(140, 45)) as pilot:
        await settle(pilot)
        lines = [line.strip("│ ") for line in shown(app.screen.query_one(RunPanel))]
    assert "breaker closed, 2 of 2 slots free" in lines
    until = time.strftime("%H:%M:%S", time.localtime(NOW + 3))  # the clock's day: no date
    assert f"rate limited by the upstream: no batch starts before {until}" in lines
    assert [line for line in lines if line.endswith("left 4 items; no estimate while rate limited")]


async def test_a_persons_commands_read_as_words_in_the_one_event_format(tmp_path: Path) -> None:
    app = RunnerApp(build(tmp_path), "posts", clock=lambda: NOW)
    async with app.run_test(size=(140, 45)) as pilot:
        await settle(pilot)
        log = [" ".join(line.split()) for line in shown(app.screen.query_one(EventLog))]
    assert log[0] == "ago what detail"
    assert [line for line in log if "person" in line or "batch run" in line] == [
        "9s resumed by a person one batch at a time until one succeeds, then full speed",
        "9s let 1 batch run a person's step: then the run stays held",
        "9s paused by a person no new batches; those in flight finish",
    ]


@pytest.mark.parametrize("control, line", [
    (Control(), "breaker closed, 2 of 2 slots free"),
    (Control(paused=True), "breaker closed · paused by a person: no new batches; 2 slots"),
    (Control(paused=True, steps=1), "breaker closed · paused by a person: 1 step allowed; 2 slots"),
    (Control(paused=True, steps=2), "breaker closed · paused by a person: 2 steps allowed; 2 slots"),
    (Control(breaker=BreakerState.OPEN, reason="401 invalid key"), "breaker open: no new batches; 2 slots\n  401 invalid key"),
])
def test_a_held_breaker_line_says_what_a_person_lets_start_not_0_slots_free(control: Control, line: str) -> None:
    assert format.breaker(control, concurrency=2, in_flight=0).plain == line


async def test_each_step_says_how_many_steps_are_allowed_in_words(tmp_path: Path, store: Store) -> None:
    runs.prepare(store, make_job(tmp_path, "http://127.0.0.1:9/v1", posts(3)), now=0.0)
    told: list[str] = []
    app = RunnerApp(store.path, "test")
    async with app.run_test(message_hook=lambda m: told.append(m.notification.message) if isinstance(m, Notify)
                            else None) as pilot:
        await press(pilot, "p", "s", "s")
    assert [t.split(". ")[0] for t in told] == [
        "paused test: no new batches; those in flight finish (breaker closed, paused)",
        "one more batch of test may run, then it stays held (breaker closed, paused, 1 step allowed)",
        "one more batch of test may run, then it stays held (breaker closed, paused, 2 steps allowed)",
    ]


@pytest.mark.parametrize("held, control, deciding, said", [
    (1, Control(paused=True, breaker=BreakerState.OPEN), 0, "1 item awaits confirmation"),
    (2, Control(), 0, "2 items await confirmation"),
    (0, Control(paused=True, breaker=BreakerState.OPEN), 0, "breaker open"),
    (0, Control(paused=True), 0, "paused"),
    (0, Control(), 1, "1 item waits for a decision (d shows them); 1 item to do; `runner run r` goes on"),
])
def test_a_run_stopped_for_a_person_names_what_holds_it_first_as_its_state_does(
    held: int, control: Control, deciding: int, said: str
) -> None:
    run = Standing(name="r", counts={s: 0 for s in STATES} | {"pending": 2}, groups={}, control=control, held=held,
                   engine_alive=False, duplicate_tasks=0, idle_for=None, needs_decision=deciding)
    view = RunView(run, concurrency=2, provider="p", go_on="runner run r", batches=(), log=(), per_minute=0.0)
    assert engine(view).plain == f"ended: stopped for a person: {said}"
    assert run.state is (RunState.PAUSED if said == "paused" else RunState.NEEDS_PERSON)
