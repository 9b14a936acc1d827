"""The notebook panel: one run's counts, groups, breaker, failures, confirmations and decisions, live, in ipywidgets.

The panel is a view over the run store. It reads only through
:mod:`runner.store.views` (where the run stands, its failures, an item, what is
held), on a read-only connection (so it shows a store it cannot write, and
never waits for a writer), draws what it read with :mod:`runner.panel_html`,
and writes only through :mod:`runner.control` and :mod:`runner.recovery`, on a
connection opened for each command, so it shows and steers a run whether its
engine lives in this kernel, another kernel or a CLI process.
Refreshing never calls upstream: a periodic task on the kernel's running loop
(every ``interval`` seconds) runs cheap reads and sets widget traits, which
ipywidgets only sends when a value changed.

This module (with its decisions tab, :mod:`runner.widgets_decisions`, its budget field,
:mod:`runner.widgets_budget`, and the step that shows a retry's, a confirmation's or a revalidation's plan
first, :mod:`runner.widgets_plan`) is the only one of ``runner`` that imports ipywidgets; nothing in the
core imports it (:meth:`runner.notebook.Run.panel` does, when asked).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

import ipywidgets as widgets

from . import control, recovery
from .errors import RunnerError
from .jobs import Job
from .location import StoreLocation, located, named
from .panel_html import (
    COLOURS, breaker_html, cost_html, error, groups_table, held_html, item_html, stacked_bar, title_html, where,
)
from .store import Store, rerun_plans, views
from .store.answers import STATES, FailuresView, Standing
from .widgets_budget import BudgetField
from .widgets_decisions import DecisionsTab
from .widgets_plan import PlanStep, Revalidate, button as _button
from .words import plural, retried

log = logging.getLogger(__name__)


class RunPanel:
    """A live panel over one run of a store: ``RunPanel("runs.db", "posts")``, shown by the notebook.

    ``refresh()`` reads the store once; with a running event loop (a
    kernel's) the panel refreshes itself every ``interval`` seconds until
    :meth:`close`. ``now`` gives the time for liveness and for commands.
    """

    def __init__(
        self,
        db: str | Path,
        name: str,
        *,
        interval: float = 0.5,
        now: Callable[[], float] = time.time,
        live: bool = True,
        job: Job | None = None,
    ) -> None:
        self.db = located(db)
        self.name = name
        #: What Revalidate checks against (a notebook run's job); None: the job the run was last given.
        self.job = job
        self.interval = interval
        self._now = now
        self._store: Store | None = None
        self._task: asyncio.Task[None] | None = None
        #: The status last read (the status contract), for whoever wants the numbers shown.
        self.status: dict[str, Any] | None = None
        self._held, self._twice = 0, False
        #: The failures are being shown: the kind and item lists change, not by a person's choice.
        self._showing = False
        self._build()
        self.refresh()
        if live:
            self.start()

    # The widgets ---------------------------------------------------------------

    def _build(self) -> None:
        self.title, self.bar = widgets.HTML(), widgets.HTML()
        self.numbers = {
            state: widgets.HTML(
                value="0", description=state,
                style={"description_width": "initial", "font_size": "15px", "text_color": COLOURS[state]},
                layout=widgets.Layout(margin="0 18px 0 0"),
            )
            for state in STATES
        }
        self.stages = widgets.HTML()  # a pipeline's items by stage and state, under the run's totals
        self.cost = widgets.HTML()  # spent, unknown, in flight, tokens, the budget beside them (issue 18)
        self.budget = BudgetField(self._command)
        self.breaker = widgets.HTML()
        self.pause_button = _button("Pause", "pause", "no new batches; those in flight finish", self._pause)
        self.resume_button = _button("Resume", "play", "one batch at a time until one succeeds", self._resume)
        self.step_button = _button("Step", "step-forward", "exactly one more batch, then held again", self._step)
        self.cancel_button = _button("Cancel run", "stop", "unfinished items fail as cancelled; batches in flight "
                                     "finish (asks: click twice)", self._cancel_run)
        self.cancel_button.button_style = "danger"
        #: The unfinished items the last refresh counted: a cancel's first click asks about them.
        self._unfinished = 0
        self._cancel_asked = False
        self.message = widgets.HTML()
        self.plan = PlanStep(self.message)  # a re-run's plan (retry, confirm, revalidate), with Go and Cancel
        self.revalidate = Revalidate(self.name, self.plan, self._open, self._command, self.job)
        self.groups = widgets.HTML()
        self.kinds = widgets.Dropdown(description="kind", options=[], layout=widgets.Layout(width="320px"))
        self.retry_button = _button("Retry this kind", "redo", "failed items of this kind back to pending", self._retry)
        self.failed = widgets.Select(options=[], rows=10, layout=widgets.Layout(width="360px"))
        self.detail = widgets.HTML(layout=widgets.Layout(width="100%"))
        self.held = widgets.HTML()
        self.acknowledge = widgets.Checkbox(
            description="I accept that these items may be charged twice", indent=False,
            layout=widgets.Layout(width="auto"),
        )
        self.confirm_button = _button("Confirm", "check", "release the held items to the engine", self._confirm)
        self.confirm_button.button_style = "warning"
        self.kinds.observe(lambda _: self._kind_chosen(), names="value")
        self.failed.observe(lambda _: self._item_chosen(), names="value")
        self.acknowledge.observe(lambda _: self._enable_confirm(), names="value")
        failures = widgets.VBox([
            widgets.HBox([self.kinds, self.retry_button]),
            widgets.HBox([self.failed, self.detail]),
        ])
        confirmations = widgets.VBox([self.held, widgets.HBox([self.acknowledge, self.confirm_button])])
        self.decisions = DecisionsTab(self._command, self.message)
        self.tabs = widgets.Tab(children=[self.groups, failures, confirmations, self.decisions.widget])
        self.widget = widgets.VBox([
            self.title,
            self.bar,
            widgets.HBox(list(self.numbers.values()), layout=widgets.Layout(flex_flow="row wrap")),
            self.stages,
            widgets.HBox([self.cost, self.budget.widget], layout=widgets.Layout(align_items="center")),
            widgets.HBox(
                [self.breaker, self.pause_button, self.resume_button, self.step_button, self.revalidate.button,
                 self.cancel_button],
                layout=widgets.Layout(align_items="center"),
            ),
            self.message,
            self.plan.widget,
            self.tabs,
        ])

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)

    # Live ----------------------------------------------------------------------

    def start(self) -> bool:
        """Refresh every ``interval`` seconds on the running loop; False when there is none."""
        if self._task is not None and not self._task.done():
            return True
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False
        self._task = loop.create_task(self._poll(), name=f"runner panel {self.name}")
        self._task.add_done_callback(_report)
        return True

    def stop(self) -> None:
        """Stop refreshing by itself, showing the run as it stands now (``refresh()`` still works).

        The last refresh is sent whole from the caller: a notebook saved
        afterwards (``nbclient``, Jupyter's save) keeps the widgets' state as
        sent while a cell ran, and the periodic refreshes are sent on behalf of
        the cell that made the panel, so without this it would keep the run as
        it was when that cell ended.
        """
        self._cancel()
        self.refresh()
        for model in _models(self.widget):
            model.send_state()

    def _cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    def close(self) -> None:
        """Stop refreshing, close the store and the widgets."""
        self._cancel()
        if self._store is not None:
            self._store.close()
            self._store = None
        for widget in _tree(self.widget):
            widget.close()

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            self.refresh()

    # Reading the store -----------------------------------------------------------

    def refresh(self) -> None:
        """Read the run from the store once and show it."""
        try:
            store = self._open()
            if store is None or self.name not in store.run_names():
                self._show_waiting()
                return
            standing = views.standing(store, self.name, now=self._now())
            failures = views.failures_view(store, self.name, kind=self.kinds.value)
            held = tuple(views.held(store, self.name))
            decisions = views.decisions_view(store, self.name)
        except RunnerError as exc:
            self.title.value = f"<b>{escape(self.name)}</b> · {error(str(exc))}"
            return
        self.status = standing.status()
        self._show_counts(standing)
        self.cost.value = cost_html(standing.cost, standing.budget)
        self.budget.show(standing.budget)
        self._show_breaker(standing)
        self._show_failures(failures)
        self._show_held(held)
        self.decisions.show(decisions)
        failed, waiting = standing.counts["failed"], standing.held
        self.tabs.titles = ("By group", f"Failures ({failed})", f"Confirmations ({waiting})",
                            f"Decisions ({decisions.waiting})")

    def _open(self) -> Store | None:
        """The store, read-only; None while it does not exist yet (the run's first start makes it)."""
        if self._store is None and (not isinstance(self.db, Path) or self.db.exists()):
            self._store = Store(self.db, read_only=True)
        return self._store

    def _show_waiting(self) -> None:
        """A panel made before its run: it says so, neutrally, and fills in once the run starts."""
        self.title.value = (
            f"<b style='font-size:1.15em'>{escape(self.name)}</b> · "
            f"<span style='color:#555' title='{escape(where(self.db))}'>"
            f"{escape(f'no run {self.name!r} yet in {_short(self.db)}', quote=False)}</span>"
        )
        for button in (self.pause_button, self.resume_button, self.step_button, self.cancel_button):
            button.disabled = True

    def _show_counts(self, standing: Standing) -> None:
        counts, total = standing.counts, standing.total
        self.title.value = title_html(self.name, standing, self.db)
        for state in STATES:
            self.numbers[state].value = str(counts[state])
        self.bar.value = stacked_bar(counts, total)
        self._unfinished = standing.unfinished
        self.cancel_button.disabled = not standing.unfinished
        self.groups.value = groups_table(standing.groups)
        staged = len(standing.stages) > 1
        self.stages.value = groups_table(standing.stages, by="stage", passes=standing.passes) if staged else ""

    def _show_breaker(self, standing: Standing) -> None:
        """The breaker, a rate limit, a pause, the steps allowed, the items scheduled for later, the shared queue."""
        ctl = standing.control
        self.breaker.value = breaker_html(standing)
        self.pause_button.disabled = ctl.paused
        self.resume_button.disabled = not ctl.held
        self.step_button.disabled = not ctl.held

    def _show_failures(self, failures: FailuresView) -> None:
        """The kinds, the chosen kind's retry button and items, and the chosen item in full."""
        keys = [item.key for item in failures.items]
        key = self.failed.value if self.failed.value in keys else (keys[0] if keys else None)
        self._showing = True
        try:
            _choose(self.kinds, [(f"{k.kind} ({k.count})", k.kind) for k in failures.kinds], failures.kind)
            _choose(self.failed, [
                (f"{i.key} · {i.group} · {plural(i.attempts, 'attempt')} · {i.paid_calls} paid", i.key)
                for i in failures.items
            ], key)
        finally:
            self._showing = False
        count = next((k.count for k in failures.kinds if k.kind == failures.kind), 0)
        self.retry_button.description = f"Retry {failures.kind} ({count})" if count else "Retry this kind"
        self.retry_button.disabled = not count
        self._show_detail()

    def _kind_chosen(self) -> None:
        if not self._showing:
            self.refresh()

    def _item_chosen(self) -> None:
        if not self._showing:
            self._show_detail()

    def _show_detail(self) -> None:
        key, store = self.failed.value, self._open()
        if key is None or store is None:
            self.detail.value = "<i style='color:#777'>no failed item chosen</i>"
            return
        try:
            self.detail.value = item_html(views.item_view(store, self.name, key, now=self._now()))
        except RunnerError as exc:
            self.detail.value = error(str(exc))

    def _show_held(self, held: Sequence[recovery.HeldItem]) -> None:
        self._held, self._twice = len(held), any(item.case.may_charge_twice for item in held)
        self.held.value = held_html(held)
        self.acknowledge.layout.display = None if self._twice else "none"
        self.confirm_button.description = f"Confirm {len(held)} held" if held else "Confirm"
        self.confirm_button.button_style = "danger" if self._twice else "warning"
        self._enable_confirm()

    def _enable_confirm(self) -> None:
        """Confirming needs held items, and a person's tick where it may charge twice."""
        self.confirm_button.disabled = not self._held or (self._twice and not self.acknowledge.value)

    # A person's hand -------------------------------------------------------------

    def _pause(self, _: Any) -> None:
        self._command(control.pause, "paused: no new batches; those in flight finish")

    def _resume(self, _: Any) -> None:
        self._command(control.resume, "resumed: one batch at a time until one succeeds")

    def _step(self, _: Any) -> None:
        self._command(control.step, "one more batch may start; the run stays held")

    def _cancel_run(self, _: Any) -> None:
        """The first click asks (how many items, and that batches in flight finish); the second cancels."""
        if not self._cancel_asked:
            self._cancel_asked = True
            self.message.value = error(f"click Cancel run again to fail {plural(self._unfinished, 'unfinished item')} "
                                       "as cancelled; batches in flight finish first (their answers are paid for)")
            return
        self._cancel_asked = False
        self._command(control.cancel, lambda done: f"{plural(done.failed, 'item')} cancelled"
                      + (f", {done.finishing} more when their batch in flight ends" if done.finishing else ""))

    def _retry(self, _: Any) -> None:
        kind = self.kinds.value
        self.plan.ask(self._open(), lambda store: rerun_plans.retry_plan(store, self.name, kind=kind),
                      lambda: self._command(control.retry, lambda done: retried(done, f"{kind} item"), kind=kind))

    def _confirm(self, _: Any) -> None:
        if self._twice and not self.acknowledge.value:
            self.message.value = error("tick the box first: confirming may charge these items twice")
            return

        def said(released: Mapping[recovery.Case, int]) -> str:
            parts = [f"{plural(n, 'item')}: {case.warning}" for case, n in released.items() if n]
            return "; ".join(parts) or "nothing was held"

        def release() -> None:
            self._command(recovery.confirm, said)
            self.acknowledge.value = False

        self.plan.ask(self._open(), lambda store: rerun_plans.confirm_plan(store, self.name), release)

    def _command(self, action: Callable[..., Any], said: str | Callable[[Any], str], **options: Any) -> None:
        """Write one command through the core; its outcome, or why it was refused, goes in the message line."""
        self._cancel_asked = False  # a cancel asked about before another command must be asked again
        try:
            with Store(self.db, create=False) as store:
                done = action(store, self.name, now=self._now(), **options)
                alive = views.engine_alive(store, self.name, now=self._now())
            text = said(done) if callable(said) else said
            if not alive:
                text += " (no engine is running this run: the next one obeys)"
        except RunnerError as exc:
            self.message.value = error(str(exc))
        else:
            self.message.value = f"<span style='color:#2e7d32'>{escape(text)}</span>"
        self.refresh()


def _choose(select: Any, options: list[tuple[str, str]], value: str | None) -> None:
    """Show ``options`` in a dropdown or list (only when they changed) with ``value`` chosen."""
    if options != list(select.options):
        select.options = options
    select.value = value


def _tree(widget: Any) -> list[Any]:
    """A widget and all its descendants."""
    return [widget, *(w for child in getattr(widget, "children", ()) for w in _tree(child))]


def _models(widget: Any) -> list[Any]:
    """The widgets of the tree, and their layouts and styles (a refresh hides or shows a layout)."""
    models = (m for w in _tree(widget) for m in (w, getattr(w, "layout", None), getattr(w, "style", None)))
    return [m for m in models if m is not None]


def _report(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("the panel stopped refreshing: %r", task.exception())


def _short(location: StoreLocation) -> str:
    """A store as a panel names it in a line: its file's name, or its database's URL without the password."""
    return location.name if isinstance(location, Path) else named(location)
