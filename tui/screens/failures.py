"""Failed items: by kind with counts, the items of a kind, one item in full; retry a kind or an item."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import ClassVar

from rich.json import JSON
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widgets import DataTable, Footer, Header, Static

from runner import control
from runner.rules.rerun_plan import RerunPlan
from runner.store import Store, rerun_plans, views
from runner.store.answers import FailedItem, FailuresView, HistoryLine, ItemView, KindCount
from runner.words import plural, retried

from .. import format
from ..widgets import Table
from .base import Read, StoreScreen, unless_obeyed
from .dialog import AskScreen

RETRY_COST = (
    "Each goes back to pending with a fresh attempt budget and is sent again by the engine. "
    "An item the upstream already answered costs a paid call each time."
)
#: What a retry in a pipeline keeps.
AT_ITS_STAGE = " Each is sent again at the stage where it failed; the results of the stages before it are kept."


class KindTable(Table):
    """Failed items by kind; ``t`` retries the kind under the cursor."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("t", "retry", "Retry kind", tooltip="Retry every failed item of this kind (asks first)")]

    class Retry(Message):
        """A person asked to retry the failed items of one kind."""

        def __init__(self, kind: str, count: int) -> None:
            super().__init__()
            self.kind = kind
            self.count = count

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._counts: dict[str, int] = {}

    COLUMNS = ("kind", "items", "retryable", "first message")
    WRAP = "first message"
    CURSOR = "row"

    def show(self, kinds: Sequence[KindCount]) -> None:
        self.fill(kinds, [
            (k.kind, [Text(k.kind, style="bold red"), Text(f"{k.count:,}", justify="right"),
                      Text(f"{k.retryable:,}", justify="right"), k.example])
            for k in kinds
        ])
        self._counts = {k.kind: k.count for k in kinds}

    def action_retry(self) -> None:
        kind = self.cursor_key
        if kind is not None:
            self.post_message(self.Retry(kind, self._counts.get(kind, 0)))


