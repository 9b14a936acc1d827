"""A run's cost and the budget beside it, as the views read them: the ledger read once for both.

``runner status`` reads them with the rest of a run's standing; ``runner
budget`` and the cost line after ``runner run`` read them alone
(:func:`run_cost`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .. import budgets, costs
from . import ledger
from .budgets import HOLDING, read

if TYPE_CHECKING:
    from .base import StoreBase


def cost_and_budget(store: StoreBase, run: Mapping[str, Any]) -> tuple[costs.Cost, budgets.BudgetView]:
    """The cost and the budget view of ``run``: a row with its ``id``, its saved ``job`` and the ``budget`` that
    holds (:data:`runner.store.budgets.HOLDING`)."""
    rows = ledger.totals(store, run["id"])
    return costs.of_run(rows, run["job"]), budgets.view(read(run["budget"]), rows, run["job"])


def run_cost(store: StoreBase, run_id: int) -> tuple[costs.Cost, budgets.BudgetView]:
    """The run's cost and its budget view, and nothing else of its standing."""
    (run,) = store.rows(f"SELECT id, job, {HOLDING} AS budget FROM runs WHERE id = ?", [run_id])
    return cost_and_budget(store, run)
