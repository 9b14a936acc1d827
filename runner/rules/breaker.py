"""The breaker: the upstream's recent health and a person's hand, as the store keeps them, and how they move.

- ``closed``: normal, ``concurrency`` slots.
- one final transport failure: ``probing``, one slot.
- a second consecutive one: ``open``, no new batches. A success resets the count.
  "Consecutive" is in the order calls were started: a call started while the
  breaker was still closed was in flight together with the failure that made
  it probe, so its failure is the same event (a burst of resets hits every
  call at once), not a second one in a row; the second is a call started
  after (the probe). So with many batches in flight, one sick moment leaves
  the breaker probing, and the probe decides:

  | breaker | the failed call started | after                                  |
  |---------|-------------------------|----------------------------------------|
  | closed  | (any)                   | probing, 1 failure                     |
  | probing | while closed            | probing, the count as it was           |
  | probing | while probing or held   | open, one failure more                 |
  | open    | (any)                   | open, one failure more, its reason kept |
- ``open`` and a manual pause last until a person resumes (a restart does not);
  resuming goes to ``probing``; on a run neither paused nor open a resume
  changes nothing (:func:`nothing_to_resume`), and a run held only by its
  shared queue's open breaker is resumed by resuming the queue. A step lets exactly one batch
  start while paused or open, and the run stays paused.
- credentials, balance and permission failures, and a failed store write,
  open it at once: every further call would fail or could not be recorded.

How many batches these let start is :mod:`runner.rules.gate`'s to say. The
transitions are pure functions over the persisted ``Control`` row; a verdict
carries its move as a value (:class:`TransportFailure`, :class:`Open` or
:func:`after_success`), and the store applies it in the same transaction as
the batch that caused it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..model import BreakerState, FailureKind
from . import gate

#: Consecutive final transport failures that open the breaker.
OPEN_AFTER = 2


@dataclass(frozen=True)
class Control:
    """A run's breaker and a person's controls, as the store keeps them."""

    breaker: BreakerState = BreakerState.CLOSED
    reason: str | None = None
    transport_failures: int = 0
    paused: bool = False
    steps: int = 0
    #: The kind of failure the breaker opened or probes for (None: closed, or resumed by a person).
    kind: FailureKind | None = None

    @property
    def held(self) -> bool:
        """No batch may start without a person (:func:`runner.rules.gate.held`)."""
        return gate.held(self)

    def slots(self, concurrency: int) -> int:
        """How many batches may be in flight now (:func:`runner.rules.gate.slots`)."""
        return gate.slots(self, concurrency)


def after_success(control: Control) -> Control:
    """A batch got its answer: the upstream is healthy again."""
    if control.breaker is BreakerState.OPEN:
        return replace(control, transport_failures=0)
    return replace(control, breaker=BreakerState.CLOSED, reason=None, transport_failures=0, kind=None)


def after_transport_failure(control: Control, message: str, *, started_closed: bool = False) -> Control:
    """A batch's call failed for good after its request retries.

    ``started_closed``: the call started while the breaker was closed, so a
    probing breaker already counts the moment it failed in (the table above).
    """
    failures = control.transport_failures + 1
    if control.breaker is BreakerState.OPEN:  # keep the reason it opened for
        return replace(control, transport_failures=failures)
    if control.breaker is BreakerState.PROBING and started_closed:
        return control
    state = BreakerState.OPEN if failures >= OPEN_AFTER else BreakerState.PROBING
    reason = f"{failures} consecutive transport failures, last: {message}"
    return replace(control, breaker=state, reason=reason, transport_failures=failures, kind=FailureKind.TRANSPORT)


def opened(control: Control, kind: FailureKind, reason: str) -> Control:
    """Open at once, for a failure of ``kind``: every further call would fail, or could not be recorded."""
    return replace(control, breaker=BreakerState.OPEN, reason=reason, kind=kind)


def nothing_to_resume(control: Control, open_queue: str | None = None) -> str | None:
    """Why a person's resume would change nothing: the run is neither paused nor open, or only its shared queue
    ``open_queue``'s breaker is open, which the queue's resume lifts (None: it lifts one)."""
    if control.held:
        return None
    if open_queue:
        return f"held by its queue {open_queue!r}, whose breaker is open"
    return f"neither paused nor open (breaker {control.breaker.value}): nothing to resume"


def resumed(control: Control) -> Control:
    """A person resumes: one batch at a time until one succeeds."""
    reason = "resumed by a person: one batch at a time until one succeeds"
    return replace(control, breaker=BreakerState.PROBING, reason=reason, paused=False, steps=0, kind=None)


@dataclass(frozen=True)
class TransportFailure:
    """The move of a batch whose call failed for good after its request retries (:func:`after_transport_failure`)."""

    message: str
    #: The call started while the breaker was closed (in flight together with any failure that made it probe).
    started_closed: bool = False

    def __call__(self, control: Control) -> Control:
        return after_transport_failure(control, self.message, started_closed=self.started_closed)


@dataclass(frozen=True)
class Open:
    """The move that opens the breaker at once, for a failure of ``kind`` (:func:`opened`)."""

    kind: FailureKind
    reason: str

    def __call__(self, control: Control) -> Control:
        return opened(control, self.kind, self.reason)
