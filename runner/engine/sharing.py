"""An engine's seat in its run's shared queue (``[provider] queue``), or none: a run alone goes on as ever.

The engine reads its run's controls joined with the queue's (the worse
breaker, :func:`runner.rules.queues.joined`) and the queue's quiet time on
every turn and before every start, and asks the queue's room
(:func:`runner.rules.queues.room`) beside its own gate. It tells the store
what it holds in flight, in the transaction of the start that takes a slot
and of the save that frees one, and on every turn what it has waiting; it
sweeps away the holds of dead engines as it beats, and gives its seat back
as it stops.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import liveness
from ..errors import StoreBusy
from ..rules import queues
from ..rules.breaker import Control

if TYPE_CHECKING:
    from ..jobs import Job
    from ..store.protocol import RunStore


class Alone:
    """A run in no queue: its own controls, no room but its own gate's, nothing to tell."""

    waiting = 0

    def joined(self, control: Control) -> tuple[Control, float]:
        """The controls the engine heeds, and the queue's quiet time (none)."""
        return control, 0.0

    def room(self, *, mine: int, now: float) -> int:
        """No limit but the run's own."""
        return 1 << 30

    def tell(self, *, held: int, waiting: int | None = None) -> None:
        """Nothing to tell."""

    def sweep(self, now: float) -> None:
        """Nothing to sweep."""

    def leave(self) -> None:
        """Nothing to give back."""


class Seat(Alone):
    """A run's seat in its queue, for the engine ``token`` holding it."""

    def __init__(self, store: RunStore, job: Job, run_id: int, token: str) -> None:
        self.store, self.run_id, self.token = store, run_id, token
        self.name = job.provider.queue
        #: The queue as last read (joined); what this engine last told the store it holds and has waiting.
        self.queue: queues.Queue | None = None
        self.held = self.waiting = 0
        store.join_queue(run_id, self.name, token=token, priority=job.provider.queue_priority,
                         concurrency=job.batch.concurrency)

    def joined(self, control: Control) -> tuple[Control, float]:
        self.queue = self.store.run_queue(self.run_id, token=self.token)
        return queues.joined(control, self.queue), 0.0 if self.queue is None else self.queue.quiet_until

    def room(self, *, mine: int, now: float) -> int:
        """How many more batches the queue lets this run start, as last read."""
        return 0 if self.queue is None else queues.room(self.queue, mine=mine, now=now)

    def tell(self, *, held: int, waiting: int | None = None) -> None:
        """Write what the run holds and has waiting, if changed; a busy store puts it off to a later turn."""
        waiting = self.waiting if waiting is None else waiting
        if (held, waiting) == (self.held, self.waiting):
            return
        try:
            self.store.hold_in_queue(self.run_id, token=self.token, held=held, waiting=waiting)
        except StoreBusy:
            return
        self.held, self.waiting = held, waiting

    def sweep(self, now: float) -> None:
        """Drop the holds of the queue's engines whose lease is dead; a busy store puts it off."""
        try:
            self.store.sweep_queue(self.name, lives=lambda holder: liveness.lives(holder, now))
        except StoreBusy:
            return

    def leave(self) -> None:
        """Hold nothing and wait for nothing: the engine stops."""
        self.store.hold_in_queue(self.run_id, token=self.token, held=0, waiting=0)
        self.held = self.waiting = 0


def seat(store: RunStore, job: Job, run_id: int, token: str) -> Alone:
    """The run's seat in its queue (joined now), or :class:`Alone` for a run in none."""
    return Seat(store, job, run_id, token) if job.provider.queue else Alone()
