"""The items waiting at a decide stage, one at a time: its input and state so far; approve, reject, or edit the data.

``a`` approves the item shown with its data (``{}`` until edited: it is
saved as the stage's result), ``x`` rejects it, ``e`` edits the data as JSON
(refused, with why, unless it is a JSON object), ``n`` and ``p`` move to the
next and previous item. Each decision is a command written to the store
(:func:`runner.deciding.decide`) by a worker; the next read shows the next item.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import partial
from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Footer, Header, Static, TextArea

from runner import deciding
from runner.store import Store, views
from runner.store.answers import Decision, DecisionsView
from runner.words import plural

from .base import Read, StoreScreen, unless_obeyed


class DecisionsScreen(StoreScreen[DecisionsView]):
    """A run's items waiting for a person's decision, one at a time."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("a", "decide(True)", "Approve", tooltip="Approve: the data is saved as the stage's result; it goes on"),
        Binding("x", "decide(False)", "Reject", tooltip="Reject: the item fails (kind rejected)"),
        Binding("e", "edit", "Edit data", tooltip="Edit the data an approval saves, as a JSON object"),
        Binding("n", "move(1)", "Next"),
        Binding("p", "move(-1)", "Previous"),
        Binding("escape", "app.pop_screen", "Back"),
    ]

    def __init__(self, run: str) -> None:
        super().__init__()
        self.run_name = run
        self.view: DecisionsView | None = None
        #: The key of the item shown, and the data each item's approval saves (edited), by key.
        self.key: str | None = None
        self.data: dict[str, dict[str, Any]] = {}

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="decide-title", classes="title")
        with VerticalScroll(id="decide-item"):
            yield Static(id="decide-head")
            yield Static(id="decide-state")
            yield Static(id="decide-data")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.sub_title = f"{self.run_name}: decisions"
        super().on_mount()

    def read(self) -> Read[DecisionsView]:
        return partial(_decisions, name=self.run_name)

    @property
    def item(self) -> Decision | None:
        """The item shown: the one shown before while it still waits, else the first."""
        items = self.view.items if self.view is not None else ()
        return next((i for i in items if i.key == self.key), items[0] if items else None)

    def show(self, view: DecisionsView) -> None:
        self.view = view
        item = self.item
        self.key = item.key if item is not None else None
        title = (f"{plural(view.waiting, 'item')} of {self.run_name} "
                 f"{'waits' if view.waiting == 1 else 'wait'} for your decision") if view.waiting else (
            f"Nothing of {self.run_name} waits for a decision")
        self.query_one("#decide-title", Static).update(Text(title, style="bold"))
        self.query_one("#decide-head", Static).update(head(item, view) if item is not None else "")
        self.query_one("#decide-state", Static).update(state(item) if item is not None else "")
        self.query_one("#decide-data", Static).update(
            Text(f"approving saves: {json.dumps(self.data.get(item.key, {}), ensure_ascii=False)}", style="bold")
            if item is not None else "")

    def action_move(self, by: int) -> None:
        if self.view is None or not self.view.items:
            return
        keys = [i.key for i in self.view.items]
        at = keys.index(self.key) if self.key in keys else 0
        self.key = keys[(at + by) % len(keys)]
        self.show(self.view)

    def action_decide(self, approve: bool) -> None:
        item = self.item
        if item is None:
            self.notify(f"nothing of {self.run_name} waits for a decision", title="runner")
            return
        self.command(partial(decide, name=self.run_name, key=item.key, approve=approve,
                             data=self.data.get(item.key, {})))

    def action_edit(self) -> None:
        item = self.item
        if item is not None:
            self.app.push_screen(DataScreen(item.key, self.data.get(item.key, {})), partial(self._edited, key=item.key))

    def _edited(self, data: dict[str, Any] | None, *, key: str) -> None:
        if data is not None:
            self.data[key] = data
            if self.view is not None:
                self.show(self.view)


class DataScreen(ModalScreen[dict[str, Any] | None]):
    """The data an approval saves, edited as JSON; saved only when it is a JSON object."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "save", "Save"),
        Binding("escape", "dismiss(None)", "Cancel"),
    ]

    def __init__(self, key: str, data: dict[str, Any]) -> None:
        super().__init__()
        self.key = key
        self.text = json.dumps(data, indent=2, ensure_ascii=False)

    def compose(self) -> ComposeResult:
        with Vertical(id="edit"):
            yield Static(Text(f"The data approving {self.key} saves (a JSON object)", style="bold"), id="edit-title")
            yield TextArea(self.text, language="json", id="edit-data")
            yield Static(id="edit-error")
            with Horizontal(id="edit-buttons"):
                yield Button("Save (ctrl+s)", id="save", variant="primary")
                yield Button("Cancel (esc)", id="cancel")

    def on_mount(self) -> None:
        self.query_one(TextArea).focus()

    @on(Button.Pressed, "#save")
    def action_save(self) -> None:
        try:
            data = deciding.parse_data(self.query_one(TextArea).text)
        except ValueError as exc:
            self.query_one("#edit-error", Static).update(Text(f"not saved: {exc}", style="bold red"))
            return
        self.dismiss(data)

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.dismiss(None)


def head(item: Decision, view: DecisionsView) -> Text:
    at = [i.key for i in view.items].index(item.key) + 1
    return Text.assemble((item.key, "bold"), f"  group {item.group}  at stage ", (item.stage, "bold yellow"),
                         f"  ({at} of {view.waiting:,}; n next, p previous)")


def state(item: Decision) -> Text:
    """Its input, then each passed stage's result: the state so far, a field a line."""
    text = Text("input\n", style="bold")
    text.append_text(fields(item.input))
    for stage, result in item.results.items():
        text.append(f"{stage}\n", style="bold")
        text.append_text(fields(result) if isinstance(result, Mapping) else Text(pretty(result) + "\n"))
    return text


def fields(value: Mapping[str, Any]) -> Text:
    """A JSON object to read, a field a line: a text as written (its line breaks kept, no quotes, no escapes, its
    later lines under its first), any other value as indented JSON."""
    text = Text()
    for name, field in value.items():
        text.append(f"  {name}: ", style="bold")
        text.append(pretty(field).replace("\n", "\n" + " " * (len(name) + 4)) + "\n")
    return text


def pretty(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)


def decide(store: Store, now: float, *, name: str, key: str, approve: bool, data: dict[str, Any]) -> str:
    done = deciding.decide(store, name, [key], approve=approve, data=data, now=now)
    if done.rejected:
        return f"{key} rejected (failed, kind rejected)"
    return f"{key} approved" + unless_obeyed(store, name, now, does="sends it on")


def _decisions(store: Store, now: float, *, name: str) -> DecisionsView:
    return views.decisions_view(store, name)
