"""The words of a terminal run's progress line: what the run is doing, and how a person goes on.

Read off the store's read model (:class:`~runner.store.answers.Standing`),
never the engine's insides, so that a pause written by another process (the
TUI, a notebook, another shell) shows as soon as the store has it:

| the store says                              | the line                                             |
|---------------------------------------------|------------------------------------------------------|
| (the input is being read)                   | reading FILE: N records                              |
| paused                                      | paused by a person, and the command that goes on     |
| breaker open                                | breaker open (why), step and resume                  |
| breaker open at the run's budget            | breaker open (why), and the command that raises it   |
| only held items left                        | waiting for a confirmation, and the command for it   |
| only items at a decide stage left           | waiting for a decision, and the command for it       |
| a 429's Retry-After holds batches back      | rate limited by the upstream, and until when         |
| anything else                               | running (items held, batches upstream or waiting for |
|                                             | a slot in the run's shared queue, if any)            |

A terminal too narrow for the whole line gets the state's ``brief`` words
(a breaker open: its kind, not its reason), then a shorter bar, then none,
then the words cut short, never wrapped (:class:`runner.terminal_run.RunProgress`).

While nothing can move (reading, paused, open, waiting, rate limited) the line shows no
time left; else the time left is the read model's one estimate
(:func:`runner.store.answers.time_left`, which the TUI shows too), written
by :func:`about` for both, labelled.
Without waiting for a person, a held run says it is stopping.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .model import BreakerState, FailureKind
from .rules.breaker import Control
from .rules.queues import queues_own
from .store.answers import QueueShare, Standing
from .words import clock, command, duration, plural, resume


@dataclass(frozen=True)
class Line:
    """The run's state, how a person goes on while it is held, and whether work can move now.

    The time left is shown only while work can move. ``brief`` says the state
    in fewer words, for a narrow terminal (none: the state is short already).
    """

    state: str
    hint: str
    moving: bool
    brief: str = ""

    @property
    def short(self) -> str:
        """The state in as few words as the line has."""
        return self.brief or self.state

    @property
    def text(self) -> str:
        """The line on one line: the state, then the hint."""
        return f"{self.state} — {self.hint}" if self.hint else self.state


#: Stops whose cause a person fixes before anything else (a key, credit, a permission).
FIX_FIRST = (FailureKind.AUTH, FailureKind.BILLING, FailureKind.PERMISSION)


def about(seconds: float) -> str:
    """The read model's estimate of the time left as every view writes it: ``about 1m 48s``."""
    return f"about {duration(round(seconds))}"


def time_left(seconds: float | None) -> str:
    """``about 28s left``; nothing when there is no estimate (or nothing is left)."""
    return f"{about(seconds)} left" if seconds else ""


def rate_limited(until: float, *, now: float | None = None) -> str:
    """A rate limit the engine waits out, as every view says it: ``rate limited by the upstream: no batch
    starts before 14:52:03`` (local time; with its date when that is not today's, as a long Retry-After gives)."""
    return f"rate limited by the upstream: no batch starts before {clock(until, now=now)}"


def scheduled(count: int, next_at: float | None, *, now: float | None = None) -> str:
    """Items waiting for the time their input scheduled them at, as every view says it: ``2 items scheduled,
    the next at 14:52:03`` (local time; with its date when that is not today's)."""
    return f"{plural(count, 'item')} scheduled" + (f", the next at {clock(next_at, now=now)}" if next_at else "")


def queue(share: QueueShare, run: Control, *, now: float | None = None) -> str:
    """A run's shared queue, as every view says it: ``queue openai-main: 3 of 8 in flight, this run 2 (1 waiting
    for a slot) · breaker closed`` and, while a 429 holds it back, ``· no batch starts before 14:52:03``.

    The queue's breaker is left out when the run's controls ``run`` are the queue's (the views say those already).
    """
    control = share.control
    said = (f"queue {share.name}: {share.in_flight} of {share.concurrency} in flight, this run {share.held}"
            + (f" ({share.waiting} waiting for a slot)" if share.waiting else ""))
    if not queues_own(run, share.name):
        said += f" · breaker {control.breaker.value}" + (f" ({control.reason})" if control.reason else "")
    return said + (f" · no batch starts before {clock(share.quiet_until, now=now)}" if share.quiet_until else "")


