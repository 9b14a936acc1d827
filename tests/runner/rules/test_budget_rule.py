"""The budget guard's rule: a batch starts only when spent + in flight + unknown charges + its own estimate stay
within every limit set; what a budget leaves; a new budget lets a run stopped at it go on."""

from __future__ import annotations

import math

import pytest

from runner.model import BreakerState, FailureKind
from runner.rules import budget
from runner.rules.breaker import Control
from runner.rules.budget import Budget, Committed, Left

SPENT = Committed(spent=2.0, in_flight=1.0, unknown=0.5, tokens_spent=2_000, tokens_in_flight=1_000,
                  tokens_unknown=500)


@pytest.mark.parametrize("limits, cost, tokens, starts", [
    (Budget(), 100.0, 10**9, True),  # no budget: anything starts
    (Budget(max_cost=5.0), 1.5, 0, True),  # 3.5 + 1.5 = 5.0: within, to the cent
    (Budget(max_cost=5.0), 1.6, 0, False),  # 3.5 + 1.6 passes 5.0
    (Budget(max_cost=3.6), 0.2, 0, False),  # the in-flight and unknown parts count: spent alone would fit
    (Budget(max_cost=5.0), None, 0, False),  # no price: a cost budget cannot be kept
    (Budget(max_tokens=4_000), 0.0, 500, True),  # 3,500 + 500
    (Budget(max_tokens=4_000), 0.0, 501, False),
    (Budget(max_cost=100.0, max_tokens=4_000), 0.0, 600, False),  # both set: both must hold
    (Budget(max_cost=3.0, max_tokens=10**6), 0.1, 0, False),
])
def test_a_batch_starts_only_within_every_limit_counting_in_flight_and_unknown_charges(
    limits: Budget, cost: float | None, tokens: int, starts: bool
) -> None:
    assert (budget.over(limits, SPENT, cost=cost, tokens=tokens) is None) == starts


def test_an_unknown_committed_cost_keeps_no_cost_budget_but_a_budget_of_tokens_still_holds() -> None:
    unknown = Committed(spent=None, tokens_spent=10)
    assert budget.over(Budget(max_cost=10.0), unknown, cost=0.1, tokens=1) is not None
    assert budget.over(Budget(max_tokens=100), unknown, cost=None, tokens=1) is None


def test_the_reason_gives_every_figure_and_the_budget() -> None:
    said = budget.over(Budget(max_cost=3.0, max_tokens=3_000), SPENT, cost=0.25, tokens=10)
    assert said == (
        "$2.0000 spent + $1.0000 in flight + $0.5000 unknown + $0.2500 for the next batch would pass the budget of "
        "$3.0000; 2,000 tokens spent + 1,000 in flight + 500 unknown + 10 for the next batch would pass the budget "
        "of 3,000 tokens")


@pytest.mark.parametrize("limits, left", [
    (Budget(), Left(None, None)),
    (Budget(max_cost=5.0), Left(1.5, None)),
    (Budget(max_tokens=3_000), Left(None, -500)),  # past it: calls in flight are never stopped
    (Budget(max_cost=5.0, max_tokens=10_000), Left(1.5, 6_500)),
])
def test_what_a_budget_leaves_after_everything_committed(limits: Budget, left: Left) -> None:
    assert budget.left(limits, SPENT) == left


@pytest.mark.parametrize("limits, problem", [
    (Budget(max_cost=0.01, max_tokens=1), None),
    (Budget(max_cost=0), "'max_cost' must be more than 0, not 0"),
    (Budget(max_cost=-1), "'max_cost' must be more than 0, not -1"),
    (Budget(max_tokens=-5), "'max_tokens' must be more than 0, not -5"),
])
def test_each_limit_must_be_more_than_0(limits: Budget, problem: str | None) -> None:
    assert limits.problem() == problem


@pytest.mark.parametrize("limits, problem", [
    (Budget(max_cost=math.nan), "'max_cost' must be a finite number, not nan"),
    (Budget(max_cost=math.inf), "'max_cost' must be a finite number, not inf"),
    (Budget(max_cost=5.0, max_tokens=-math.inf), "'max_tokens' must be a finite number, not -inf"),  # type: ignore[arg-type]
])
def test_each_limit_must_be_a_finite_number(limits: Budget, problem: str) -> None:
    assert limits.problem() == problem


@pytest.mark.parametrize("before, after", [
    (Control(BreakerState.OPEN, "budget: ...", kind=FailureKind.BUDGET), Control()),
    (Control(BreakerState.OPEN, "budget: ...", paused=True, kind=FailureKind.BUDGET), Control(paused=True)),
    (Control(BreakerState.OPEN, "auth: ...", kind=FailureKind.AUTH),
     Control(BreakerState.OPEN, "auth: ...", kind=FailureKind.AUTH)),  # open for another cause: it stays
    (Control(BreakerState.PROBING, "1 failure", 1, kind=FailureKind.TRANSPORT),
     Control(BreakerState.PROBING, "1 failure", 1, kind=FailureKind.TRANSPORT)),
])
def test_a_new_budget_closes_a_breaker_open_at_the_budget_and_nothing_else(before: Control, after: Control) -> None:
    assert budget.given(before) == after


def test_a_stop_whose_next_batch_fits_now_says_so_with_the_figures_now() -> None:
    now = Committed(spent=0.5, tokens_spent=400)
    said = budget.fits_now(Budget(max_cost=5.0, max_tokens=1_000), now, cost=0.25, tokens=100)
    assert said == ("the batches in flight at the stop cost less than estimated: $0.5000 spent + $0.0000 in flight + "
                    "$0.0000 unknown + $0.2500 for the next batch are within $5.0000; 400 tokens spent + 0 in flight + "
                    "0 unknown + 100 for the next batch are within 1,000 tokens now")
