"""A shared queue (``[provider] queue``): how the runs naming it share one limit, one quiet time and one breaker.

Every run of a queue heeds the queue's breaker beside its own: the engine
reads its run's controls joined with the queue's (:func:`joined`), the worse
breaker of the two, a person's pause and steps the run's own. A batch's
breaker move and a 429's quiet time go to the queue (the store applies them
there), so what one run sees holds back the others.

How many more batches a run may start by its queue (:func:`room`):

| the queue                            | batches in flight, all its runs together   |
|--------------------------------------|--------------------------------------------|
| breaker ``closed``                   | ``concurrency``                            |
| breaker ``probing`` or ``open``      | 1 (open: only with a step a person allowed) |
| before the quiet time a 429 set      | none start                                 |

less those the other runs hold and those the runs of a higher ``queue_priority``
have waiting for a slot: a freed slot goes to the waiting run of the highest
priority first (equal priorities: the first to ask).

Pure: the queue as the store read it, the run's own count and the time are passed in.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol

from ..model import BreakerState
from . import gate
from .breaker import Control

#: How bad a breaker state is, for :func:`joined`.
_WORSE = {BreakerState.CLOSED: 0, BreakerState.PROBING: 1, BreakerState.OPEN: 2}


class Shared(Protocol):
    """A queue's name and breaker: what :func:`joined` reads, of the engine's :class:`Queue` or a view's."""

    @property
    def name(self) -> str: ...

    @property
    def control(self) -> Control: ...


@dataclass(frozen=True)
class Queue:
    """A queue as one of its runs reads it: the shared row, and what the queue's other runs hold and want."""

    name: str
    concurrency: int
    control: Control
    quiet_until: float = 0.0
    #: Batches in flight held by the queue's other runs (live engines only).
    others: int = 0
    #: Batches waiting for a slot in the queue's runs of a higher priority than the reader's.
    ahead: int = 0


def joined(run: Control, queue: Shared | None) -> Control:
    """The run's controls as its engine heeds them: the worse breaker of the run's and its queue's."""
    if queue is None or _WORSE[queue.control.breaker] <= _WORSE[run.breaker]:
        return run
    shared = queue.control
    return replace(run, breaker=shared.breaker, reason=f"{_said(queue.name)}{shared.reason}",
                   transport_failures=shared.transport_failures, kind=shared.kind)


def queues_own(run: Control, name: str) -> bool:
    """Whether the run's controls (:func:`joined`) are its queue ``name``'s: its breaker then says the queue's."""
    return (run.reason or "").startswith(_said(name))


def _said(name: str) -> str:
    return f"queue {name!r}: "


def limit(queue: Queue) -> int:
    """Batches in flight the queue allows, all its runs together, by its breaker."""
    return queue.concurrency if queue.control.breaker is BreakerState.CLOSED else 1


def room(queue: Queue, *, mine: int, now: float) -> int:
    """How many more batches a run may start by its queue, ``mine`` of its own in flight."""
    if gate.quiet(quiet_until=queue.quiet_until, now=now):
        return 0
    return max(limit(queue) - queue.others - mine - queue.ahead, 0)
