"""The breaker's transitions over the control row: probing, open, closed again, and a person's resume."""

from __future__ import annotations

from collections.abc import Callable
from functools import reduce

import pytest

from runner.rules import breaker
from runner.rules.breaker import Control, Open, TransportFailure
from runner.model import BreakerState, FailureKind

CLOSED, PROBING, OPEN = BreakerState.CLOSED, BreakerState.PROBING, BreakerState.OPEN
SUCCESS, FAILURE = breaker.after_success, TransportFailure("503 sick")


@pytest.mark.parametrize("moves, state, failures", [
    ([FAILURE], PROBING, 1),
    ([FAILURE, FAILURE], OPEN, 2),
    ([FAILURE, SUCCESS], CLOSED, 0),
    ([FAILURE, SUCCESS, FAILURE], PROBING, 1),
    ([FAILURE, FAILURE, SUCCESS], OPEN, 0),
])
def test_one_final_transport_failure_probes_a_second_in_a_row_opens_and_a_success_resets_the_count(
    moves: list[TransportFailure], state: BreakerState, failures: int
) -> None:
    after = reduce(lambda control, move: move(control), moves, Control())
    assert (after.breaker, after.transport_failures) == (state, failures)


IN_FLIGHT_TOGETHER = TransportFailure("connection reset", started_closed=True)


@pytest.mark.parametrize("moves, state, failures", [
    ([IN_FLIGHT_TOGETHER], PROBING, 1),
    ([IN_FLIGHT_TOGETHER, IN_FLIGHT_TOGETHER], PROBING, 1),
    ([IN_FLIGHT_TOGETHER] * 400, PROBING, 1),
    ([IN_FLIGHT_TOGETHER, IN_FLIGHT_TOGETHER, FAILURE], OPEN, 2),
    ([IN_FLIGHT_TOGETHER, FAILURE, IN_FLIGHT_TOGETHER], OPEN, 3),
    ([IN_FLIGHT_TOGETHER, SUCCESS, IN_FLIGHT_TOGETHER], PROBING, 1),
    ([FAILURE, IN_FLIGHT_TOGETHER], PROBING, 1),
])
def test_calls_in_flight_together_when_one_fails_count_as_one_failure_and_the_probe_started_after_decides(
    moves: list[Callable[[Control], Control]], state: BreakerState, failures: int
) -> None:
    after = reduce(lambda control, move: move(control), moves, Control())
    assert (after.breaker, after.transport_failures) == (state, failures)


def test_an_open_breaker_keeps_the_reason_it_opened_for() -> None:
    opened = breaker.opened(Control(), FailureKind.BILLING, "billing: 429 insufficient_quota")
    later = breaker.after_transport_failure(opened, "503 server_is_overloaded")
    assert (later.breaker, later.reason, later.transport_failures, later.kind) == (
        BreakerState.OPEN, opened.reason, 1, FailureKind.BILLING)
    assert Open(FailureKind.AUTH, "auth: 401")(Control(paused=True, steps=1)) == Control(
        OPEN, "auth: 401", 0, True, 1, FailureKind.AUTH)


@pytest.mark.parametrize("moves, kind", [
    ([FAILURE], FailureKind.TRANSPORT),
    ([FAILURE, FAILURE], FailureKind.TRANSPORT),
    ([FAILURE, SUCCESS], None),
    ([Open(FailureKind.AUTH, "auth: 401"), breaker.resumed], None),
    ([Open(FailureKind.STORE, "store: disk full"), SUCCESS], FailureKind.STORE),
])
def test_the_breaker_keeps_the_kind_of_failure_it_stands_for_so_that_exit_codes_come_from_the_kind(
    moves: list[Callable[[Control], Control]], kind: FailureKind | None
) -> None:
    assert reduce(lambda control, move: move(control), moves, Control()).kind is kind


def test_resuming_probes_and_lifts_a_pause_and_its_steps() -> None:
    resumed = breaker.resumed(Control(OPEN, "auth: 401", 2, True, 1))
    assert (resumed.breaker, resumed.transport_failures, resumed.paused, resumed.steps) == (PROBING, 2, False, 0)


@pytest.mark.parametrize("control, refused", [
    (Control(), "neither paused nor open (breaker closed): nothing to resume"),
    (Control(PROBING, "1 transport failure", 1), "neither paused nor open (breaker probing): nothing to resume"),
    (Control(paused=True), None),
    (Control(OPEN, "2 consecutive transport failures", 2), None),
])
def test_only_a_paused_run_or_an_open_breaker_has_something_to_resume(control: Control, refused: str | None) -> None:
    assert breaker.nothing_to_resume(control) == refused


@pytest.mark.parametrize("control, refused", [
    (Control(), "held by its queue 'q', whose breaker is open"),
    (Control(paused=True), None),
])
def test_a_run_held_only_by_its_queues_open_breaker_is_resumed_by_the_queue(control: Control, refused: str | None) -> None:
    assert breaker.nothing_to_resume(control, "q") == refused
