"""The notebook panel's budget field: a new budget in USD, set with one button (``runner budget NAME --max``).

Part of :class:`runner.widgets.RunPanel` (imported only with it). The field
shows the budget that holds (empty: none); Set budget writes the value typed
through :func:`runner.control.budget`, which refuses one not more than 0, or
a cost budget for a model with no price, saying why in the panel's message
line. A run stopped at its budget goes on once it is raised.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from . import control
from .budgets import BudgetView


class BudgetField:
    """The field and its button (``widget``); ``show`` puts the budget that holds in the field while it is untouched."""

    def __init__(self, command: Callable[..., None]) -> None:
        self._command = command
        self._shown: float | None = None
        self.field = widgets.FloatText(description="budget $", value=0.0, style={"description_width": "initial"},
                                       layout=widgets.Layout(width="180px"))
        self.button = widgets.Button(description="Set budget", icon="dollar", layout=widgets.Layout(width="auto"),
                                     tooltip="the most the run may commit to, in USD (a run stopped at it goes on)")
        self.button.on_click(self._set)
        self.widget = widgets.HBox([self.field, self.button], layout=widgets.Layout(align_items="center"))

    def show(self, shown: BudgetView) -> None:
        """The budget that holds, unless a person typed another value since it was last shown."""
        holds = shown.budget.max_cost
        if self.field.value == (self._shown or 0.0) and holds != self._shown:
            self.field.value = holds or 0.0
        self._shown = holds

    def _set(self, _: Any) -> None:
        amount = float(self.field.value)
        self._command(control.budget, lambda done: f"budget set: ${done[0].max_cost:,.2f}", max_cost=amount)
