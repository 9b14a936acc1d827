"""A run in a terminal: a progress bar polled from the store, Ctrl-C, then the summary and what to do next.

One Ctrl-C asks the engine to stop gently (the batches in flight finish); a
second cancels it: the calls cut short are held for confirmation. The exit
code is the contract's (``Outcome.exit_code``), 4 after a second Ctrl-C.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from . import runs, tables
from .engine import Engine, Outcome
from .jobs import Job
from .model import FailureKind, ItemState
from .store import Store, views
from .words import command, plural


#: Why a run stopped after one Ctrl-C.
INTERRUPTED = "interrupted by Ctrl-C"


def run_in_terminal(store: Store, job: Job, *, read_input: bool, wait_for_person: bool = False) -> Outcome:
    """Run a job with a live progress bar, then print its summary and what to do next."""
    console = Console(stderr=True)
    outcome = asyncio.run(_run_watched(store, job, console, read_input=read_input, wait_for_person=wait_for_person))
    if outcome is None:
        console.print("[yellow]aborted:[/] the calls cut short are held for confirmation; to see them and go on:",
                      soft_wrap=True)
        console.print(escape(command("run", job.name, db=store.path)), soft_wrap=True)
        sys.exit(4)
    Console().print(tables.status_table(views.standing(store, job.name, now=time.time())))
    if outcome.stopped_for:
        console.print(f"[yellow]stopped:[/] {escape(outcome.stopped_for)}")
        for line in _next_steps(job.name, outcome, store.path):
            console.print(escape(line), soft_wrap=True)
    elif failed := outcome.status["counts"][ItemState.FAILED]:
        console.print(f"{plural(failed, 'item')} failed; see why:")
        console.print(escape(command("failures", job.name, db=store.path)), soft_wrap=True)
    return outcome


async def _run_watched(
    store: Store, job: Job, console: Console, *, read_input: bool, wait_for_person: bool
) -> Outcome | None:
    """The engine, with a progress bar polled from the store; one Ctrl-C stops it gently, a second aborts (None)."""
    engines: list[Engine] = []
    task = asyncio.create_task(
        runs.execute(store, job, read_input=read_input, wait_for_person=wait_for_person, started=engines.append)
    )
    loop = asyncio.get_running_loop()

    def interrupted() -> None:
        loop.add_signal_handler(signal.SIGINT, task.cancel)
        for engine in engines:
            engine.request_stop(INTERRUPTED)
        console.print(f"[yellow]stopping:[/] the batches in flight finish first (Ctrl-C again cuts them short); "
                      f"no resume is needed, to go on later: {escape(command('run', job.name, db=store.path))}",
                      soft_wrap=True)

    loop.add_signal_handler(signal.SIGINT, interrupted)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=True, disable=not console.is_terminal) as bar:
        shown = bar.add_task(f"reading {job.input.describe()}" if read_input else f"run {job.name}", total=None)
        while not task.done():
            await asyncio.wait({task}, timeout=0.2)
            if job.name in store.run_names():
                standing = views.standing(store, job.name, now=time.time())
                done = standing.counts[ItemState.COMPLETED] + standing.counts[ItemState.FAILED]
                bar.update(shown, description=f"run {job.name}", total=standing.total, completed=done)
    loop.remove_signal_handler(signal.SIGINT)
    return None if task.cancelled() else task.result()


def _next_steps(name: str, outcome: Outcome, db: Path) -> list[str]:
    """What a person does after a stop, by its cause: what to do, then each command on a line of its own."""
    if outcome.status["needs_confirmation"]:
        return ["see what waits, then release it:", command("status", name, db=db),
                command("confirm", name, "--all", db=db)]
    kind = outcome.stop_kind
    if outcome.stopped_for == INTERRUPTED:
        return ["to go on:", command("run", name, db=db)]
    if kind in (FailureKind.AUTH, FailureKind.BILLING, FailureKind.PERMISSION):
        return ["fix the cause, then:", command("resume", name, db=db),
                command("retry", name, "--kind", kind, db=db), command("run", name, db=db)]
    return ["to go on:", command("resume", name, db=db), command("run", name, db=db)]
