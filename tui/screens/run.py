"""One run: its counts as a bar, its workers when several, its counts by group, the breaker, batches in flight, the
event log, and its controls."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import Header, Static

from runner import control
from runner.breaker import Control
from runner.store import Store, views
from runner.model import ItemState
from runner.store.answers import RunView, Standing
from runner.words import plural

from ..commands import FirstBudget
from ..run_panel import RunPanel
from ..widgets import BatchTable, EventLog, GroupTable, KeysFooter, StageTable, StateBar, WorkerTable
from . import revalidation
from .base import Read, StoreScreen, unless_obeyed
from .confirmations import ConfirmationsScreen
from .decisions import DecisionsScreen
from .budget import BudgetScreen, Limits
from .dialog import AskScreen
from .failures import FailuresScreen
from .scheduled import ScheduledScreen


#: Lines below which a pipeline's run screen shows its stage rows or its group rows, not both (``v`` switches):
#: at 80x24 both left the groups three lines.
TALL = 36


class RunScreen(StoreScreen[RunView]):
    """Where a person sits during a long run. The keys write commands that the run's engine obeys."""

    COMMANDS = StoreScreen.COMMANDS | {FirstBudget}
    #: esc and q first: at 80 columns the keys that find no room are the last, and the palette has every one.
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Runs", tooltip="Back to every run in the store"),
        Binding("q", "app.quit", "Quit", tooltip="Quit runner tui; the runs' engines go on"),
        Binding("p", "pause", "Pause", tooltip="Pause the run: no new batches; those in flight finish"),
        Binding("r", "resume", "Resume", tooltip="Resume: one batch at a time until one succeeds, then full speed"),
        Binding("s", "step", "Step", tooltip="Step: exactly one more batch while paused or open; stays paused"),
        Binding("c", "confirmations", "Confirm", tooltip="Items held after a crash: what confirming does, and do it"),
        Binding("d", "decisions", "Decide", tooltip="Items waiting at a decide stage: approve, reject or edit, one at a time"),
        Binding("b", "budget", "Budget", tooltip="A new budget: the run stopped at its budget goes on once raised"),
        Binding("f", "failures", "Failures", tooltip="Failed items by kind, an item's detail, and retry"),
        Binding("w", "scheduled", "Scheduled", tooltip="Items waiting for their scheduled time, the earliest first"),
        Binding("v", "switch_rows", "Rows",
                tooltip="A short screen shows a pipeline's stages or its groups, not both: switch between them"),
        Binding("k", "revalidate", "Revalidate",
                tooltip="Check saved outputs against the output schema again, with no call (shows the plan, asks)"),
        Binding("x", "cancel_run", "Cancel run", show=False,  # rarely used: in the command palette
                tooltip="Cancel the run: its unfinished items fail as cancelled; batches in flight finish (asks first)"),
    ]

    def __init__(self, run: str) -> None:
        super().__init__()
        self.run_name = run
        #: What the screen shows now (None until the first read).
        self.view: RunView | None = None
        #: A person chose the groups over the stages on a short screen (``v``).
        self.by_group = False

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical(id="summary"):
            yield RunPanel(id="run-panel")
            yield StateBar(id="bar")
            yield StageTable(id="stages")
        yield WorkerTable(id="workers")
        yield GroupTable(id="groups")
        yield Static("batches in flight", id="batches-title", classes="title")
        yield BatchTable(id="batches")
        yield Static("events, newest first", classes="title")
        yield EventLog(id="events")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.sub_title = self.run_name
        super().on_mount()

    def read(self) -> Read[RunView]:
        return partial(_view, name=self.run_name)

    def show(self, view: RunView) -> None:
        was = self.view.standing if self.view is not None else None
        if was is None or keyed(view.standing) != keyed(was):
            self.refresh_bindings()
        self.view = view
        self.query_one(RunPanel).show(view)
        self.query_one(StateBar).show(view.standing.counts)
        staged = len(view.standing.stages) > 1
        if staged:
            self.query_one(StageTable).show(view.standing.tallies)
        self.arrange_rows()
        self.query_one(GroupTable).show(view.standing.groups)
        self.show_workers(view.standing)
        self.query_one(BatchTable).show(view.batches, staged=staged)
        self.query_one(EventLog).show(view.log)
        self.query_one("#batches-title", Static).update(batches_title(view))

    def show_workers(self, run: Standing) -> None:
        """The workers and what each holds, when several work the run (one is said in the panel's engine line)."""
        workers = self.query_one(WorkerTable)
        workers.display = len(run.workers) > 1
        if workers.display:
            workers.show(run.workers)

    @property
    def staged(self) -> bool:
        return self.view is not None and len(self.view.standing.stages) > 1

    @property
    def short(self) -> bool:
        """Too short for a pipeline's stage rows and its group rows both (:data:`TALL`)."""
        return self.size.height < TALL

    def on_resize(self) -> None:
        self.arrange_rows()
        self.refresh_bindings()  # v is in the footer only on a short screen

    def arrange_rows(self) -> None:
        """A pipeline's stage rows and group rows both, or on a short screen the one a person chose (stages first)."""
        both = not self.staged or not self.short
        self.query_one(StageTable).display = self.staged and (both or not self.by_group)
        self.query_one(GroupTable).display = both or self.by_group

    def action_switch_rows(self) -> None:
        self.by_group = not self.by_group
        self.arrange_rows()

    def action_pause(self) -> None:
        self.command(partial(_pause, name=self.run_name))

    def action_resume(self) -> None:
        self.command(partial(_resume, name=self.run_name))

    def action_step(self) -> None:
        self.command(partial(_step, name=self.run_name))

    def action_confirmations(self) -> None:
        self.app.push_screen(ConfirmationsScreen(self.run_name))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in SHOWN_WHILE:
            return self.view is not None and SHOWN_WHILE[action](self.view.standing)
        if action == "switch_rows":
            return self.staged and self.short
        return True

    def action_decisions(self) -> None:
        self.app.push_screen(DecisionsScreen(self.run_name))

    def action_scheduled(self) -> None:
        self.app.push_screen(ScheduledScreen(self.run_name))

    def action_failures(self) -> None:
        self.app.push_screen(FailuresScreen(self.run_name))

    def action_budget(self) -> None:
        if self.view is not None:
            self.app.push_screen(BudgetScreen(self.run_name, self.view.standing.budget), self._budget_if)

    def _budget_if(self, limits: Limits | None) -> None:
        if limits is not None:
            self.command(partial(_budget, name=self.run_name, limits=limits))

    def action_cancel_run(self) -> None:
        if self.view is not None:
            self.app.push_screen(ask_cancel(self.view), self._cancel_if)

    def _cancel_if(self, yes: bool | None) -> None:
        if yes:
            self.command(partial(_cancel, name=self.run_name))

    def action_revalidate(self) -> None:
        self.ask_about(partial(revalidation.read, name=self.run_name),
                       partial(revalidation.ask_revalidate, self.run_name), self._revalidate_if)

    def _revalidate_if(self, shown: revalidation.Shown, yes: bool | None) -> None:
        if yes:
            self.command(partial(revalidation.revalidate, name=self.run_name, revalidation=shown[0]))

    def action_back(self) -> None:
        self.runner.show_runs()


