"""The gate: how many batches may start now.

| the run's control row and time       | batches in flight at most |
|--------------------------------------|---------------------------|
| breaker ``closed``                   | ``concurrency``           |
| breaker ``probing``                  | 1                         |
| breaker ``open``, or paused          | 0                         |
| ... with steps a person allowed      | 1, each start a step      |
| any, before the quiet time a 429 set | none start                |

A run that is paused or whose breaker is open is *held*: nothing starts
without a person, and a start while held spends one of the steps a person
allowed (the store counts it down in the start's own transaction). A slot
that goes on to its next batch while held may do so only with a step.

Pure: the control row, the time and the counts in flight are passed in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..model import BreakerState

if TYPE_CHECKING:
    from .breaker import Control


def held(control: Control) -> bool:
    """No batch may start without a person: paused, or the breaker open."""
    return control.paused or control.breaker is BreakerState.OPEN


def slots(control: Control, concurrency: int) -> int:
    """How many batches may be in flight, by the breaker and a person's pause and steps."""
    if held(control):
        return 1 if control.steps > 0 else 0
    return 1 if control.breaker is BreakerState.PROBING else concurrency


def quiet(*, quiet_until: float, now: float) -> bool:
    """The upstream asked for quiet (a rate limit): no batch starts before ``quiet_until``."""
    return now < quiet_until


def gate(control: Control, *, concurrency: int, in_flight: int, quiet_until: float, now: float) -> int:
    """How many batches may start now, besides the ``in_flight`` ones."""
    if quiet(quiet_until=quiet_until, now=now):
        return 0
    return max(slots(control, concurrency) - in_flight, 0)


def may_go_on(
    control: Control, *, step: bool, concurrency: int, in_flight: int, quiet_until: float, now: float
) -> bool:
    """Whether a slot may start its next batch now, ``in_flight`` other slots at work.

    ``step``: the batch spends a step a person allowed; while the run is held
    nothing else starts.
    """
    if held(control) and not step:
        return False
    return gate(control, concurrency=concurrency, in_flight=in_flight, quiet_until=quiet_until, now=now) > 0


def held_reason(control: Control) -> str:
    """Why a held run waits for a person."""
    if control.paused:
        return "paused by a person"
    return f"breaker open ({control.reason})"
