"""How a run reads in a terminal: the tables ``runner status`` and ``runner failures`` print, as plain columns.

The columns are :mod:`runner.columns`' (no rich); these say what each
table holds and in what words.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any

import click

from .columns import shown, table, width
from .progress_line import queue, rate_limited, scheduled
from .model import Case, HeldItem
from .store.answers import STATES, StageTally, Standing
from .words import few, others_at_work, plural, with_workers

__all__ = ["echo", "failures_table", "held_table", "shown", "stages_table", "status_table", "workers_table"]


def echo(lines: Sequence[str]) -> None:
    """A table's lines on stdout (click leaves out the styles when stdout is not a terminal)."""
    click.echo("\n".join(lines))


def held_table(held: Sequence[HeldItem]) -> list[str]:
    """The held items by case; the command that releases them is the caller's hint, on a line of its own."""
    rows = []
    for case in Case:
        keys = [item.key for item in held if item.case is case]
        if keys:
            rows.append([case.value, str(len(keys)), case.warning + _landing(held, case), few(keys)])
    return table(("case", "items", "what confirming does", "keys"), rows, title="waiting for a person",
                 numbers={1}, wraps={2, 3}, within=width())


def _landing(held: Sequence[HeldItem], case: Case) -> str:
    """When the lost creates of ``adopt`` items can no longer land: the engine looks for them again then."""
    lands_by = [item.lands_by for item in held if item.case is case and item.lands_by is not None]
    if not lands_by:
        return ""
    when = datetime.datetime.fromtimestamp(max(lands_by)).strftime("%Y-%m-%d %H:%M:%S")
    return f" (a lost create may still land until {when}: none is concluded only after that)"


def failures_table(name: str, failed: list[dict[str, Any]], *, staged: bool = False) -> list[str]:
    """Failed items by kind (a pipeline's: by stage and kind): how many, how many a person may retry, and the
    first one as an example."""
    by_kind: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for item in failed:
        by_kind.setdefault((item["stage"], item["kind"]) if staged else (item["kind"],), []).append(item)
    rows = []
    for where, items in by_kind.items():
        retryable = sum(1 for item in items if item["retryable"])
        first = items[0]
        example = f"{first['key']} ({plural(first['attempts'], 'attempt')}): {first['message']}"
        rows.append([*where, str(len(items)), str(retryable), example])
    first_column = ("stage", "kind") if staged else ("kind",)
    return table((*first_column, "items", "retryable", "example"), rows,
                 title=f"run {name}: {plural(len(failed), 'failed item')}",
                 numbers={len(first_column), len(first_column) + 1}, wraps={len(first_column) + 2}, within=width())


def not_retryable_note(failed: Sequence[Mapping[str, Any]]) -> str | None:
    """What the ``retryable`` column means, said when some items are not (None: every one is)."""
    refused = sum(1 for item in failed if not item["retryable"])
    if not refused:
        return None
    return (f"retryable: may pass if sent again as is; not retryable ({refused:,}): the upstream refused the input "
            "itself, and refuses it again until the cause is fixed (runner retry still sends it; its plan says so)")


def charges(items: Sequence[Mapping[str, Any]]) -> str:
    """The calls ``items`` were charged: billed, unknown (sent, the answer lost), not billed (refused)."""
    billed, unknown, refused = (sum(item[key] for item in items) for key in ("paid_calls", "maybe_paid", "not_billed"))
    return ", ".join([f"{billed} billed", *([f"{unknown} unknown"] if unknown else []),
                      *([f"{refused} not billed"] if refused else [])])


def items_of_kind_table(name: str, kind: str, failed: list[dict[str, Any]], *, staged: bool = False) -> list[str]:
    """Every failed item of one kind: its key, group (a pipeline's: its stage), attempts, whether a person may
    retry it, and its message."""
    rows = [[item["key"], item["group"], *([item["stage"]] if staged else []), str(item["attempts"]),
             "yes" if item["retryable"] else "no", item["message"]] for item in failed]
    columns = ("key", "group", *(("stage",) if staged else ()), "attempts", "retryable", "message")
    return table(columns, rows, title=f"run {name}: {plural(len(failed), 'failed item')} of kind {kind}",
                 numbers={len(columns) - 3}, wraps={len(columns) - 1}, within=width())


