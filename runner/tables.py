"""How a run reads in a terminal: the tables the CLI prints, every outside text shown as it is (never as markup)."""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

from rich import box
from rich.markup import escape
from rich.table import Table

from . import recovery
from .words import plural
from .store.answers import STATES, Standing


def held_table(held: Sequence[recovery.HeldItem]) -> Table:
    """The held items by case; the command that releases them is the caller's hint, on a line of its own."""
    table = Table(title="waiting for a person", box=box.SIMPLE_HEAD)
    for column in ("case", "items", "what confirming does", "keys"):
        table.add_column(column)
    for case in recovery.Case:
        keys = [item.key for item in held if item.case is case]
        if keys:
            shown = ", ".join(keys[:5]) + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")
            table.add_row(case.value, str(len(keys)), case.warning + _landing(held, case), escape(shown))
    return table


def _landing(held: Sequence[recovery.HeldItem], case: recovery.Case) -> str:
    """When the lost creates of ``adopt`` items can no longer land: the engine looks for them again then."""
    lands_by = [item.lands_by for item in held if item.case is case and item.lands_by is not None]
    if not lands_by:
        return ""
    when = datetime.datetime.fromtimestamp(max(lands_by)).strftime("%Y-%m-%d %H:%M:%S")
    return f" (a lost create may still land until {when}: none is concluded only after that)"


def failures_table(name: str, failed: list[dict[str, Any]]) -> Table:
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for item in failed:
        by_kind.setdefault(item["kind"], []).append(item)
    table = Table(title=f"run {escape(name)}: {plural(len(failed), 'failed item')}", box=box.SIMPLE_HEAD)
    for column in ("kind", "items", "retryable", "example"):
        table.add_column(column)
    for kind, items in by_kind.items():
        retryable = sum(1 for item in items if item["retryable"])
        first = items[0]
        example = f"{first['key']} ({plural(first['attempts'], 'attempt')}): {first['message']}"
        table.add_row(escape(kind), str(len(items)), str(retryable), escape(example))
    return table


def status_table(run: Standing) -> Table:
    control = run.control
    caption = f"breaker {control.breaker.value}" + (f" ({escape(control.reason)})" if control.reason else "")
    if control.paused:
        caption += " · paused" + (f", {plural(control.steps, 'step')} allowed" if control.steps else "")
    engine = "alive" if run.engine_alive else "died (its lease was left behind)" if run.engine_died else "not running"
    caption += f" · engine {engine}"
    if run.held:
        caption += f" · {plural(run.held, 'item')} {'needs' if run.held == 1 else 'need'} confirmation"
    if run.duplicate_tasks:
        caption += (f" · {plural(run.duplicate_tasks, 'duplicate upstream task')} found (cancelled where the "
                    f"upstream let it)")
    table = Table(
        title=f"run {escape(run.name)}: {plural(run.total, 'item')}", caption=caption, box=box.SIMPLE_HEAD,
        show_edge=False, pad_edge=False,
    )
    table.add_column("group")
    for state in STATES:
        table.add_column(state, justify="right")
    for group, counts in run.groups.items():
        table.add_row(escape(group), *(str(counts[s] or "") for s in STATES))
    table.add_row("total", *(str(run.counts[s]) for s in STATES), style="bold")
    return table
