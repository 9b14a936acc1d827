"""The notebook panel: one run's counts, groups, breaker, failures and confirmations, live, in ipywidgets.

The panel is a view over the run store. It reads through
:mod:`runner.store.views` and :mod:`runner.recovery`, on a read-only connection
(so it shows a store it cannot write, and never waits for a writer), and
writes only through :mod:`runner.control` and :mod:`runner.recovery`, on a
connection opened for each command, so it shows and steers a run whether its
engine lives in this kernel, another kernel or a CLI process.
Refreshing never calls upstream: a periodic task on the kernel's running loop
(every ``interval`` seconds) runs cheap reads and sets widget traits, which
ipywidgets only sends when a value changed.

This is the only module of ``runner`` that imports ipywidgets; nothing in
the core imports it (:meth:`runner.notebook.Run.panel` does, when asked).
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
from .store import views
from .breaker import Control
from .errors import RunnerError
from .model import BreakerState, ItemState
from .store import Store

log = logging.getLogger(__name__)

STATES = tuple(s.value for s in ItemState)
COLOURS = {
    "pending": "#b0bec5", "queued": "#90caf9", "waiting": "#ffb74d", "running": "#1e88e5",
    "received": "#4db6ac", "completed": "#43a047", "failed": "#e53935",
}
BREAKER_COLOURS = {BreakerState.CLOSED: "#43a047", BreakerState.PROBING: "#fb8c00", BreakerState.OPEN: "#e53935"}
MAX_GROUPS = 60
MAX_FAILED = 200
MAX_HELD = 50
MAX_TEXT = 2_000


class RunPanel:
    """A live panel over one run of a store: ``RunPanel("runs.db", "posts")``, shown by the notebook.

    ``refresh()`` reads the store once; with a running event loop (a
    kernel's) the panel refreshes itself every ``interval`` seconds until
    :meth:`close`. ``now`` gives the time for the engine's liveness and for
    commands.
    """

    def __init__(
        self,
        db: str | Path,
        name: str,
        *,
        interval: float = 0.5,
        now: Callable[[], float] = time.time,
        live: bool = True,
    ) -> None:
        self.db = Path(db)
        self.name = name
        self.interval = interval
        self._now = now
        self._store: Store | None = None
        self._task: asyncio.Task[None] | None = None
        #: The status last read (the status contract), for whoever wants the numbers shown.
        self.status: dict[str, Any] | None = None
        self._held, self._twice = 0, False
        self._kind_counts: dict[str, int] = {}
        self._build()
        self.refresh()
        if live:
            self.start()

    # The widgets ---------------------------------------------------------------

    def _build(self) -> None:
        self.title = widgets.HTML()
        self.bar = widgets.HTML()
        self.numbers = {
            state: widgets.HTML(
                value="0", description=state,
                style={"description_width": "initial", "font_size": "15px", "text_color": COLOURS[state]},
                layout=widgets.Layout(margin="0 18px 0 0"),
            )
            for state in STATES
        }
        self.breaker = widgets.HTML()
        self.pause_button = _button("Pause", "pause", "no new batches; those in flight finish", self._pause)
        self.resume_button = _button("Resume", "play", "one batch at a time until one succeeds", self._resume)
        self.step_button = _button("Step", "step-forward", "exactly one more batch, then held again", self._step)
        self.message = widgets.HTML()
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
        self.kinds.observe(lambda _: self._show_kind(), names="value")
        self.failed.observe(lambda _: self._show_detail(), names="value")
        self.acknowledge.observe(lambda _: self._enable_confirm(), names="value")
        failures = widgets.VBox([
            widgets.HBox([self.kinds, self.retry_button]),
            widgets.HBox([self.failed, self.detail]),
        ])
        confirmations = widgets.VBox([self.held, widgets.HBox([self.acknowledge, self.confirm_button])])
        self.tabs = widgets.Tab(children=[self.groups, failures, confirmations])
        self.widget = widgets.VBox([
            self.title,
            self.bar,
            widgets.HBox(list(self.numbers.values()), layout=widgets.Layout(flex_flow="row wrap")),
            widgets.HBox(
                [self.breaker, self.pause_button, self.resume_button, self.step_button],
                layout=widgets.Layout(align_items="center"),
            ),
            self.message,
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
        """Stop refreshing by itself (``refresh()`` still works)."""
        if self._task is not None:
            self._task.cancel()
            self._task = None

    def close(self) -> None:
        """Stop refreshing, close the store and the widgets."""
        self.stop()
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
            status = views.status(store, self.name, now=self._now())
            run_id = store.run_id(self.name)
            ctl = store.control(run_id)
            kinds = views.failure_kinds(store, run_id)
            held = recovery.held(store, self.name)
        except RunnerError as exc:
            self.title.value = f"<b>{escape(self.name)}</b> · {_error(str(exc))}"
            return
        self.status = status
        self._show_counts(status)
        self._show_breaker(status, ctl)
        self._show_kinds(kinds)
        self._show_held(held)
        failed, waiting = status["counts"]["failed"], status["needs_confirmation"]
        self.tabs.titles = ("By group", f"Failures ({failed})", f"Confirmations ({waiting})")

    def _open(self) -> Store:
        if self._store is None:
            self._store = Store(self.db, read_only=True)
        return self._store

    def _show_counts(self, status: Mapping[str, Any]) -> None:
        counts, total = status["counts"], status["total"]
        engine = "engine running" if status["engine"]["alive"] else "no engine running"
        self.title.value = (
            f"<b style='font-size:1.15em'>{escape(self.name)}</b> · {total} items · {engine} · "
            f"<span style='color:#777'>{escape(str(self.db))}</span>"
        )
        for state in STATES:
            self.numbers[state].value = str(counts[state])
        self.bar.value = _stacked_bar(counts, total)
        self.groups.value = _groups_table(status["groups"])

    def _show_breaker(self, status: Mapping[str, Any], ctl: Control) -> None:
        state = BreakerState(status["breaker"]["state"])
        parts = [f"breaker {_badge(state.value, BREAKER_COLOURS[state])}"]
        if ctl.paused:
            parts.append(_badge("paused", "#6d4c41"))
        if ctl.steps:
            parts.append(f"{_many(ctl.steps, 'step')} allowed")
        if status["breaker"]["reason"]:
            parts.append(f"<span style='color:#555'>{escape(status['breaker']['reason'])}</span>")
        self.breaker.value = " ".join(parts)
        self.pause_button.disabled = ctl.paused
        self.resume_button.disabled = not ctl.held
        self.step_button.disabled = not ctl.held

    def _show_kinds(self, kinds: Sequence[Mapping[str, Any]]) -> None:
        options = [(f"{k['kind']} ({k['n']})", k["kind"]) for k in kinds]
        if options != list(self.kinds.options):
            current = self.kinds.value
            self.kinds.options = options
            known = [kind for _, kind in options]
            self.kinds.value = current if current in known else (known[0] if known else None)
        self._kind_counts = {k["kind"]: k["n"] for k in kinds}
        self._show_kind()

    def _show_kind(self) -> None:
        """The chosen kind: its retry button and its items."""
        kind, store = self.kinds.value, self._open()
        count = self._kind_counts.get(kind, 0)
        self.retry_button.description = f"Retry {kind} ({count})" if count else "Retry this kind"
        self.retry_button.disabled = not count
        rows = views.failed_items(store, store.run_id(self.name), kind=kind, limit=MAX_FAILED) if kind else []
        options = [
            (f"{r['key']} · {r['group']} · {_many(r['attempts'], 'attempt')} · {r['paid_calls']} paid", r["key"])
            for r in rows
        ]
        if options != list(self.failed.options):
            current = self.failed.value
            self.failed.options = options
            keys = [key for _, key in options]
            self.failed.value = current if current in keys else (keys[0] if keys else None)
        self._show_detail()

    def _show_detail(self) -> None:
        key = self.failed.value
        store = self._open()
        item = views.item(store, store.run_id(self.name), key) if key else None
        if item is None:
            self.detail.value = "<i style='color:#777'>no failed item chosen</i>"
            return
        self.detail.value = _item_html(item, views.item_history(store, item["id"]))

    def _show_held(self, held: Sequence[recovery.HeldItem]) -> None:
        self._held, self._twice = len(held), any(item.case.may_charge_twice for item in held)
        self.held.value = _held_html(held)
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

    def _retry(self, _: Any) -> None:
        kind = self.kinds.value
        self._command(control.retry, lambda n: f"{_many(n, kind + ' item')} back to pending", kind=kind)

    def _confirm(self, _: Any) -> None:
        if self._twice and not self.acknowledge.value:
            self.message.value = _error("tick the box first: confirming may charge these items twice")
            return

        def said(released: Mapping[recovery.Case, int]) -> str:
            parts = [f"{_many(n, 'item')}: {case.warning}" for case, n in released.items() if n]
            return "; ".join(parts) or "nothing was held"

        self._command(recovery.confirm, said)
        self.acknowledge.value = False

    def _command(self, action: Callable[..., Any], said: str | Callable[[Any], str], **options: Any) -> None:
        """Write one command through the core; its outcome, or why it was refused, goes in the message line."""
        try:
            with Store(self.db, create=False) as store:
                done = action(store, self.name, now=self._now(), **options)
                alive = views.status(store, self.name, now=self._now())["engine"]["alive"]
            text = said(done) if callable(said) else said
            if not alive:
                text += " (no engine is running this run: the next one obeys)"
        except RunnerError as exc:
            self.message.value = _error(str(exc))
        else:
            self.message.value = f"<span style='color:#2e7d32'>{escape(text)}</span>"
        self.refresh()


def _button(description: str, icon: str, tooltip: str, handler: Callable[[Any], None]) -> Any:
    button = widgets.Button(description=description, icon=icon, tooltip=tooltip,
                            layout=widgets.Layout(width="auto", margin="0 0 0 8px"))
    button.on_click(handler)
    return button


def _tree(widget: Any) -> list[Any]:
    """A widget and all its descendants."""
    return [widget, *(w for child in getattr(widget, "children", ()) for w in _tree(child))]


def _report(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("the panel stopped refreshing: %r", task.exception())


def _error(text: str) -> str:
    return f"<span style='color:#c62828'>{escape(text)}</span>"


def _badge(text: str, colour: str) -> str:
    return (f"<span style='background:{colour};color:white;border-radius:4px;padding:1px 7px;"
            f"font-weight:bold'>{escape(text)}</span>")


def _stacked_bar(counts: Mapping[str, int], total: int) -> str:
    segments = "".join(
        f"<div title='{state}: {counts[state]}' style='width:{100 * counts[state] / total:.3f}%;"
        f"background:{COLOURS[state]}'></div>"
        for state in STATES if total and counts[state]
    )
    return (f"<div style='display:flex;height:18px;width:100%;min-width:420px;background:#eceff1;"
            f"border-radius:4px;overflow:hidden'>{segments}</div>")


def _groups_table(groups: Mapping[str, Mapping[str, int]]) -> str:
    head = "".join(f"<th style='padding:2px 8px;color:{COLOURS[s]}'>{s}</th>" for s in STATES)
    rows = []
    for group in list(groups)[:MAX_GROUPS]:
        cells = "".join(
            f"<td style='text-align:right;padding:2px 8px'>{groups[group][s] or '·'}</td>" for s in STATES
        )
        rows.append(f"<tr><td style='padding:2px 8px'><b>{escape(group)}</b></td>{cells}"
                    f"<td style='text-align:right;padding:2px 8px'>{sum(groups[group].values())}</td></tr>")
    more = len(groups) - MAX_GROUPS
    if more > 0:
        rows.append(f"<tr><td colspan='9' style='color:#777'>… {more} more groups</td></tr>")
    return (f"<table style='border-collapse:collapse;line-height:1.5;font-variant-numeric:tabular-nums'>"
            f"<tr><th>group</th>{head}"
            f"<th style='padding:2px 8px'>total</th></tr>{''.join(rows)}</table>")


def _item_html(item: Mapping[str, Any], history: Sequence[Mapping[str, Any]]) -> str:
    facts = (
        f"<b>{escape(item['key'])}</b> · group {escape(item['group'])} · {escape(item['state'])} · "
        f"kind <b>{escape(str(item['kind']))}</b> · {_many(item['attempts'], 'attempt')} · "
        f"{_many(item['paid_calls'], 'paid call')}"
        + (f" · {item['maybe_paid']} maybe paid" if item["maybe_paid"] else "")
        + (" · a person may retry it" if item["retryable"] else " · not worth retrying as it is")
    )
    cell = "style='padding:1px 10px 1px 0;vertical-align:top;white-space:nowrap'"
    lines, said = [], None
    for h in history:
        if h["batch_move"]:
            message = f"batch {h['batch_id']}: {_many(h['items'], 'item')}"
        else:  # a state change carries the item's error until it is cleared: show each message once
            message = h["message"] if h["message"] != said else ""
            said = h["message"]
        lines.append(
            f"<tr><td {cell}>{time.strftime('%H:%M:%S', time.localtime(h['at']))}</td>"
            f"<td {cell}>{escape(str(h['from_state'] or ''))} → {escape(h['to_state'])}</td>"
            f"<td {cell}>{escape(str(h['kind'] or ''))}</td>"
            f"<td style='padding:1px 0'>{escape(_cut(message or '', 200))}</td></tr>"
        )
    return (
        f"<div style='line-height:1.45;font-size:0.92em'>{facts}"
        f"<div style='color:#c62828;margin:4px 0'>{escape(_cut(item['message'] or '', MAX_TEXT))}</div>"
        f"<div><b>input</b> {_code(item['input'])}</div><div><b>output</b> {_code(item['output'])}</div>"
        f"<div style='margin-top:4px'><b>history</b></div>"
        f"<table style='border-collapse:collapse'>{''.join(lines)}</table></div>"
    )


def _held_html(held: Sequence[recovery.HeldItem]) -> str:
    if not held:
        return "<i style='color:#777'>nothing awaits confirmation</i>"
    cases: dict[recovery.Case, int] = {}
    for item in held:
        cases[item.case] = cases.get(item.case, 0) + 1
    warnings = "".join(
        f"<li style='color:{'#c62828' if case.may_charge_twice else '#333'}'><b>{case.value}</b> "
        f"({_many(n, 'item')}): {escape(case.warning)}</li>"
        for case, n in cases.items()
    )
    head = _row(["key", "group", "case", "task id", "attempts", "paid calls"], "th")
    rows = "".join(
        _row([i.key, i.group, i.case.value, i.task_id or "", str(i.attempts), str(i.paid_calls)])
        for i in held[:MAX_HELD]
    )
    more = f"<div style='color:#777'>… {len(held) - MAX_HELD} more</div>" if len(held) > MAX_HELD else ""
    return (
        f"<div style='line-height:1.45'>A crashed engine left {_many(len(held), 'item')} that may have reached "
        f"the upstream. Confirming does this:</div><ul>{warnings}</ul>"
        f"<table style='border-collapse:collapse;line-height:1.45'>{head}{rows}</table>{more}"
    )


def _row(cells: Sequence[str], tag: str = "td") -> str:
    return "<tr>" + "".join(
        f"<{tag} style='padding:1px 16px 1px 0;text-align:left'>{escape(cell)}</{tag}>" for cell in cells
    ) + "</tr>"


def _code(text: str | None) -> str:
    """Stored JSON (an input, the model's raw output) as compact monospace text."""
    shown = "(none)" if text is None else _cut(text, MAX_TEXT)
    return f"<code style='white-space:pre-wrap;word-break:break-all'>{escape(shown)}</code>"


def _many(count: int, thing: str) -> str:
    return f"{count} {thing}{'' if count == 1 else 's'}"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + " …"
