"""A run in a terminal: a progress bar polled from the store, Ctrl-C, then the summary and what to do next.

The bar's line names the run's state as the store has it
(:mod:`runner.progress_line`). With a person at the terminal (or ``--wait``)
the engine waits while the run is held, paused or open or with held items,
and the line says what goes on; without, the run stops there (exit 4).
One Ctrl-C asks the engine to stop gently (the batches in flight finish); a
second cancels it: the calls cut short are held for confirmation. The exit
code is the contract's (``Outcome.exit_code``), 4 after a second Ctrl-C.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from rich.console import Console, RenderableType
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task
from rich.table import Column, Table
from rich.text import Text

from . import progress_line, runs, tables
from .engine import Engine, Outcome
from .jobs import Job
from .revalidating import refused_lines, revalidated_line
from .rules.revalidating import StagePlan
from .model import FailureKind, ItemState
from .store import Store, views
from .store.answers import time_left
from .words import command, go_on, plural, resume


#: Why a run stopped after one Ctrl-C, or after a SIGTERM (``kill``, ``timeout``, ``docker stop``): a gentle stop.
INTERRUPTED = "interrupted by Ctrl-C"
TERMINATED = "asked to stop by SIGTERM"
#: What the first of each signal stops the run for, and the words that say so.
GENTLE_STOPS = {
    signal.SIGINT: (INTERRUPTED, "Ctrl-C again cuts them short); Ctrl-C needs no resume"),
    signal.SIGTERM: (TERMINATED, "a second SIGTERM or Ctrl-C cuts them short); it needs no resume"),
}


def waits(asked: bool | None) -> bool:
    """Whether the run waits for a person while held: as asked (``--wait``, ``--no-wait``), else when one is there.

    A person is there when stdin and stderr are terminals; a script (no
    terminal) gets the contract's exit 4 at a stop.
    """
    return asked if asked is not None else sys.stdin.isatty() and sys.stderr.isatty()


def run_in_terminal(store: Store, job: Job, *, read_input: bool, wait_for_person: bool = False) -> Outcome:
    """Run a job with a live progress bar, then print its summary and what to do next."""
    console = Console(stderr=True)
    told: set[str] = set()  # the stages whose revalidation was said as the run started
    outcome = asyncio.run(_run_watched(store, job, console, read_input=read_input, wait_for_person=wait_for_person,
                                       told=told))
    if outcome is None:
        console.print("[yellow]aborted:[/] the calls cut short are held for confirmation; to see them and go on:",
                      soft_wrap=True)
        console.print(escape(command("run", job.name, db=store.path)), soft_wrap=True)
        sys.exit(4)
    for stage, count in outcome.rewound.items():
        console.print(f"stage {escape(stage)} changed (or was added): {plural(count, 'item')} sent again "
                      "from it, the results of the stages before it kept", soft_wrap=True)
    for stage, (count, parents) in outcome.inside.items():
        console.print(f"stage {escape(stage)} inside a fan-out changed (or was added): {plural(count, 'sub-item')} "
                      "sent again from it, the results of the stages before it kept; their "
                      f"{plural(parents, 'parent')} wait at the join again, then go through the stages after it "
                      "again", soft_wrap=True)
    _tell_revalidated(console, outcome.revalidated, told, staged=job.staged)
    for stage, count in outcome.gone.items():
        console.print(f"stage {escape(stage)} is no longer in the job: {plural(count, 'item')} left at it sent on "
                      "to the next stage each needs, or completed if it needs none (a failed one with a fresh budget; "
                      "one a person cancelled or rejected stays failed, its retry sends it there)", soft_wrap=True)
    tables.echo(tables.status_table(views.standing(store, job.name, now=time.time()), ended_here=True))
    if outcome.stopped_for:
        # the notebook call that gives python stages their handlers ends the line: unbroken, to be copied
        console.print(f"[yellow]stopped:[/] {escape(outcome.stopped_for)}", soft_wrap=bool(outcome.needs_handler))
        for line in _next_steps(job, outcome, store.path):
            console.print(escape(line), soft_wrap=True)
    elif failed := outcome.status["counts"][ItemState.FAILED]:
        console.print(f"{plural(failed, 'item')} failed; see why:")
        console.print(escape(command("failures", job.name, db=store.path)), soft_wrap=True)
    for line in refused_lines(job, outcome.revalidated, store.path):
        console.print(escape(line), soft_wrap=True)
    return outcome


def _tell_revalidated(console: Console, revalidated: Mapping[str, StagePlan], told: set[str], *, staged: bool) -> None:
    """Say what the run revalidated of each stage whose only change was its output schema (once a stage): what
    completed or was kept with no call, and what failed as invalid, not sent again (it would repeat a charge)."""
    for stage, done in revalidated.items():
        if stage not in told:
            told.add(stage)
            console.print(escape(revalidated_line(done, staged=staged)), soft_wrap=True)


async def _run_watched(
    store: Store, job: Job, console: Console, *, read_input: bool, wait_for_person: bool, told: set[str]
) -> Outcome | None:
    """The engine, its progress line polled from the store; one Ctrl-C stops it gently, a second aborts (None)."""
    with RunProgress(console=console, transient=True, disable=not console.is_terminal) as bar:
        source = job.input.describe()
        shown = bar.add_task(progress_line.reading(source, 0).text if read_input else job.name, total=None)

        def reading(records: int) -> None:  # reading the input holds the loop: the bar's own thread draws this
            bar.update(shown, description=progress_line.reading(source, records).text)

        def adding(added: int, total: int) -> None:
            bar.update(shown, description=progress_line.adding(source, added, total).text)

        engines: list[Engine] = []
        task = asyncio.create_task(runs.execute(
            store, job, read_input=read_input, wait_for_person=wait_for_person, started=engines.append, reading=reading,
            adding=adding,
        ))
        loop = asyncio.get_running_loop()

        def interrupted(by: signal.Signals) -> None:
            reason, words = GENTLE_STOPS[by]
            for each in GENTLE_STOPS:
                loop.add_signal_handler(each, task.cancel)
            for engine in engines:
                engine.request_stop(reason)
            console.print(f"[yellow]stopping:[/] the batches in flight finish first ({words}; to go on later:",
                          soft_wrap=True)
            console.print(escape(command("run", job.name, db=store.path)), soft_wrap=True)

        for each in GENTLE_STOPS:
            loop.add_signal_handler(each, interrupted, each)
        said, started = "", False
        while not task.done():
            await asyncio.wait({task}, timeout=0.2)
            started = started or job.name in store.run_names()  # asked until the run is there, then no more
            for engine in engines:  # as the run starts, before any call: what revalidating did
                _tell_revalidated(console, engine.revalidated, told, staged=job.staged)
            if started:
                at = time.time()
                standing, run_id = views.standing(store, job.name, now=at), store.run_id(job.name)
                now = progress_line.line(standing, waits=wait_for_person, db=store.path,
                                         upstream=views.batches_upstream(store, run_id))
                done = standing.counts[ItemState.COMPLETED] + standing.counts[ItemState.FAILED]
                left = time_left(standing, views.pace(store, run_id, now=at)) if now.moving else None
                bar.update(shown, description=now.state, short=now.short, total=standing.total, completed=done,
                           left=left)
                bar.hint = now.hint
                if bar.disable and wait_for_person and not now.moving and now.text != said:
                    console.print(escape(now.text), soft_wrap=True)  # no bar: the log says once why the run waits
                said = now.text
    for each in GENTLE_STOPS:
        loop.remove_signal_handler(each)
    return None if task.cancelled() else task.result()


class RunProgress(Progress):
    """The progress line, and under it how a person goes on while the run is held (wrapped, never cut).

    The line fits its terminal: the state's words, the bar (at most
    :data:`BAR`), how many of how many, the time left; when that is too wide,
    the state's brief words (a task's ``short`` field), then a narrower bar
    (down to :data:`BAR_LEAST`), then no bar, then the words cut short: the line never wraps.
    """

    hint = ""

    def get_renderables(self) -> Iterator[RenderableType]:
        yield self.make_tasks_table(self.tasks)
        if self.hint:
            yield Text(self.hint, style="yellow")

    def make_tasks_table(self, tasks: Iterable[Task]) -> Table:
        shown = [task for task in tasks if task.visible]
        if shown:
            self.columns = self._fitting(shown)
        return super().make_tasks_table(shown)

    def _fitting(self, tasks: list[Task]) -> tuple[ProgressColumn, ...]:
        """The columns of the widest line that fits the terminal's width."""
        after = (MofNCompleteColumn(), TimeLeftColumn())
        beside = max(sum(column.render(task).cell_len + 1 for column in after) for task in tasks)
        for words in (Words(short=False), Words(short=True)):
            room = self.console.width - beside - max(words.render(task).cell_len + 1 for task in tasks)
            if room >= BAR_LEAST:
                return words, BarColumn(bar_width=min(room, BAR)), *after
        return Words(short=True), *after


