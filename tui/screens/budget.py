"""The dialog that gives a run a new budget (``b`` on the run screen): USD and tokens, as ``runner budget`` takes them.

A field left empty keeps that limit; the numbers are checked by the core's
command (:func:`runner.control.budget`), which says why it refuses one.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from runner.budgets import BudgetView
from runner.pricing import money

#: What the dialog gives back: USD and tokens, each None when left empty (kept).
Limits = tuple[float | None, int | None]


class BudgetScreen(ModalScreen[Limits | None]):
    """The budget's two fields, filled with the limits that hold; dismissed with them, or None (cancelled)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "save", "Save"),
        Binding("escape", "dismiss(None)", "Cancel"),
    ]

    def __init__(self, name: str, shown: BudgetView) -> None:
        super().__init__()
        self.run_name = name
        self.shown = shown

    def compose(self) -> ComposeResult:
        budget = self.shown.budget
        committed = self.shown.committed
        with Vertical(id="edit"):
            yield Static(Text(f"A new budget for {self.run_name}", style="bold"), id="edit-title")
            yield Static(f"committed so far (spent, in flight, unknown charges): {money(committed.cost)} and "
                         f"{committed.tokens:,} tokens. A run stopped at its budget goes on once it is raised; "
                         "a field left empty keeps its limit.")
            yield Input(_shown(budget.max_cost), placeholder="USD (empty: keep)", type="number", id="budget-cost")
            yield Input(_shown(budget.max_tokens), placeholder="tokens (empty: keep)", type="integer",
                        id="budget-tokens")
            yield Static(id="edit-error")
            with Horizontal(id="edit-buttons"):
                yield Button("Save (ctrl+s)", id="save", variant="primary")
                yield Button("Cancel (esc)", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#budget-cost", Input).focus()

    @on(Input.Submitted)
    @on(Button.Pressed, "#save")
    def action_save(self) -> None:
        cost, tokens = (self.query_one(f"#budget-{field}", Input).value.strip() for field in ("cost", "tokens"))
        if not cost and not tokens:
            self.query_one("#edit-error", Static).update(Text("not saved: give USD, tokens, or both", style="bold red"))
            return
        self.dismiss((float(cost) if cost else None, int(tokens) if tokens else None))

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.dismiss(None)


def _shown(limit: float | None) -> str:
    """A limit as its field shows it: ``5``, ``2.5``, or empty for none."""
    return "" if limit is None else f"{limit:g}" if isinstance(limit, float) else str(limit)