#: The actions whose key the footer shows only while the run's standing says so: c while items are held, d while
#: some wait for a decision, w while some are scheduled, b with a budget (at 80 columns no room for one more key:
#: FirstBudget gives a run its first).
SHOWN_WHILE: dict[str, Callable[[Standing], bool]] = {
    "confirmations": lambda run: bool(run.held),
    "decisions": lambda run: bool(run.needs_decision),
    "scheduled": lambda run: bool(run.scheduled),
    "budget": lambda run: run.budget.budget.limited,
}


def keyed(run: Standing) -> tuple[bool, ...]:
    """What the footer's keys hang on (:data:`SHOWN_WHILE`)."""
    return tuple(shown(run) for shown in SHOWN_WHILE.values())


def ask_cancel(view: RunView) -> AskScreen:
    """The question before a run is cancelled: how many items fail, and that the batches in flight finish."""
    run = view.standing
    in_flight = run.counts[ItemState.RUNNING] + run.counts[ItemState.RECEIVED] - run.held
    body = Text(f"{plural(run.unfinished, 'unfinished item')} will fail as cancelled and nothing more is sent "
                "for them. ")
    sent = sum(batch.state == "running" for batch in view.batches)
    if in_flight and run.engine_alive:
        body.append(f"{plural(sent, 'batch', 'batches')} in flight ({plural(in_flight, 'item')}) "
                    "finish first: their answers are saved and paid for, and an item they complete stays completed. ")
    body.append("runner retry --kind cancelled sends them again.")
    return AskScreen(f"Cancel run {run.name}?", body, yes="Cancel run")


def batches_title(view: RunView) -> Text:
    """How many batches are in flight, of how many slots, and what holds the others back."""
    title = Text.assemble(("batches in flight ", "bold"), f"{view.in_flight} of {plural(view.concurrency, 'slot')}")
    if view.slots != view.concurrency:
        control = view.standing.control
        why = "paused" if control.paused else f"breaker {control.breaker.value}"
        title.append(f" ({why}: {view.slots} at a time)" if view.slots else f" ({why}: none may start)", style="yellow")
    return title


def _view(store: Store, now: float, *, name: str) -> RunView:
    return views.run_view(store, name, now=now)


def _pause(store: Store, now: float, *, name: str) -> str:
    done = control.pause(store, name, now=now)
    return f"paused {name}: no new batches; those in flight finish" + _after(store, name, done, now)


def _resume(store: Store, now: float, *, name: str) -> str:
    done = control.resume(store, name, now=now)
    return f"resumed {name}: one batch at a time until one succeeds" + _after(store, name, done, now)


def _step(store: Store, now: float, *, name: str) -> str:
    done = control.step(store, name, now=now)
    return f"one more batch of {name} may run, then it stays held" + _after(store, name, done, now)


def _budget(store: Store, now: float, *, name: str, limits: Limits) -> str:
    _, after = control.budget(store, name, now=now, max_cost=limits[0], max_tokens=limits[1])
    shown = views.standing(store, name, now=now).budget.given()
    return f"{name}: {shown}" + _after(store, name, after, now)


def _cancel(store: Store, now: float, *, name: str) -> str:
    done = control.cancel(store, name, now=now)
    finishing = f"; {plural(done.finishing, 'item')} when their batch in flight ends" if done.finishing else ""
    return f"cancelled {name}: {plural(done.failed, 'item')} failed as cancelled{finishing}"


def _after(store: Store, name: str, done: Control, now: float) -> str:
    """The run's controls after a command, and who will obey it."""
    steps = f", {plural(done.steps, 'step')} allowed" if done.steps else ""
    text = f" (breaker {done.breaker.value}{', paused' if done.paused else ''}{steps})"
    return text + unless_obeyed(store, name, now, does="obeys it", the_next="the next ")
