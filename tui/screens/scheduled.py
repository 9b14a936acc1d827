"""The items of a run waiting for their scheduled time, the earliest first; Enter shows one in full."""

from __future__ import annotations

from functools import partial
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Footer, Header, Static

from runner.store import Store, views
from runner.store.answers import ScheduledView
from runner.words import plural, scheduled_for

from ..widgets import Table
from .base import Read, StoreScreen
from .failures import ItemScreen


class ScheduledTable(Table):
    """The scheduled items, each with its time; Enter shows the one under the cursor."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "select_cursor", "Detail", tooltip="This item in full")]

    COLUMNS = ("key", "group", "when")
    CURSOR = "row"

    def show(self, view: ScheduledView) -> None:
        self.fill(view, [
            (i.key, [i.key, i.group, scheduled_for(i.at, now=view.read_at)])
            for i in view.items
        ])


class ScheduledScreen(StoreScreen[ScheduledView]):
    """A run's items that wait for a time: nothing is sent for them before it."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "app.pop_screen", "Back")]

    def __init__(self, run: str) -> None:
        super().__init__()
        self.run_name = run

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="scheduled-title", classes="title")
        yield ScheduledTable(id="scheduled")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.sub_title = f"{self.run_name}: scheduled"
        super().on_mount()

    def read(self) -> Read[ScheduledView]:
        return partial(_scheduled, name=self.run_name)

    def show(self, view: ScheduledView) -> None:
        shown = f", the first {len(view.items):,} shown" if len(view.items) < view.total else ""
        self.query_one("#scheduled-title", Static).update(Text.assemble(
            (f"{plural(view.total, 'item')} of {self.run_name} scheduled, the earliest first{shown}", "bold")
            if view.total else (f"Nothing of {self.run_name} is scheduled", "bold"),
            " · nothing is sent for an item before its time · Enter: detail" if view.total else "",
        ))
        self.query_one(ScheduledTable).show(view)

    @on(DataTable.RowSelected, "#scheduled")
    def _item_chosen(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.app.push_screen(ItemScreen(self.run_name, str(event.row_key.value)))


def _scheduled(store: Store, now: float, *, name: str) -> ScheduledView:
    return views.scheduled_view(store, name, now=now)