def status_table(run: Standing, *, ended_here: bool = False) -> list[str]:
    """Items by group and state, a total, and under it the breaker, a pause, a rate limit, the engine and what is held.

    ``ended_here``: the table a worker prints as its own run ends (``runner run``): an engine still alive is
    another worker's.
    """
    control = run.control
    caption = f"breaker {control.breaker.value}" + (f" ({control.reason})" if control.reason else "")
    if control.paused:
        caption += " · paused" + (f", {plural(control.steps, 'step')} allowed" if control.steps else "")
    if run.rate_limited_until is not None:
        caption += f" · {rate_limited(run.rate_limited_until, now=run.read_at)}"
    engine = "alive" if run.engine_alive else "died (its lease was left behind)" if run.engine_died else "not running"
    workers = others_at_work(run.alive_workers) if ended_here and run.engine_alive else with_workers(run.alive_workers)
    caption += f" · engine {engine}{workers}"
    if run.held:
        caption += f" · {plural(run.held, 'item')} {'needs' if run.held == 1 else 'need'} confirmation"
    if run.needs_decision:
        caption += f" · {plural(run.needs_decision, 'item')} waiting for a decision (not for a time)"
    if run.cancelled_whole:
        caption += f" · cancelled by a person ({plural(run.cancelled, 'item')} cancelled)"
    elif run.cancelled:
        caption += f" · {plural(run.cancelled, 'item')} cancelled by a person"
    if run.waiting_for_sub_items:
        caption += f" · {plural(run.waiting_for_sub_items, 'item')} waiting for sub-items"
    if run.scheduled:
        caption += f" · {scheduled(run.scheduled, run.next_scheduled_at, now=run.read_at)} (waiting for that time)"
    if run.queue is not None:
        caption += f" · {queue(run.queue, run.control, now=run.read_at)}"
    if run.duplicate_tasks:
        caption += (f" · {plural(run.duplicate_tasks, 'duplicate upstream task')} found (cancelled where the "
                    f"upstream let it)")
    rows = [[group, *(f"{counts[s]:,}" if counts[s] else "" for s in STATES)] for group, counts in run.groups.items()]
    rows.append(["total", *(f"{run.counts[s]:,}" for s in STATES)])
    lines = table(("group", *STATES), rows, title=f"run {run.name}: {plural(run.total, 'item')}",
                  caption=shown(caption), numbers=range(1, len(STATES) + 1), bold={len(rows) - 1}, within=width())
    lines += [""] + stages_table(run.tallies) if len(run.stages) > 1 else []
    return lines + ([""] + workers_table(run) if len(run.workers) > 1 else [])


def workers_table(run: Standing) -> list[str]:
    """The run's workers, when several: where each runs, its last heartbeat, whether it lives, and what it holds."""
    rows = [[worker.host, str(worker.pid), f"{worker.heartbeat_age:,.0f}s ago", "alive" if worker.alive else "dead",
             f"{worker.batches:,}", f"{worker.items:,}"] for worker in run.workers]
    return table(("host", "pid", "heartbeat", "state", "batches", "items"), rows,
                 title=f"run {run.name}: {plural(len(run.workers), 'worker')}", numbers={1, 4, 5}, within=width())


def stages_table(tallies: Sequence[StageTally]) -> list[str]:
    """A pipeline's stages in order, a row each: the items at it now by state, and those that passed it (their
    result saved there) and that skipped it (its ``when`` false), so that a stage every item passed is not blank."""
    rows = [[t.stage, " · ".join(f"{n:,} {state}" for state, n in t.here), f"{t.passed:,}",
             f"{t.skipped:,}" if t.skipped else ""] for t in tallies]
    return table(("stage", "at it now", "passed", "skipped"), rows, title="by stage", numbers={2, 3}, wraps={1},
                 within=width())


def queue_table(shared: Mapping[str, Any], *, now: float) -> list[str]:
    """A shared queue (``Store.queues``): its runs by priority, a row each, what each holds and has waiting; under
    it the limit, the breaker and a 429's quiet time."""
    rows = [[run["run"], str(run["priority"]), str(run["held"]), str(run["waiting"]),
             "alive" if run["live"] else "not running"] for run in shared["runs"]]
    caption = f"breaker {shared['breaker']}" + (f" ({shared['breaker_reason']})" if shared["breaker_reason"] else "")
    if shared["quiet_until"] > now:
        caption += f" · {rate_limited(shared['quiet_until'], now=now)}"
    in_flight = sum(run["held"] for run in shared["runs"])
    return table(("run", "priority", "in flight", "waiting", "engine"), rows, numbers={1, 2, 3},
                 title=f"queue {shared['name']}: {in_flight} of {shared['concurrency']} in flight",
                 caption=shown(caption), within=width())