#: The bar's widest and narrowest; narrower than this, no bar.
BAR, BAR_LEAST = 40, 10


class Words(ProgressColumn):
    """The run's state in words: in full, or ``short`` (a task's ``short`` field, when it has one)."""

    def __init__(self, *, short: bool) -> None:
        super().__init__(table_column=Column(no_wrap=True, overflow="ellipsis"))
        self.short = short

    def render(self, task: Task) -> Text:
        return Text(task.fields.get("short") or task.description if self.short else task.description)


class TimeLeftColumn(ProgressColumn):
    """The time left, as the read model estimates it for the TUI too, labelled; none while nothing can move."""

    def render(self, task: Task) -> Text:
        return Text(progress_line.time_left(task.fields.get("left")), style="progress.remaining")


def _next_steps(job: Job, outcome: Outcome, db: Path | str) -> list[str]:
    """What a person does after a stop, by its cause: what to do, then each command on a line of its own."""
    name, again = job.name, go_on(job, db)
    if outcome.status["needs_confirmation"]:
        return ["see what waits, then release it:", command("status", name, db=db),
                command("confirm", name, "--all", db=db)]
    if outcome.status["needs_decision"]:
        return ["decide them (the KEYS given, or every one waiting; d in runner tui shows them one at a time):",
                command("decide", name, "KEY", "--approve", db=db), command("decide", name, "KEY", "--reject", db=db),
                command("decide", name, "--all-waiting", "--approve", db=db)]
    if outcome.needs_handler:  # the reason says the notebook call that gives the python stages their handlers
        return []
    kind = outcome.stop_kind
    held_back = outcome.status["paused"] or outcome.status["breaker"]["state"] == "open"
    if outcome.stopped_for in (INTERRUPTED, TERMINATED) and not held_back:  # a gentle stop itself needs no resume
        return ["to go on:", again]
    if kind is FailureKind.BUDGET:
        return ["give it a larger budget (it goes on from there):", command("budget", name, "--max", "USD", db=db),
                again]
    lift = resume(name, outcome.open_queue, db=db)
    if kind in progress_line.FIX_FIRST:
        return ["fix the cause, then:", lift, command("retry", name, "--kind", kind, db=db), again]
    return ["to go on:", lift, again]
