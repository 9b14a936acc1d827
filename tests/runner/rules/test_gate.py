"""The gate: how many batches may start, by the breaker, a person's pause and steps, and a rate limit's quiet time."""

from __future__ import annotations

import pytest

from runner.rules import gate
from runner.rules.breaker import Control
from runner.model import BreakerState

CLOSED, PROBING, OPEN = BreakerState.CLOSED, BreakerState.PROBING, BreakerState.OPEN


def starts(control: Control, *, in_flight: int = 0, quiet_until: float = 0.0, now: float = 100.0) -> int:
    return gate.gate(control, concurrency=3, in_flight=in_flight, quiet_until=quiet_until, now=now)


@pytest.mark.parametrize("state, slots", [(CLOSED, 3), (PROBING, 1), (OPEN, 0)])
def test_the_breaker_gives_concurrency_slots_closed_one_probing_none_open(state: BreakerState, slots: int) -> None:
    assert starts(Control(breaker=state)) == slots
    assert Control(breaker=state).slots(3) == slots  # the UIs read it from the control row


@pytest.mark.parametrize("state, in_flight, more", [
    (CLOSED, 0, 3), (CLOSED, 2, 1), (CLOSED, 3, 0), (PROBING, 1, 0), (PROBING, 2, 0), (CLOSED, 5, 0),
])
def test_batches_in_flight_take_their_slots(state: BreakerState, in_flight: int, more: int) -> None:
    assert starts(Control(breaker=state), in_flight=in_flight) == more


@pytest.mark.parametrize("control, more", [
    (Control(paused=True), 0),
    (Control(paused=True, steps=1), 1),
    (Control(paused=True, steps=5), 1),
    (Control(breaker=OPEN, steps=2), 1),
    (Control(breaker=PROBING, paused=True), 0),
])
def test_a_paused_or_open_run_starts_one_batch_per_step_a_person_allowed(control: Control, more: int) -> None:
    assert gate.held(control) and control.held
    assert starts(control) == control.slots(3) == more
    assert starts(control, in_flight=1) == 0


@pytest.mark.parametrize("control, step, others, goes_on", [
    (Control(), False, 1, True),
    (Control(), False, 3, False),
    (Control(breaker=PROBING), False, 1, False),
    (Control(paused=True, steps=1), False, 0, False),
    (Control(paused=True, steps=1), True, 0, True),
    (Control(paused=True), True, 0, False),
    (Control(breaker=OPEN, steps=1), True, 1, False),
])
def test_a_slot_goes_on_while_held_only_with_a_step(control: Control, step: bool, others: int, goes_on: bool) -> None:
    assert gate.may_go_on(control, step=step, concurrency=3, in_flight=others, quiet_until=0.0, now=1.0) is goes_on


@pytest.mark.parametrize("now, more", [(99.0, 0), (129.9, 0), (130.0, 3), (500.0, 3)])
def test_no_batch_starts_before_the_quiet_time_a_rate_limit_asked_for(now: float, more: int) -> None:
    assert starts(Control(), quiet_until=130.0, now=now) == more
    assert gate.may_go_on(Control(), step=False, concurrency=3, in_flight=0, quiet_until=130.0, now=now) is (more > 0)


@pytest.mark.parametrize("control, reason", [
    (Control(paused=True), "paused by a person"),
    (Control(paused=True, breaker=OPEN, reason="2 consecutive transport failures"), "paused by a person"),
    (Control(breaker=OPEN, reason="auth: 401"), "breaker open (auth: 401)"),
])
def test_a_held_run_says_why_it_waits(control: Control, reason: str) -> None:
    assert gate.held_reason(control) == reason
