"""A person's hand on a run: pause, resume, step, retry, cancel, budget; and on a shared queue: its limit, its resume.

The CLI, the TUI and the notebook panel all call these; none of them holds a
rule. Each command is one transaction that logs it in ``commands`` and
changes the run's control row, which the engine holding the run reads on
every turn of its loop (about twice a second), whatever process it lives in.
Without a live engine, the change waits in the store for the next one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import NamedTuple

from . import lease
from .rules import breaker
from .model import BreakerState, Retried
from .rules import budget as budgets
from .rules.budget import Budget
from .rules.breaker import Control
from .errors import RunError
from .words import command
from .store.protocol import RunStore


def pause(store: RunStore, name: str, *, now: float) -> Control:
    """Stop starting batches; batches in flight finish."""
    return _apply(store, name, "pause", now, lambda c: replace(c, paused=True))


def resume(store: RunStore, name: str, *, now: float) -> Control:
    """Lift a pause or an open breaker: one batch at a time until one succeeds.

    A run neither paused nor open is refused (``RunError``), and nothing changes; one held only by its shared
    queue's open breaker is refused with the command that resumes the queue.
    """
    open_queue = _open_queue(store, name, now=now)

    def lift(control: Control) -> Control:
        refused = breaker.nothing_to_resume(control, open_queue)
        if refused:
            queue_resume = f"; to go on: {command('queue', 'resume', open_queue, db=store.path)}" if open_queue else ""
            raise RunError(f"run {name!r} is {refused}{queue_resume}")
        return breaker.resumed(control)

    return _apply(store, name, "resume", now, lift)


def set_queue(store: RunStore, name: str, *, concurrency: int) -> None:
    """A shared queue's limit: at most ``concurrency`` batches in flight, all its runs together (made if new)."""
    if concurrency < 1:
        raise RunError(f"queue {name!r}: the concurrency must be at least 1, not {concurrency}")
    store.set_queue(name, concurrency=concurrency)


def resume_queue(store: RunStore, name: str) -> Control:
    """Lift a shared queue's open breaker: one batch at a time, all its runs together, until one succeeds.

    A queue whose breaker is not open, or no queue of that name, is refused (``RunError``), and nothing changes.
    """

    def lift(control: Control) -> Control:
        if control.breaker is not BreakerState.OPEN:
            raise RunError(f"queue {name!r}: its breaker is {control.breaker.value}, not open: nothing to resume")
        return breaker.resumed(control)

    return store.queue_command(name, lift)


def _open_queue(store: RunStore, name: str, *, now: float) -> str | None:
    """The run's shared queue, when its breaker is open (None: it names none, or its breaker is not open)."""
    shared = store.share(store.run_id(name), now=now)
    return shared.name if shared is not None and shared.control.breaker is BreakerState.OPEN else None


def step(store: RunStore, name: str, *, now: float) -> Control:
    """Let exactly one more batch start while paused or open (its own breaker or its shared queue's); the run stays
    held."""
    queue_open = _open_queue(store, name, now=now) is not None

    def one_more(control: Control) -> Control:
        if not control.held and not queue_open:
            raise RunError(f"run {name!r} is not paused and its breaker is not open: nothing to step")
        return replace(control, steps=control.steps + 1)

    return _apply(store, name, "step", now, one_more)


def budget(
    store: RunStore, name: str, *, now: float, max_cost: float | None = None, max_tokens: int | None = None,
    none: bool = False,
) -> tuple[Budget, Control]:
    """Give the run a new budget: the limits given replace those that hold, the others kept; ``none``: no budget
    (over the job's ``[budget]`` too). A run stopped at its budget goes on (its breaker closes:
    ``rules.budget.given``); the engine asks again before the next batch. A budget the run already committed to
    is kept: the run stops before its next batch (``BudgetView.given`` says so).

    Neither limit (nor ``none``), ``none`` with a limit, one not a finite number more than 0, or a cost budget
    for a model with no price is refused (``RunError``), and nothing changes.
    """
    from . import job_budget
    from .errors import JobError

    if none and (max_cost is not None or max_tokens is not None):
        raise RunError("--none removes the budget: give it alone, or give --max USD or --max-tokens N")
    if not none and max_cost is None and max_tokens is None:
        raise RunError("give a budget: --max USD, --max-tokens N, or both (--none removes it)")
    job = store.job(name)

    def change(holds: Budget) -> Budget:
        if none:
            return Budget()
        new = Budget(holds.max_cost if max_cost is None else max_cost,
                     holds.max_tokens if max_tokens is None else max_tokens)
        try:
            job_budget.check(dataclasses.replace(job, budget=new), f"run {name!r}")
        except JobError as exc:
            raise RunError(str(exc)) from exc
        return new

    return store.give_budget(store.run_id(name), change, budgets.given, now=now)


def retry(
    store: RunStore, name: str, *, now: float, kind: str | None = None, keys: Sequence[str] = (),
    stage: str | None = None,
) -> Retried:
    """Send failed items again (all, one kind, some keys, those failed at one ``stage``), each with a fresh
    attempt budget, at the stage where it failed: the results of the stages it passed are kept (one rejected at a
    decide stage waits there again for a person's decision).

    A stage the run does not have is refused (``UnknownStage``, naming those it has), and nothing changes.
    """
    return store.retry_failed(store.run_id(name), kind=kind, keys=keys, now=now, stage=stage)


def prioritize(
    store: RunStore, name: str, *, to: int, now: float, keys: Sequence[str] = (), group: str | None = None
) -> int:
    """Give items (some ``keys``, a ``group``'s, or the keys named within a group) the priority ``to`` (higher
    first); the next batch formed reads it. How many items it gave. Nothing named, or a key the run does not
    have, is refused (``RunError``), and nothing changes."""
    return store.prioritize(store.run_id(name), keys=keys, group=group, to=to, now=now)


class Cancelled(NamedTuple):
    """What a cancel did: items failed at once, and items whose batch in flight finishes first."""

    failed: int
    finishing: int


def cancel(store: RunStore, name: str, *, now: float, keys: Sequence[str] = ()) -> Cancelled:
    """Fail unfinished items (all, or some keys) as ``cancelled``; batches in flight finish first.

    Items not in flight fail at once; those in a batch in flight fail when it
    settles (an answer that completes one keeps it completed: it was paid
    for). With no live engine, nothing is in flight: all fail at once. A key
    the run does not have is refused (``RunError``), and nothing changes.
    """
    alive = lease.alive(store, name, now=now)
    return Cancelled(*store.cancel(store.run_id(name), keys=keys, now=now, engine_alive=alive))


def _apply(store: RunStore, name: str, command: str, now: float, change: Callable[[Control], Control]) -> Control:
    return store.command(store.run_id(name), command, change, now=now)
