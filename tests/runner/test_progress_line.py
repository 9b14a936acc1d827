"""The progress line of a run in a terminal: the run's state in words, read off the store's standing."""

from __future__ import annotations

import io
import time
from pathlib import Path

import pytest
from rich.console import Console, Group
from support import label_all_but_p001, make_job, posts

from runner import item_rows, progress_line, runs, tables
from runner.providers.handler import PythonHandler
from runner.store import Store
from runner.model import BreakerState, FailureKind, ItemState
from runner.rules.breaker import Control
from runner.rules.queues import joined
from runner.store.answers import STATES, QueueShare, RunView, Standing, time_left
from runner.terminal_run import RunProgress
from tui import run_panel

OPEN = Control(BreakerState.OPEN, "rate_limited: 429 from upstream")
#: 14:52:03 on the test machine's clock, whatever its time zone.
AT_14_52_03 = time.mktime((2026, 12, 2, 14, 52, 3, 0, 0, -1))


def standing(
    control: Control = Control(), *, held: int = 0, running: int = 0, pending: int = 0, limited: float | None = None
) -> Standing:
    """The run ``posts``: 10 completed, ``running`` (the ``held`` among them) and ``pending`` items.

    ``limited``: a rate limit holds every batch back until then.
    """
    counts = {state: 0 for state in STATES} | {
        ItemState.COMPLETED: 10, ItemState.RUNNING: running, ItemState.PENDING: pending,
    }
    return Standing("posts", counts, {"all": counts}, control, held, engine_alive=True, duplicate_tasks=0,
                    idle_for=None, rate_limited_until=limited, read_at=AT_14_52_03 - 60)


CASES = [
    (standing(running=2, pending=5), True, "posts: running", "", True),
    (standing(running=3, pending=5, held=1), True, "posts: running (1 item held for a confirmation)", "", True),
    (standing(running=1300, pending=5, held=1200), True, "posts: running (1,200 items held for a confirmation)", "",
     True),
    (standing(Control(paused=True), pending=5), True, "posts: paused by a person",
     "to go on: runner resume posts (or r in runner tui); Ctrl-C to leave", False),
    (standing(Control(paused=True), pending=5), False, "posts: paused by a person",
     "stopping once the batches in flight finish", False),
    (standing(OPEN, pending=5), True, "posts: breaker open (rate_limited: 429 from upstream)",
     "runner step posts lets one batch run, runner resume posts goes on; Ctrl-C to leave", False),
    (standing(Control(BreakerState.OPEN, "billing: no credit", kind=FailureKind.BILLING), pending=5), True,
     "posts: breaker open (billing: no credit)",
     "fix the cause, then: runner step posts lets one batch run, runner resume posts goes on; Ctrl-C to leave", False),
    (standing(Control(BreakerState.OPEN, "billing: no credit", paused=True), pending=5), True,
     "posts: paused by a person", "to go on: runner resume posts (or r in runner tui); Ctrl-C to leave", False),
    (standing(running=1200, held=1200), True, "posts: waiting for a confirmation of 1,200 items",
     "to go on: runner confirm posts --all (or c in runner tui); Ctrl-C to leave", False),
    (standing(running=1, held=1), False, "posts: waiting for a confirmation of 1 item",
     "stopping once the batches in flight finish", False),
    (standing(Control(BreakerState.PROBING, "resumed by a person"), pending=5), True, "posts: running", "", True),
    (standing(pending=5, limited=AT_14_52_03), True,
     "posts: rate limited by the upstream: no batch starts before 14:52:03", "", False),
    (standing(running=2, pending=5, limited=AT_14_52_03), False,
     "posts: rate limited by the upstream: no batch starts before 14:52:03", "", False),
    (standing(Control(paused=True), pending=5, limited=AT_14_52_03), True, "posts: paused by a person",
     "to go on: runner resume posts (or r in runner tui); Ctrl-C to leave", False),
]


@pytest.mark.parametrize(("now", "waits", "state", "hint", "moving"), CASES)
def test_the_progress_line_names_the_run_s_state_and_how_a_person_goes_on(
    now: Standing, waits: bool, state: str, hint: str, moving: bool
) -> None:
    said = progress_line.line(now, waits=waits, db="runs.db")
    assert (said.state, said.hint, said.moving) == (state, hint, moving)


def test_a_running_line_counts_the_batches_an_upstream_holds_as_tasks() -> None:
    said = progress_line.line(standing(running=300, pending=2100), waits=True, db="runs.db", upstream=12)
    assert (said.state, said.short) == ("posts: running (12 batches upstream)", "posts: running (12 upstream)")
    both = progress_line.line(standing(running=300, held=49), waits=True, db="runs.db", upstream=1)
    assert (both.state, both.short) == ("posts: running (49 items held for a confirmation; 1 batch upstream)",
                                        "posts: running (49 held, 1 upstream)")