class FailedTable(Table):
    """The failed items of one kind; Enter shows one in full, ``t`` retries it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select_cursor", "Item detail", tooltip="The item's input, output, error and history"),
        Binding("t", "retry", "Retry item", tooltip="Retry the failed item under the cursor (asks first)"),
    ]

    class Retry(Message):
        """A person asked to retry one failed item."""

        def __init__(self, item: FailedItem) -> None:
            super().__init__()
            self.item = item

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._items: dict[str, FailedItem] = {}

    COLUMNS = ("key", "group", "attempts", "paid calls", "maybe paid", "retryable", "message")
    WRAP = "message"
    CURSOR = "row"

    def label(self, column: str) -> Text:
        """Labels on two lines, so that at 80 columns the message keeps room for its longest words."""
        return Text("can\nretry" if column == "retryable" else column.replace(" ", "\n"))

    def show(self, items: Sequence[FailedItem], *, staged: bool = False) -> None:
        """The items, each message led by the stage it failed at in a pipeline (``staged``)."""
        self._items = {item.key: item for item in items}
        self.fill(items, [
            (i.key, [i.key, i.group, Text(str(i.attempts), justify="right"), Text(str(i.paid_calls), justify="right"),
                     Text(format.count(i.maybe_paid), justify="right"), "yes" if i.retryable else "no",
                     f"at {i.stage}: {i.message}" if staged else i.message])
            for i in items
        ])

    def action_retry(self) -> None:
        key = self.cursor_key
        if key is not None:
            self.post_message(self.Retry(self._items[key]))


class FailuresScreen(StoreScreen[FailuresView]):
    """A run's failed items by kind; the items of the kind under the cursor below."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "app.pop_screen", "Back")]

    def __init__(self, run: str) -> None:
        super().__init__()
        self.run_name = run
        self.kind: str | None = None
        #: What the screen shows now (None until the first read).
        self.view: FailuresView | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="failures-title", classes="title")
        yield KindTable(id="kinds")
        yield Static(id="items-title", classes="title")
        yield FailedTable(id="failed")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.sub_title = f"{self.run_name}: failures"
        self.query_one(FailedTable).focus()  # where Enter opens an item; Tab goes to the kinds
        super().on_mount()

    def read(self) -> Read[FailuresView]:
        return partial(_failures, name=self.run_name, kind=self.kind)

    def show(self, view: FailuresView) -> None:
        self.view = view
        self.kind = view.kind
        total = sum(k.count for k in view.kinds)
        self.query_one("#failures-title", Static).update(
            Text.assemble((plural(total, "failed item"), "bold"), f" of {self.run_name}, by kind") if total
            else Text(f"No failed items in {self.run_name}", style="bold")
        )
        self.query_one(KindTable).show(view.kinds)
        shown = f"first {len(view.items)} " if len(view.items) == 200 else ""
        self.query_one("#items-title", Static).update(
            Text.assemble((f"{shown}items of kind {view.kind}", "bold"), " · Enter: detail · t: retry")
            if view.kind else ""
        )
        self.query_one(FailedTable).show(view.items, staged=view.staged)

    @on(DataTable.RowHighlighted, "#kinds")
    def _kind_chosen(self, event: DataTable.RowHighlighted) -> None:
        kind = event.row_key.value
        if kind is not None and kind != self.kind:
            self.kind = str(kind)
            self.reload()

    @on(DataTable.RowSelected, "#kinds")
    def _kind_entered(self) -> None:
        self.query_one(FailedTable).focus()

    @on(DataTable.RowSelected, "#failed")
    def _item_chosen(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.app.push_screen(ItemScreen(self.run_name, str(event.row_key.value)))

    @on(KindTable.Retry)
    def _retry_kind(self, message: KindTable.Retry) -> None:
        staged = self.view is not None and self.view.staged
        title = f"Retry {plural(message.count, 'failed item')} of kind {message.kind}?"
        self.ask(partial(_plan, name=self.run_name, kind=message.kind, keys=()),
                 lambda plan: ask_retry(title, plan, RETRY_COST + (AT_ITS_STAGE if staged else "")),
                 partial(self._retry_if, kind=message.kind, keys=()))

    @on(FailedTable.Retry)
    def _retry_item(self, message: FailedTable.Retry) -> None:
        item, staged = message.item, self.view is not None and self.view.staged
        self.ask(partial(_plan, name=self.run_name, kind=None, keys=(item.key,)),
                 partial(ask_retry_item, item.key, item.paid_calls, item.maybe_paid, stage=item.stage if staged else ""),
                 partial(self._retry_if, kind=None, keys=(item.key,)))

    def _retry_if(self, yes: bool | None, *, kind: str | None, keys: tuple[str, ...]) -> None:
        if yes:
            self.command(partial(retry, name=self.run_name, kind=kind, keys=keys))


class ItemScreen(StoreScreen[ItemView]):
    """One item in full: input, raw output, error, attempts, paid calls and its whole history."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("t", "retry", "Retry item", tooltip="Send this failed item again (asks first)"),
        Binding("escape", "app.pop_screen", "Back"),
    ]

    def __init__(self, run: str, key: str) -> None:
        super().__init__()
        self.run_name = run
        self.item_key = key
        self.view: ItemView | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll(id="item"):
            yield Static(id="item-head")
            yield Static("input", classes="title")
            yield Static(id="item-input", classes="box")
            yield Static("raw output", classes="title")
            yield Static(id="item-output", classes="box")
            yield Static("results by stage", id="item-results-title", classes="title")
            yield Static(id="item-results", classes="box")
            yield Static("history (events)", classes="title")
            yield HistoryTable(id="history")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.sub_title = f"{self.run_name}: item {self.item_key}"
        super().on_mount()

    def read(self) -> Read[ItemView]:
        return partial(_item, name=self.run_name, key=self.item_key)

    def show(self, view: ItemView) -> None:
        self.view = view
        self.query_one("#item-head", Static).update(item_head(view))
        self.query_one("#item-input", Static).update(_json(view.input))
        self.query_one("#item-output", Static).update(
            _json(view.output) if view.output is not None else Text("no output saved", style="italic")
        )
        for part in ("#item-results-title", "#item-results"):
            self.query_one(part).display = view.staged
        self.query_one("#item-results", Static).update(stage_results(view))
        self.query_one(HistoryTable).show(view.history)
        self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "retry":
            return self.view is not None and self.view.state == "failed"
        return True

    def action_retry(self) -> None:
        if self.view is not None:
            self.ask(partial(_plan, name=self.run_name, kind=None, keys=(self.item_key,)),
                     partial(ask_retry_item, self.view.key, self.view.paid_calls, self.view.maybe_paid), self._retry_if)

    def _retry_if(self, yes: bool | None) -> None:
        if yes:
            self.command(partial(retry, name=self.run_name, kind=None, keys=(self.item_key,)))


class HistoryTable(Table):
    """An item's state changes and its batches' moves, oldest first, in the run's event format: ago, what, detail."""

    COLUMNS = ("ago", "what", "detail")
    WRAP = "detail"

    def show(self, history: Sequence[HistoryLine]) -> None:
        self.fill(history, [
            (str(i), [Text(format.duration(h.age), justify="right"),
                      Text.assemble(f"batch {h.batch_id}: " if h.batch_id else "", h.from_state or "new", " → ",
                                    format.state(h.to_state)), _why(h)])
            for i, h in enumerate(history)
        ])


def _why(line: HistoryLine) -> str:
    if line.batch_items is not None:
        return f"the batch's move: {plural(line.batch_items, 'item')}"
    if line.stage_note:
        return line.stage_note
    return f"{line.kind}: {line.message}" if line.kind else (line.message or "")


def stage_results(view: ItemView) -> Text:
    """A pipeline's item: each stage's result it has, under the stage's name, in the order they were saved."""
    if not view.results:
        return Text("no stage has a result for it yet", style="italic")
    parts = [Text.assemble((stage, "bold"), "\n", _json(result)) for stage, result in view.results.items()]
    return Text("\n").join(parts)


def item_head(view: ItemView) -> Text:
    stage = f"stage {view.stage}  " if view.staged else ""
    text = Text.assemble((view.key, "bold"), f"  group {view.group}  {stage}", format.state(view.state))
    if view.held:
        text.append("  held: awaits a person's confirmation", style="bold yellow")
    if view.waits:
        text.append(f"  {view.waits}", style="yellow")
    text.append(f"\nattempts {view.attempts} · paid calls {view.paid_calls}")
    text.append(f" · maybe paid {view.maybe_paid}", style="yellow" if view.maybe_paid else "")
    if view.retryable is not None:
        text.append(f" · retryable: {'yes' if view.retryable else 'no'}")
    if view.kind or view.message:
        text.append("\nerror ", style="bold")
        text.append(f"{view.kind}: " if view.kind else "", style="bold red")
        text.append(view.message or "")
    return text


def ask_retry(title: str, plan: RerunPlan, about: str) -> AskScreen:
    """The question before a retry: its plan first, then what a retry does."""
    body = Text.assemble((f"{plan}\n", "bold"), about)
    warning = f"{plural(plan.may_repeat.items, 'item')} may be billed again" if plan.may_repeat.items else None
    return AskScreen(title, body, warning=warning, yes="Retry")


def ask_retry_item(key: str, paid: int, maybe_paid: int, plan: RerunPlan, *, stage: str = "") -> AskScreen:
    """The question before one item's retry: its plan, what it cost, and (``stage``: in a pipeline) where it is
    sent."""
    spent = f" This one has cost {plural(paid, 'paid call')}" + (
        f" and maybe {maybe_paid} more." if maybe_paid else " so far."
    )
    where = f" It is sent again at stage {stage}; the results of the stages before it are kept." if stage else ""
    return ask_retry(f"Retry item {key}?", plan, RETRY_COST + spent + where)


def retry(store: Store, now: float, *, name: str, kind: str | None, keys: Sequence[str]) -> str:
    done = control.retry(store, name, now=now, kind=kind, keys=keys)
    obeyed = unless_obeyed(store, name, now, does="sends them") if done.pending else ""
    return retried(done, of=f" of {name}") + obeyed


def _json(text: str) -> Text:
    """An input or an output in full, wrapped at the box's width (a word longer than a line folds), never cut."""
    try:
        shown = JSON(text).text
    except ValueError:
        return Text(text, overflow="fold")
    shown.no_wrap, shown.overflow = False, "fold"
    return shown


def _plan(store: Store, now: float, *, name: str, kind: str | None, keys: Sequence[str]) -> RerunPlan:
    return rerun_plans.retry_plan(store, name, kind=kind, keys=keys)


def _failures(store: Store, now: float, *, name: str, kind: str | None) -> FailuresView:
    return views.failures_view(store, name, kind=kind)


def _item(store: Store, now: float, *, name: str, key: str) -> ItemView:
    return views.item_view(store, name, key, now=now)
