"""What awaits a person after a crash, and why; confirming asks once more, with the double-charge warning."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import ClassVar

from rich import box
from rich.table import Table as RichTable
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Footer, Header, Static

from runner import recovery
from runner.recovery import Case
from runner.rules.rerun_plan import RerunPlan
from runner.store import Store, rerun_plans, views
from runner.store.answers import HeldView
from runner.words import plural

from ..widgets import Table
from .base import Read, StoreScreen, unless_obeyed
from .dialog import AskScreen

WHY = (
    "An engine stopped while these items were sent: the upstream may or may not have received them, "
    "and their answers were not saved. They are held, never sent again on their own. "
    "Confirming releases them; each case says what that does."
)


class CaseTable(Static):
    """Held items by case, with what confirming them does (wrapped, it is the point of this screen)."""

    def show(self, view: HeldView) -> None:
        table = RichTable(box=box.SIMPLE_HEAD, expand=True, padding=(0, 1))
        table.add_column("case", no_wrap=True)
        table.add_column("items", justify="right", no_wrap=True)
        table.add_column("what confirming does", ratio=1)
        for case, n in view.by_case().items():
            style = "red" if case.may_charge_twice else ""
            table.add_row(Text(case.value, style=f"bold {style}"), f"{n:,}", Text(case.warning, style=style))
        self.update(table if view.items else "")


class HeldTable(Table):
    """The held items; Enter confirms the one under the cursor."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "select_cursor", "Confirm item", tooltip="Release this item (asks first)")]

    COLUMNS = ("key", "group", "case", "upstream task", "attempts", "paid calls")
    CURSOR = "row"

    def show(self, items: Sequence[recovery.HeldItem]) -> None:
        self.fill(items, [
            (i.key, [i.key, i.group, Text(i.case.value, style="red" if i.case.may_charge_twice else ""),
                     i.task_id or "", Text(str(i.attempts), justify="right"), Text(str(i.paid_calls), justify="right")])
            for i in items
        ])


class ConfirmationsScreen(StoreScreen[HeldView]):
    """A run's held items, each with its case and what confirming it does."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("c", "confirm_all", "Confirm all", tooltip="Release every held item (asks first)"),
        Binding("escape", "app.pop_screen", "Back"),
    ]

    def __init__(self, run: str) -> None:
        super().__init__()
        self.run_name = run
        self.view: HeldView | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="held-title", classes="title")
        yield Static(id="held-why")
        yield CaseTable(id="cases")
        yield Static(id="held-warning")
        yield HeldTable(id="held")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.sub_title = f"{self.run_name}: confirmations"
        super().on_mount()

    def read(self) -> Read[HeldView]:
        return partial(_held, name=self.run_name)

    def show(self, view: HeldView) -> None:
        self.view = view
        count = len(view.items)
        self.query_one("#held-title", Static).update(Text.assemble(
            (f"{count:,} items of {self.run_name} await your confirmation", "bold") if count
            else (f"Nothing of {self.run_name} awaits confirmation", "bold"),
        ))
        self.query_one("#held-why", Static).update(WHY if count else "")
        self.query_one(CaseTable).show(view)
        self.query_one("#held-warning", Static).update(double_charge(view.by_case()))
        self.query_one(HeldTable).show(view.items)

    def action_confirm_all(self) -> None:
        if self.view is None or not self.view.items:
            self.notify(f"nothing of {self.run_name} awaits confirmation", title="runner")
            return
        title, cases = f"Confirm all {len(self.view.items):,} held items of {self.run_name}?", self.view.by_case()
        self.ask(partial(_plan, name=self.run_name, keys=()), partial(ask_confirm, title, cases),
                 partial(self._confirm_if, keys=()))

    @on(DataTable.RowSelected, "#held")
    def _confirm_one(self, event: DataTable.RowSelected) -> None:
        if self.view is None:
            return
        item = next((i for i in self.view.items if i.key == event.row_key.value), None)
        if item is not None:
            self.ask(partial(_plan, name=self.run_name, keys=(item.key,)),
                     partial(ask_confirm, f"Confirm held item {item.key}?", {item.case: 1}),
                     partial(self._confirm_if, keys=(item.key,)))

    def _confirm_if(self, yes: bool | None, *, keys: tuple[str, ...]) -> None:
        if yes:
            self.command(partial(confirm, name=self.run_name, keys=keys))


def double_charge(cases: dict[Case, int]) -> Text:
    """The warning that sending again may run and charge twice, when some item would be sent again."""
    again = cases.get(Case.RESUBMIT, 0)
    if not again:
        return Text("")
    return Text(
        f"⚠ {plural(again, 'item')} would be SENT AGAIN: the first call may have run, "
        "so confirming may run and charge twice.",
        style="bold red",
    )


def ask_confirm(title: str, cases: dict[Case, int], plan: RerunPlan) -> AskScreen:
    """The question before a confirmation: its plan, then what each case does."""
    body = Text.assemble((f"{plan}\n", "bold"))
    for case, n in cases.items():
        body.append(f"{n:,} {case.value}: ", style="bold")
        body.append(f"{case.warning}\n", style="red" if case.may_charge_twice else "")
    body.rstrip()
    warning = double_charge(cases).plain.lstrip("⚠ ") or None
    return AskScreen(title, body, warning=warning)


def confirm(store: Store, now: float, *, name: str, keys: Sequence[str]) -> str:
    released = recovery.confirm(store, name, now=now, keys=keys)
    parts = [f"{n} to poll" for c, n in released.items() if c is Case.POLL and n]
    parts += [f"{n} to look for" for c, n in released.items() if c is Case.ADOPT and n]
    parts += [f"{n} sent again" for c, n in released.items() if c is Case.RESUBMIT and n]
    total = sum(released.values())
    text = f"released {plural(total, 'item')} of {name}" + (f": {', '.join(parts)}" if parts else "")
    return text + (unless_obeyed(store, name, now, does="goes on") if total else "")


def _plan(store: Store, now: float, *, name: str, keys: Sequence[str]) -> RerunPlan:
    return rerun_plans.confirm_plan(store, name, keys=keys)


def _held(store: Store, now: float, *, name: str) -> HeldView:
    return views.held_view(store, name, now=now)