def test_a_running_line_counts_the_parents_waiting_at_their_join_for_sub_items() -> None:
    said = progress_line.line(standing(running=40, pending=3)._replace(waiting_for_sub_items=3), waits=True,
                              db="runs.db")
    assert (said.state, said.short) == ("posts: running (3 items waiting for sub-items)", "posts: running (3 joining)")


def test_a_running_line_with_held_items_has_brief_words_for_a_narrow_terminal_and_others_need_none() -> None:
    assert progress_line.line(standing(running=1300, held=1200), waits=True, db="runs.db").short == (
        "posts: running (1,200 held)")
    assert progress_line.line(standing(running=2, pending=5), waits=True, db="runs.db").short == "posts: running"


def test_the_commands_of_the_line_name_the_store_when_it_is_not_runs_db() -> None:
    paused = progress_line.line(standing(Control(paused=True), pending=5), waits=True, db="my runs.db")
    assert paused.hint == "to go on: runner resume posts --db 'my runs.db' (or r in runner tui); Ctrl-C to leave"


def test_while_the_input_is_read_the_line_counts_the_records_and_nothing_moves() -> None:
    assert progress_line.reading("posts.jsonl", 12_500) == progress_line.Line(
        "reading posts.jsonl: 12,500 records", "", moving=False
    )


def test_the_line_on_one_line_puts_the_hint_after_the_state() -> None:
    held = progress_line.line(standing(OPEN, pending=1), waits=True, db="runs.db")
    assert held.text == ("posts: breaker open (rate_limited: 429 from upstream) — runner step posts lets one batch "
                         "run, runner resume posts goes on; Ctrl-C to leave")
    assert progress_line.line(standing(pending=1), waits=True, db="runs.db").text == "posts: running"


async def test_reading_the_input_tells_how_many_records_were_checked_then_how_many_items_were_added(
    tmp_path: Path, store: Store
) -> None:
    read: list[int] = []
    added: list[tuple[int, int]] = []
    job = make_job(tmp_path, "http://127.0.0.1:9/v1", posts(1_200), max_items=100)
    await runs.execute(store, job, provider=PythonHandler(label_all_but_p001), reading=read.append,
                       adding=lambda done, total: added.append((done, total)))
    assert read == [item_rows.EVERY, 2 * item_rows.EVERY] == [500, 1_000]
    assert added == []  # 1,200 items are one chunk: the last, which marks the run prepared


def test_adding_items_reads_how_many_of_how_many() -> None:
    assert progress_line.adding("posts.jsonl", 5_000, 1_200_000).text == "adding posts.jsonl: 5,000 of 1,200,000 items"


@pytest.mark.parametrize(("seconds", "shown"), [
    (28.4, "about 28s left"), (107.6, "about 1m 48s left"), (3725.0, "about 1h 02m left"), (None, ""), (0.0, ""),
])
def test_the_time_left_is_labelled_as_time_left(seconds: float | None, shown: str) -> None:
    assert progress_line.time_left(seconds) == shown


def test_the_one_estimate_counts_the_items_that_can_move_at_the_pace_of_late() -> None:
    assert time_left(standing(running=3, pending=5, held=1), per_minute=14.0) == 30.0  # 7 items at 14 a minute
    assert time_left(standing(), per_minute=0.0) == 0.0  # nothing left


@pytest.mark.parametrize("now", [
    standing(Control(paused=True), pending=5), standing(OPEN, pending=5), standing(running=2, held=2),
    standing(pending=5)._replace(engine_alive=False), standing(running=2, pending=5, limited=AT_14_52_03),
])
def test_the_one_estimate_gives_no_time_left_while_nothing_can_move(now: Standing) -> None:
    assert time_left(now, per_minute=60.0) is None
    assert time_left(standing(pending=5), per_minute=0.0) is None  # nothing finished of late


def test_the_tui_shows_the_same_estimate_as_the_progress_line() -> None:
    now = standing(running=3, pending=5, held=1)
    view = RunView(now, concurrency=2, provider="", go_on="", batches=(), log=(), per_minute=14.0)
    assert view.eta == time_left(now, per_minute=14.0) == 30.0


def test_a_rate_limited_line_has_brief_words_for_a_narrow_terminal() -> None:
    assert progress_line.line(standing(pending=5, limited=AT_14_52_03), waits=True, db="runs.db").short == (
        "posts: rate limited")


def test_the_tui_says_the_rate_limit_as_the_progress_line_does_and_gives_no_estimate_under_it() -> None:
    view = RunView(standing(running=2, pending=5, limited=AT_14_52_03), concurrency=2, provider="", go_on="",
                   batches=(), log=(), per_minute=14.0)
    shown = run_panel.run_text(view).plain
    assert "rate limited by the upstream: no batch starts before 14:52:03" in shown
    assert "left 7 items; no estimate while rate limited" in shown


def test_the_tui_writes_the_estimate_as_the_progress_line_does() -> None:
    view = RunView(standing(running=3, pending=5, held=1), concurrency=2, provider="", go_on="", batches=(), log=(),
                   per_minute=3.9)
    assert progress_line.time_left(view.eta) == "about 1m 48s left"
    assert "left 8 items, about 1m 48s at this rate, 1 of them wait" in run_panel.pace(view).plain


