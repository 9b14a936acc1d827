"""A shared queue's rules: the room its runs share, and the worse of a run's and its queue's breaker."""

from __future__ import annotations

import pytest

from runner.model import BreakerState, FailureKind
from runner.rules import queues
from runner.rules.breaker import Control

CLOSED, PROBING, OPEN = BreakerState.CLOSED, BreakerState.PROBING, BreakerState.OPEN


def queue(breaker: BreakerState = CLOSED, *, others: int = 0, ahead: int = 0, quiet_until: float = 0.0) -> queues.Queue:
    return queues.Queue("q", 4, Control(breaker=breaker, reason="why"), quiet_until, others=others, ahead=ahead)


@pytest.mark.parametrize("shared, mine, more", [
    (queue(), 0, 4),
    (queue(), 3, 1),
    (queue(others=3), 0, 1),
    (queue(others=2), 2, 0),
    (queue(others=5), 0, 0),
    (queue(ahead=3), 0, 1),
    (queue(others=1, ahead=3), 0, 0),
    (queue(PROBING), 0, 1),
    (queue(PROBING, others=1), 0, 0),
    (queue(OPEN), 0, 1),
    (queue(quiet_until=200.0), 0, 0),
])
def test_the_runs_of_a_queue_share_its_slots_and_runs_of_higher_priority_waiting_take_theirs_first(
    shared: queues.Queue, mine: int, more: int
) -> None:
    assert queues.room(shared, mine=mine, now=100.0) == more


@pytest.mark.parametrize("run, shared, breaker", [
    (Control(), queue(), CLOSED),
    (Control(), queue(PROBING), PROBING),
    (Control(), queue(OPEN), OPEN),
    (Control(breaker=OPEN), queue(PROBING), OPEN),
    (Control(breaker=PROBING), queue(), PROBING),
])
def test_a_run_heeds_the_worse_of_its_own_breaker_and_its_queues(
    run: Control, shared: queues.Queue, breaker: BreakerState
) -> None:
    assert queues.joined(run, shared).breaker is breaker


def test_a_run_held_by_its_queue_keeps_a_persons_pause_and_steps_and_says_which_queue() -> None:
    run = Control(paused=True, steps=1)
    shared = queues.Queue("openai-main", 4, Control(breaker=OPEN, reason="auth: bad key", kind=FailureKind.AUTH))
    joined = queues.joined(run, shared)
    assert (joined.paused, joined.steps, joined.kind) == (True, 1, FailureKind.AUTH)
    assert joined.reason == "queue 'openai-main': auth: bad key"
    assert queues.joined(run, None) is run
