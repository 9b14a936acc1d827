"""A run's budget against what it committed to: the guard asked before a batch starts, and what the views show.

The decision is :mod:`runner.rules.budget`'s; this reads its figures: the
budget that holds (a person's, else the job's ``[budget]``), the ledger at
the saved job's prices (:mod:`runner.costs`), and the next batch's estimate.
Only the stages that call a provider count: a ``python`` stage's handler is
the user's own code, whose calls the runner cannot price (its batches are
never held to the budget). No SQL here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import costs, pricing
from .rules import budget as rule
from .rules.budget import Budget, Committed, Left

if TYPE_CHECKING:
    from .store.ledger import StageLedger
    from .model import Batch
    from .store.protocol import RunStore

#: How a person raises a run's budget, after the figures of a stop.
RAISE = "runner budget raises it"
#: How a person lets a run stopped at its budget go on once its next batch fits.
RESUME = "runner resume goes on"


def counted(rows: Sequence[StageLedger], job_json: str) -> list[StageLedger]:
    """The ledger rows of the stages that call a provider: those a budget counts."""
    return [row for row in rows if calls(job_json, row.stage)]


def calls(job_json: str, stage: str) -> bool:
    """Whether ``stage`` of the saved job calls a provider (not a user's handler: not counted against a budget)."""
    from .jobs import PYTHON  # here: a view of a run with no budget never loads the job file's parser

    saved = costs.terms(job_json)
    terms = saved.get(stage, saved.get(""))
    return terms is None or terms.kind != PYTHON


def committed(cost: costs.Cost) -> Committed:
    """What a run's cost says it committed to: spent, in flight and unknown charges, USD and tokens."""
    return Committed(cost.spent, cost.in_flight, cost.unknown, cost.tokens.input + cost.tokens.output,
                     cost.tokens_in_flight, cost.tokens_unknown)


def guard(store: RunStore, run_id: int, job_json: str, batch: Batch) -> str | None:
    """Why ``batch`` of the run of the job (``job_json``, as saved) may not start within the run's budget, with
    the figures and how to go on; None when it may (or no budget is set)."""
    return _judged(store, run_id, job_json, batch, stopped=False)


def restated(store: RunStore, run_id: int, job_json: str, batch: Batch) -> str | None:
    """The reason of a run stopped at its budget, written afresh by the figures now, ``batch`` standing for the
    next: the guard's, or, when the batches in flight at the stop cost less than their estimate and the next
    fits now, those figures and that a resume goes on (None: the budget does not count ``batch``)."""
    return _judged(store, run_id, job_json, batch, stopped=True)


def _judged(store: RunStore, run_id: int, job_json: str, batch: Batch, *, stopped: bool) -> str | None:
    limits = store.budget(run_id)
    if not limits.limited:
        return None
    if not calls(job_json, batch.stage):
        return None
    rows = counted(store.ledger(run_id), job_json)
    cost, tokens = costs.next_batch(rows, job_json, batch.stage, chars=batch.chars, items=batch.size)
    now = committed(costs.of_run(rows, job_json))
    why = rule.over(limits, now, cost=cost, tokens=tokens)
    if why is None and stopped:
        return f"budget: {rule.fits_now(limits, now, cost=cost, tokens=tokens)}; {RESUME}"
    return None if why is None else f"budget: {why}; {RAISE}"


@dataclass(frozen=True)
class BudgetView:
    """A run's budget as the views show it: its limits, what the run committed to and what is left."""

    budget: Budget
    committed: Committed
    left: Left

    def as_json(self) -> dict[str, Any] | None:
        """``runner status --json``'s ``budget``: null when none is set."""
        if not self.budget.limited:
            return None
        return {**self.budget.as_dict(), "left": {"cost": self.left.cost, "tokens": self.left.tokens}}

    def line(self) -> str:
        """``budget $1.2000 of $5.0000 · 12,000 of 50,000 tokens`` ("" when none is set), beside the cost line."""
        parts = []
        if self.budget.max_cost is not None:
            parts.append(f"{pricing.money(self.committed.cost)} of {pricing.money(self.budget.max_cost)}")
        if self.budget.max_tokens is not None:
            parts.append(f"{self.committed.tokens:,} of {self.budget.max_tokens:,} tokens")
        return f"budget {' · '.join(parts)}" if parts else ""

    @property
    def passed(self) -> bool:
        """The run has committed to a limit's worth already: no batch starts under it."""
        return any(left is not None and left <= 0 for left in (self.left.cost, self.left.tokens))

    def given(self) -> str:
        """The budget as a person who just gave it reads it: ``no budget`` when none holds; one the run has
        committed to already says that the run stops before its next batch (it is kept all the same)."""
        if not self.budget.limited:
            return "no budget"
        return self.line() + ("; the run has committed to that much already: it stops before its next batch"
                              if self.passed else "")


def view(limits: Budget, rows: Sequence[StageLedger], job_json: str) -> BudgetView:
    """The budget view of a run whose budget is ``limits``, by its ledger ``rows`` and its saved job."""
    if not limits.limited:
        return BudgetView(limits, Committed(), Left())
    spent = committed(costs.of_run(counted(rows, job_json), job_json))
    return BudgetView(limits, spent, rule.left(limits, spent))


def cost_line(cost: costs.Cost, shown: BudgetView) -> str:
    """The cost line (:func:`runner.costs.line`), the budget beside it when one is set."""
    return " · ".join(part for part in (costs.line(cost), shown.line()) if part)