def drawn(width: int, state: str, short: str, *, left: float | None) -> list[str]:
    """The progress line of a run of 2,400 items, 1,236 done, on a terminal ``width`` columns wide."""
    out = io.StringIO()
    console = Console(width=width, file=out, color_system=None)
    bar = RunProgress(console=console, auto_refresh=False)
    bar.add_task(state, total=2400, completed=1236, short=short, left=left)
    console.print(Group(*bar.get_renderables()))
    return out.getvalue().splitlines()


HELD = "posts: running (49 items held for a confirmation)"


def test_the_progress_line_fits_80_columns_in_brief_words_when_items_are_held() -> None:
    lines = drawn(80, HELD, "posts: running (49 held)", left=74)
    assert len(lines) == 1 and len(lines[0]) <= 80, lines
    assert lines[0].startswith("posts: running (49 held) ") and lines[0].endswith(" 1236/2400 about 1m 14s left")
    assert "━" in lines[0]


def test_the_progress_line_keeps_its_full_words_and_bar_where_they_fit() -> None:
    lines = drawn(120, HELD, "posts: running (49 held)", left=74)
    assert len(lines) == 1 and lines[0].startswith(HELD + " ━") and len(lines[0]) <= 120, lines


def test_the_progress_line_drops_its_bar_before_it_wraps() -> None:
    assert drawn(56, HELD, "posts: running (49 held)", left=74) == [
        "posts: running (49 held) 1236/2400 about 1m 14s left"]


BUDGET_STOP = Control(BreakerState.OPEN, "budget: $0.0000 spent + $0.0032 in flight + $0.0000 unknown + $0.0035 for "
                      "the next batch would pass the budget of $0.0050", kind=FailureKind.BUDGET)


@pytest.mark.parametrize("width", [140, 80, 30])
def test_the_progress_line_of_a_run_stopped_at_its_budget_fits_its_terminal_without_wrapping(width: int) -> None:
    said = progress_line.line(standing(BUDGET_STOP, pending=5), waits=True, db="runs.db")
    assert said.brief == "posts: breaker open (budget)"
    lines = drawn(width, said.state, said.brief, left=None)
    assert len(lines) == 1 and len(lines[0]) <= width, lines
    assert lines[0].startswith("posts: breaker open (budget) " if width > 30 else "posts: breaker open"), lines


def test_a_rate_limit_ending_another_day_is_told_with_its_date() -> None:
    now = time.mktime((2026, 12, 2, 14, 0, 0, 0, 0, -1))
    today = progress_line.rate_limited(now + 3 * 60, now=now)
    tomorrow = progress_line.rate_limited(now + 24 * 3600, now=now)
    assert today == "rate limited by the upstream: no batch starts before 14:03:00"
    assert tomorrow == "rate limited by the upstream: no batch starts before 2026-12-03 14:00:00"


def test_a_run_held_by_its_queues_open_breaker_is_told_the_queues_resume() -> None:
    shared = QueueShare("openai-main", 8, OPEN, None, held=0, waiting=0, in_flight=0)
    said = progress_line.line(standing(OPEN, pending=5)._replace(queue=shared), waits=True, db="runs.db")
    assert said.hint == ("runner step posts lets one batch run, runner queue resume openai-main goes on; "
                         "Ctrl-C to leave")


def test_a_run_waiting_at_its_budget_is_told_the_command_that_raises_it_not_resume() -> None:
    stopped = Control(BreakerState.OPEN, "budget: ...", kind=FailureKind.BUDGET)
    said = progress_line.line(standing(stopped, pending=5), waits=True, db="runs.db")
    assert said.hint == "give it a larger budget: runner budget posts --max USD (or b in runner tui); Ctrl-C to leave"


def test_a_running_line_counts_the_batches_waiting_for_a_slot_in_the_shared_queue() -> None:
    shared = QueueShare("openai-main", 8, Control(), None, held=0, waiting=2, in_flight=8)
    said = progress_line.line(standing(pending=5)._replace(queue=shared), waits=True, db="runs.db")
    assert (said.state, said.brief) == ("posts: running (2 batches waiting for a slot in queue openai-main)",
                                        "posts: running (2 waiting for a slot)")


def test_a_queues_open_breaker_is_said_once_in_the_status_caption() -> None:
    shared = QueueShare("simq", 8, OPEN, None, held=0, waiting=0, in_flight=0)
    control = joined(Control(), shared)
    caption = " ".join(tables.status_table(standing(control, pending=5)._replace(queue=shared)))
    assert caption.count("429 from upstream") == 1 and "breaker open (queue 'simq': rate_limited" in caption
    assert "queue simq: 0 of 8 in flight, this run 0" in caption and "this run 0 · breaker" not in caption
    own = " ".join(tables.status_table(standing(OPEN, pending=5)._replace(queue=shared._replace(control=Control()))))
    assert "breaker open (rate_limited" in own and "queue simq: 0 of 8 in flight, this run 0 · breaker closed" in own