def reading(source: str, records: int) -> Line:
    """While the input is read: how many records so far."""
    return Line(f"reading {source}: {records:,} records", "", moving=False)


def adding(source: str, added: int, total: int) -> Line:
    """While the input's items are added to the store, after it was checked: how many of how many."""
    return Line(f"adding {source}: {added:,} of {total:,} items", "", moving=False)


def line(standing: Standing, *, waits: bool, db: str | Path, upstream: int = 0) -> Line:
    """The run's state in words, from the store ``db``; ``waits``: this process waits for a person while held.

    ``upstream``: how many of the run's batches an upstream holds as tasks (the Batch API's), said while it runs.
    """
    name, control = standing.name, standing.control
    if control.paused:
        return _held(name, "paused by a person", f"to go on: {command('resume', name, db=db)} (or r in runner tui)",
                     waits)
    if control.breaker is BreakerState.OPEN:
        shared = standing.queue
        open_queue = shared.name if shared and shared.control.breaker is BreakerState.OPEN else None
        hint = f"{command('step', name, db=db)} lets one batch run, {resume(name, open_queue, db=db)} goes on"
        if control.kind is FailureKind.BUDGET:  # a resume would meet the same budget at the next batch
            hint = f"give it a larger budget: {command('budget', name, '--max', 'USD', db=db)} (or b in runner tui)"
        if control.kind in FIX_FIRST:  # a step before the fix pays for one more refusal
            hint = f"fix the cause, then: {hint}"
        why = f" ({control.kind})" if control.kind else ""
        return _held(name, f"breaker open ({control.reason})", hint, waits, brief=f"{name}: breaker open{why}")
    if standing.held and standing.held == standing.unfinished:
        hint = f"to go on: {command('confirm', name, '--all', db=db)} (or c in runner tui)"
        return _held(name, f"waiting for a confirmation of {plural(standing.held, 'item')}", hint, waits)
    if standing.needs_decision and not standing.moving:
        hint = f"to go on: {command('decide', name, '--all-waiting', '--approve', db=db)} (or d in runner tui)"
        return _held(name, f"waiting for a decision on {plural(standing.needs_decision, 'item')}", hint, waits)
    if standing.rate_limited_until is not None:
        return Line(f"{name}: {rate_limited(standing.rate_limited_until, now=standing.read_at)}", "", moving=False,
                    brief=f"{name}: rate limited")
    held = [f"{plural(standing.held, 'item')} held for a confirmation"] if standing.held else []
    brief = [f"{standing.held:,} held"] if standing.held else []
    if standing.needs_decision:
        held.append(f"{plural(standing.needs_decision, 'item')} waiting for a decision")
        brief.append(f"{standing.needs_decision:,} to decide")
    if standing.waiting_for_sub_items:
        held.append(f"{plural(standing.waiting_for_sub_items, 'item')} waiting for sub-items")
        brief.append(f"{standing.waiting_for_sub_items:,} joining")
    if standing.scheduled:
        held.append(scheduled(standing.scheduled, standing.next_scheduled_at))
        brief.append(f"{standing.scheduled:,} scheduled")
    if standing.queue is not None and standing.queue.waiting:
        held.append(f"{plural(standing.queue.waiting, 'batch', 'batches')} waiting for a slot in queue "
                    f"{standing.queue.name}")
        brief.append(f"{standing.queue.waiting:,} waiting for a slot")
    if upstream:
        held.append(f"{plural(upstream, 'batch', 'batches')} upstream")
        brief.append(f"{upstream:,} upstream")
    if held:
        return Line(f"{name}: running ({'; '.join(held)})", "", moving=True,
                    brief=f"{name}: running ({', '.join(brief)})")
    return Line(f"{name}: running", "", moving=True)


def _held(name: str, state: str, hint: str, waits: bool, *, brief: str = "") -> Line:
    then = f"{hint}; Ctrl-C to leave" if waits else "stopping once the batches in flight finish"
    return Line(f"{name}: {state}", then, moving=False, brief=brief)
