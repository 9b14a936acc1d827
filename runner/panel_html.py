"""How the notebook panel draws a run: its bar, its groups, its breaker line, a failed item, the held items and a
decision waiting, as HTML.

Plain functions from the read model (:mod:`runner.store.answers`) to HTML
text that :mod:`runner.widgets` puts in its widgets; every outside text is
escaped. No ipywidgets here, and no store.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path

from . import budgets
from .budgets import BudgetView
from .costs import Cost
from .location import StoreLocation, named
from .model import BreakerState
from .recovery import Case, HeldItem
from .progress_line import queue, rate_limited, scheduled
from .store.answers import STATES, Decision, ItemView, Standing
from .store.worker_rows import WorkerShown
from .words import archived, duration, plural, with_workers

#: The red of the panel's errors and warnings.
ERROR_COLOUR = "#c62828"

COLOURS = {
    "pending": "#b0bec5", "queued": "#90caf9", "waiting": "#ffb74d", "running": "#1e88e5",
    "received": "#4db6ac", "completed": "#43a047", "failed": "#e53935",
}
BREAKER_COLOURS = {BreakerState.CLOSED: "#43a047", BreakerState.PROBING: "#fb8c00", BreakerState.OPEN: "#e53935"}
MAX_GROUPS = 60
MAX_HELD = 50
MAX_TEXT = 2_000


def error(text: str) -> str:
    return f"<span style='color:{ERROR_COLOUR}'>{escape(text)}</span>"


def note(text: str) -> str:
    """A notice that is no error: something changed under the person's eyes."""
    return f"<span style='color:#8d6e63'>{escape(text)}</span>"


def badge(text: str, colour: str) -> str:
    return (f"<span style='background:{colour};color:white;border-radius:4px;padding:1px 7px;"
            f"font-weight:bold'>{escape(text)}</span>")


def stacked_bar(counts: Mapping[str, int], total: int) -> str:
    segments = "".join(
        f"<div title='{state}: {counts[state]}' style='width:{100 * counts[state] / total:.3f}%;"
        f"background:{COLOURS[state]}'></div>"
        for state in STATES if total and counts[state]
    )
    return (f"<div style='display:flex;height:18px;width:100%;min-width:420px;background:#eceff1;"
            f"border-radius:4px;overflow:hidden'>{segments}</div>")


#: A pipeline's stage columns after the states: the items that passed each stage (its result saved) and skipped it.
PASSES = ("passed", "skipped")


def groups_table(
    groups: Mapping[str, Mapping[str, int]], *, by: str = "group",
    passes: Mapping[str, Mapping[str, int]] | None = None,
) -> str:
    """Items by group (or ``by`` another thing: a pipeline's stages) and state, a row each, with their total; with
    ``passes`` (a pipeline's stages), the items that passed and skipped each too."""
    extra = PASSES if passes is not None else ()
    head = "".join(f"<th style='padding:2px 8px;color:{COLOURS[s]}'>{s}</th>" for s in STATES)
    head += "".join(f"<th style='padding:2px 8px'>{column}</th>" for column in ("total", *extra))
    rows = []
    for group in list(groups)[:MAX_GROUPS]:
        numbers = [*(groups[group][s] or "·" for s in STATES), sum(groups[group].values()),
                   *((passes or {}).get(group, {}).get(column, 0) or "·" for column in extra)]
        cells = "".join(f"<td style='text-align:right;padding:2px 8px'>{n}</td>" for n in numbers)
        rows.append(f"<tr><td style='padding:2px 8px'><b>{escape(group)}</b></td>{cells}</tr>")
    more = len(groups) - MAX_GROUPS
    if more > 0:
        rows.append(f"<tr><td colspan='{9 + len(extra)}' style='color:#777'>… {more} more {by}s</td></tr>")
    return (f"<table style='border-collapse:collapse;line-height:1.5;font-variant-numeric:tabular-nums'>"
            f"<tr><th>{by}</th>{head}</tr>{''.join(rows)}</table>")


