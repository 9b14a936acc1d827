"""Every run in the store: totals, state and last activity; Enter opens one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Footer, Header, Static

from runner.location import named
from runner.store import Store, views
from runner.store.answers import RunState, Standing

from .. import format
from ..widgets import Table
from .base import Read, StoreScreen

Runs = tuple[Standing, ...]


class RunsTable(Table):
    """One row per run; its state says whether an engine works on it or waits, and if not how the last one ended."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "select_cursor", "Open run", tooltip="Open the run under the cursor")]

    COLUMNS = ("run", "state", "items", "completed", "failed", "to do", "held", "breaker", "last change")
    CURSOR = "row"

    def show(self, runs: Sequence[Standing]) -> None:
        self.fill(runs, [(run.name, _cells(run)) for run in runs])


def _cells(run: Standing) -> list[str | Text]:
    def right(n: int, style: str = "") -> Text:
        return Text(format.count(n), style=style, justify="right")

    return [
        Text(run.name, style="bold"),
        _state(run),
        right(run.total),
        right(run.counts["completed"], "green"),
        right(run.counts["failed"], "red"),
        right(run.unfinished),
        right(run.held, "bold yellow"),
        _breaker(run),
        Text(format.ago(run.idle_for), justify="right"),
    ]


def _breaker(run: Standing) -> Text:
    """The run's breaker (the worse of its own and its shared queue's) and, beneath, the queue it shares, if any."""
    text = Text(run.control.breaker.value, style=format.BREAKER_STYLE[run.control.breaker])
    if run.queue is not None:
        text.append(f"\nqueue {run.queue.name}", style="magenta")
    return text


def _state(run: Standing) -> Text:
    """The run's state; a run held for a person says beneath whether its engine waits (obeys ``r`` at once) or
    there is none (``runner run`` goes on)."""
    text = Text.assemble((run.state.value, format.RUN_STATE_STYLE[run.state]))
    if run.state in (RunState.PAUSED, RunState.NEEDS_PERSON):
        text.append("\n")
        text.append("engine waits" if run.engine_alive else "no engine", style="green" if run.engine_alive else "dim")
    return text


class RunsScreen(StoreScreen[Runs]):
    """The store's runs; Enter (or a click on a chosen row) opens one."""

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(f"Runs in {named(self.runner.db)}", id="runs-title")
        yield RunsTable(id="runs")
        yield Static("", id="runs-empty")
        yield Footer(compact=True)

    def read(self) -> Read[Runs]:
        return _overview

    def __init__(self) -> None:
        super().__init__()
        #: What the screen shows now (None until the first read).
        self.runs: Runs | None = None

    def show(self, runs: Runs) -> None:
        self.runs = runs
        self.query_one(RunsTable).show(runs)
        empty = "" if runs else "No runs yet: `runner run JOB.toml` (or `runner demo`) starts one."
        self.query_one("#runs-empty", Static).update(empty)

    @on(DataTable.RowSelected, "#runs")
    def _selected(self, event: DataTable.RowSelected) -> None:
        self.runner.open_run(str(event.row_key.value))


def _overview(store: Store, now: float) -> Runs:
    return views.runs_overview(store, now=now)
