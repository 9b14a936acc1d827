"""A run's budget as the store keeps it, and a person's word on it: ``runner budget`` (the TUI's, the panel's).

The budget that holds is a person's (``runs.budget``, JSON) if one was given,
else the saved job's ``[budget]`` (:mod:`.migrations_budget`). Giving one is
one transaction that writes it, lets the control row go on as the rules say
(a breaker held at the budget released) and logs the command ``budget``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..rules.breaker import Control
from ..rules.budget import Budget
from .commands import LOG_COMMAND, Commands
from .ledger import StageLedger, totals

#: The budget that holds for a run, as a column of ``runs``: a person's, else its job's (NULL: none).
HOLDING = "coalesce(budget, @field(job, '$.budget'))"
#: The budget that holds for run ``?``.
HOLDS = f"SELECT {HOLDING} AS budget FROM runs WHERE id = ?"


def read(saved: str | None) -> Budget:
    """A budget as saved (JSON ``{"max_cost", "max_tokens"}``; None, or anything else: none)."""
    try:
        data: Any = json.loads(saved) if saved else {}
    except ValueError:
        data = {}
    data = data if isinstance(data, dict) else {}
    cost, tokens = data.get("max_cost"), data.get("max_tokens")
    return Budget(float(cost) if isinstance(cost, int | float) else None,
                  int(tokens) if isinstance(tokens, int | float) else None)


class Budgets(Commands):
    """The budget that holds for a run, and the verb that gives it."""

    def budget(self, run_id: int) -> Budget:
        """The budget that holds for the run (read inside the caller's transaction, when there is one)."""
        (row,) = self.rows(HOLDS, [run_id])
        return read(row["budget"])

    def ledger(self, run_id: int) -> list[StageLedger]:
        """The run's ledger per stage, with what is in flight (:func:`runner.store.ledger.totals`)."""
        return totals(self, run_id)

    def give_budget(
        self, run_id: int, change: Callable[[Budget], Budget], go_on: Callable[[Control], Control], *, now: float
    ) -> tuple[Budget, Control]:
        """A person's budget for the run, as ``change`` makes it of the one that holds (it may refuse by raising),
        and the control row as ``go_on`` leaves it; one transaction, logged."""
        with self.write() as conn:
            budget = change(self.budget(run_id))
            control = go_on(self.control(run_id))
            conn.execute("UPDATE runs SET budget = ? WHERE id = ?", (json.dumps(budget.as_dict()), run_id))
            self.write_control(conn, run_id, control)
            conn.execute(LOG_COMMAND, (run_id, "budget", json.dumps(budget.as_dict()), now, now,
                                       f"{control.breaker.value}, paused={control.paused}"))
        return budget, control