def title_html(name: str, standing: Standing, db: StoreLocation) -> str:
    """The panel's head: the run's name, its items (and those archived), its engine and its store; under it, a line
    per worker when several work the run."""
    engine = f"engine running{with_workers(standing.alive_workers)}" if standing.engine_alive else "no engine running"
    return " · ".join(part for part in (
        f"<b style='font-size:1.15em'>{escape(name)}</b>", f"{standing.total} items", archived(standing.archived),
        engine, f"<span style='color:#777'>{escape(where(db))}</span>") if part) + workers_html(standing.workers)


def workers_html(workers: Sequence[WorkerShown]) -> str:
    """The run's workers when several work it (issue 20), a line each: where it runs, alive or dead (its heartbeat
    late: a live worker takes its batches over), its last heartbeat, what it holds; nothing for one."""
    if len(workers) < 2:
        return ""
    lines = "".join(
        f"<div>{escape(worker.host)}:{worker.pid} · "
        + (f"<b style='color:{COLOURS['completed']}'>alive</b>" if worker.alive else
           f"<b style='color:{ERROR_COLOUR}'>dead</b>")
        + f" · beat {duration(worker.heartbeat_age)} ago · holds {plural(worker.batches, 'batch', 'batches')} "
        f"({plural(worker.items, 'item')})</div>"
        for worker in workers
    )
    return f"<div style='font-size:0.92em;color:#555;line-height:1.45'>{lines}</div>"


def item_html(item: ItemView) -> str:
    stage = f"stage {escape(item.stage)} · " if item.staged else ""
    facts = (
        f"<b>{escape(item.key)}</b> · group {escape(item.group)} · {stage}{escape(item.waits or item.state)} · "
        f"kind <b>{escape(str(item.kind))}</b> · {plural(item.attempts, 'attempt')} · "
        f"{plural(item.paid_calls, 'paid call')}"
        + (f" · {item.maybe_paid} maybe paid" if item.maybe_paid else "")
        + (" · a person may retry it" if item.retryable else " · not worth retrying as it is")
    )
    cell = "style='padding:1px 10px 1px 0;vertical-align:top;white-space:nowrap'"
    lines, said = [], None
    for h in item.history:
        if h.batch_items is not None:
            message: str | None = f"batch {h.batch_id}: {plural(h.batch_items, 'item')}"
        elif h.stage_note:
            message = h.stage_note
        else:  # a state change carries the item's error until it is cleared: show each message once
            message = h.message if h.message != said else ""
            said = h.message
        lines.append(
            f"<tr><td {cell}>{time.strftime('%H:%M:%S', time.localtime(h.at))}</td>"
            f"<td {cell}>{escape(str(h.from_state or ''))} → {escape(h.to_state)}</td>"
            f"<td {cell}>{escape(str(h.kind or ''))}</td>"
            f"<td style='padding:1px 0'>{escape(_cut(message or '', 200))}</td></tr>"
        )
    return (
        f"<div style='line-height:1.45;font-size:0.92em'>{facts}"
        f"<div style='color:{ERROR_COLOUR};margin:4px 0'>{escape(_cut(item.message or '', MAX_TEXT))}</div>"
        f"<div><b>input</b> {_code(item.input)}</div><div><b>output</b> {_code(item.output)}</div>"
        f"{_results(item)}<div style='margin-top:4px'><b>history</b></div>"
        f"<table style='border-collapse:collapse'>{''.join(lines)}</table></div>"
    )


def _results(item: ItemView) -> str:
    """A pipeline's item: each stage's result it has, under the stage's name (none: a run of one stage)."""
    if not item.staged:
        return ""
    shown = "".join(f"<div>{escape(stage)} {_code(result)}</div>" for stage, result in item.results.items())
    return f"<div style='margin-top:4px'><b>results by stage</b></div>{shown or '<i>none yet</i>'}"


