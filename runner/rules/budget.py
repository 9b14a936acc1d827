"""The budget guard: whether a batch may start within the run's budget (``[budget] max_cost``, ``max_tokens``).

What the run has committed to is what was spent, the batches in flight at
their estimate and every unknown charge (a call sent whose answer was lost)
at its estimate (:mod:`runner.rules.estimate`). A batch may start when that
plus its own estimate stays within each limit set:

| limit set  | committed + this batch's estimate | the batch                      |
|------------|-----------------------------------|--------------------------------|
| none       | (any)                             | starts                         |
| max_cost   | at most max_cost                  | starts                         |
| max_cost   | more than max_cost                | waits: the run stops at budget |
| max_cost   | unknown (no price)                | waits: no price keeps a budget |
| max_tokens | at most / more than max_tokens    | starts / waits, as for cost    |

Both set, both must hold. A budget reached never stops calls already in
flight: this is asked only before a batch starts. A run stopped at its
budget (breaker open, kind ``budget``) goes on once a person gives a new
budget (:func:`given`): its breaker closes (the upstream was never sick),
and the next start asks again; a pause, or a breaker open for another
cause, stays.

Pure: the figures come in, the decision (None, or why not, with the figures) goes out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from ..job_values import TYPE_NAMES
from ..pricing import money as usd
from ..model import BreakerState, FailureKind
from .breaker import Control


@dataclass(frozen=True)
class Budget:
    """A run's budget: USD and tokens it may commit to (None: no limit), as ``[budget]`` or a person gave it."""

    max_cost: float | None = field(default=None, metadata={"type": float})
    max_tokens: int | None = field(default=None, metadata={"type": int})

    @property
    def limited(self) -> bool:
        """Some limit is set."""
        return self.max_cost is not None or self.max_tokens is not None

    def problem(self) -> str | None:
        """What is wrong with the limits given (each a finite number, as a job file's, more than 0), or None.

        The one check of a budget, whoever gives it: the job file, ``runner budget``, the TUI, the panel, Python.
        """
        for name, limit in (("max_cost", self.max_cost), ("max_tokens", self.max_tokens)):
            if limit is not None and not math.isfinite(limit):
                return f"{name!r} must be {TYPE_NAMES[float]}, not {limit:g}"
            if limit is not None and limit <= 0:
                return f"{name!r} must be more than 0, not {limit:g}"
        return None

    def as_dict(self) -> dict[str, Any]:
        """The limits as the store and the job keep them."""
        return {"max_cost": self.max_cost, "max_tokens": self.max_tokens}


@dataclass(frozen=True)
class Committed:
    """What a run has committed to, USD (None: unknown, no price) and tokens: spent, in flight, unknown charges."""

    spent: float | None = 0.0
    in_flight: float | None = 0.0
    unknown: float | None = 0.0
    tokens_spent: int = 0
    tokens_in_flight: int = 0
    tokens_unknown: int = 0

    @property
    def cost(self) -> float | None:
        """Spent, in flight and unknown, added up (None if any is unknown)."""
        figures = (self.spent, self.in_flight, self.unknown)
        return None if any(f is None for f in figures) else sum(f for f in figures if f is not None)

    @property
    def tokens(self) -> int:
        return self.tokens_spent + self.tokens_in_flight + self.tokens_unknown


@dataclass(frozen=True)
class Left:
    """What a budget leaves once everything committed is counted: USD and tokens (None: no such limit, or
    unknown); below 0 when the run went past it (calls in flight are never stopped)."""

    cost: float | None = None
    tokens: int | None = None


def left(budget: Budget, committed: Committed) -> Left:
    """What ``budget`` leaves after ``committed``."""
    cost = committed.cost
    return Left(
        cost=None if budget.max_cost is None or cost is None else budget.max_cost - cost,
        tokens=None if budget.max_tokens is None else budget.max_tokens - committed.tokens,
    )


def over(budget: Budget, committed: Committed, *, cost: float | None, tokens: int) -> str | None:
    """Why a batch estimated at ``cost`` (None: no price) and ``tokens`` may not start within ``budget``, with the
    figures; None when it may."""
    reasons = []
    if budget.max_cost is not None:
        total = committed.cost
        if total is None or cost is None:
            reasons.append(f"cost unknown (no price), so the budget of {usd(budget.max_cost)} cannot be kept")
        elif total + cost > budget.max_cost:
            reasons.append(f"{_cost_figures(committed, cost)} would pass the budget of {usd(budget.max_cost)}")
    if budget.max_tokens is not None and committed.tokens + tokens > budget.max_tokens:
        reasons.append(f"{_token_figures(committed, tokens)} would pass the budget of {budget.max_tokens:,} tokens")
    return "; ".join(reasons) or None


def fits_now(budget: Budget, committed: Committed, *, cost: float | None, tokens: int) -> str:
    """A run stopped at ``budget`` whose next batch, by the figures now, fits (the batches in flight at the stop
    cost less than their estimate): those figures, for the stop's reason written afresh."""
    figures = ([f"{_cost_figures(committed, cost)} are within {usd(budget.max_cost)}"]
               if budget.max_cost is not None and cost is not None else [])
    if budget.max_tokens is not None:
        figures.append(f"{_token_figures(committed, tokens)} are within {budget.max_tokens:,} tokens")
    return f"the batches in flight at the stop cost less than estimated: {'; '.join(figures)} now"


def _cost_figures(committed: Committed, cost: float | None) -> str:
    return (f"{usd(committed.spent)} spent + {usd(committed.in_flight)} in flight + {usd(committed.unknown)} "
            f"unknown + {usd(cost)} for the next batch")


def _token_figures(committed: Committed, tokens: int) -> str:
    return (f"{committed.tokens_spent:,} tokens spent + {committed.tokens_in_flight:,} in flight + "
            f"{committed.tokens_unknown:,} unknown + {tokens:,} for the next batch")


def given(control: Control) -> Control:
    """The control row once a person gives a new budget: a breaker open at the budget closed, else unchanged."""
    if control.breaker is BreakerState.OPEN and control.kind is FailureKind.BUDGET:
        return replace(control, breaker=BreakerState.CLOSED, reason=None, transport_failures=0, kind=None)
    return control