def held_html(held: Sequence[HeldItem]) -> str:
    if not held:
        return "<i style='color:#777'>nothing awaits confirmation</i>"
    cases: dict[Case, int] = {}
    for item in held:  # in the order the items first show each case
        cases[item.case] = cases.get(item.case, 0) + 1
    warnings = "".join(
        f"<li style='color:{ERROR_COLOUR if case.may_charge_twice else '#333'}'><b>{case.value}</b> "
        f"({plural(n, 'item')}): {escape(case.warning)}</li>"
        for case, n in cases.items()
    )
    head = _row(["key", "group", "case", "task id", "attempts", "paid calls"], "th")
    rows = "".join(
        _row([i.key, i.group, i.case.value, i.task_id or "", str(i.attempts), str(i.paid_calls)])
        for i in held[:MAX_HELD]
    )
    more = f"<div style='color:#777'>… {len(held) - MAX_HELD} more</div>" if len(held) > MAX_HELD else ""
    return (
        f"<div style='line-height:1.45'>A crashed engine left {plural(len(held), 'item')} that may have reached "
        f"the upstream. Confirming does this:</div><ul>{warnings}</ul>"
        f"<table style='border-collapse:collapse;line-height:1.45'>{head}{rows}</table>{more}"
    )


def decision_html(decision: Decision | None, waiting: int) -> str:
    """An item waiting for a person's decision: where it waits, its input and the results of the stages it passed."""
    if decision is None:
        return "<i style='color:#777'>nothing waits for a decision</i>"
    parts = [f"<b>{escape(decision.key)}</b> · group {escape(decision.group)} · waiting for a decision at stage "
             f"<b>{escape(decision.stage)}</b> ({plural(waiting, 'item')} waiting)", "<b>input</b>",
             _code(json.dumps(dict(decision.input), indent=2, ensure_ascii=False))]
    for stage, result in decision.results.items():
        parts += [f"<b>{escape(stage)}</b>", _code(json.dumps(result, indent=2, ensure_ascii=False))]
    return "<div style='line-height:1.45'>" + "<br>".join(parts) + "</div>"


def breaker_html(standing: Standing) -> str:
    """The breaker, a rate limit, a pause, the steps allowed, the items scheduled for later and the shared queue."""
    ctl, now = standing.control, standing.read_at
    parts = [f"breaker {badge(ctl.breaker.value, BREAKER_COLOURS[ctl.breaker])}"]
    if standing.rate_limited_until is not None:
        parts.append(badge(rate_limited(standing.rate_limited_until, now=now), "#b26a00"))
    if ctl.paused:
        parts.append(badge("paused", "#6d4c41"))
    if ctl.steps:
        parts.append(f"{plural(ctl.steps, 'step')} allowed")
    if ctl.reason:
        parts.append(f"<span style='color:#555'>{escape(ctl.reason)}</span>")
    if standing.scheduled:
        parts.append(badge(scheduled(standing.scheduled, standing.next_scheduled_at, now=now), "#00796b"))
    if standing.queue is not None:
        parts.append(f"<br>{badge(queue(standing.queue, standing.control, now=now), '#6a1b9a')}")
    return " ".join(parts)


def cost_html(cost: Cost, budget: BudgetView) -> str:
    """The run's cost line with its budget beside it (:func:`runner.budgets.cost_line`), in the warning colour
    when some of it is unknown."""
    text = escape(budgets.cost_line(cost, budget), quote=False)
    colour = "#a60" if cost.spent is None else "#555"
    return f"<span style='color:{colour}'>{text}</span>"


def where(path: StoreLocation) -> str:
    """A store's path as a person reads it: relative to the working folder when it is inside it (a database's URL
    without its password)."""
    if not isinstance(path, Path):
        return named(path)
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _row(cells: Sequence[str], tag: str = "td") -> str:
    return "<tr>" + "".join(
        f"<{tag} style='padding:1px 16px 1px 0;text-align:left'>{escape(cell)}</{tag}>" for cell in cells
    ) + "</tr>"


def _code(text: str | None) -> str:
    """Stored JSON (an input, the model's raw output) as compact monospace text."""
    shown = "(none)" if text is None else _cut(text, MAX_TEXT)
    return f"<code style='white-space:pre-wrap;word-break:break-all'>{escape(shown)}</code>"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + " …"
