"""A run's log as a person reads it: its newest events and people's commands, as lines.

A batch's move is one event already, one line; items' own events that moved
together (same batch, time, move and reason) become one line that names the
first and counts the rest; a worker found dead (:mod:`runner.store.takeovers`), a line of its own. Commands are merged in by time. Pure: it is given
the rows :func:`runner.store.views.event_tail` and ``command_tail`` read.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..model import ItemState
from ..words import plural
from . import takeovers
from .answers import LogLine, stage_note

Row = dict[str, Any]

#: What items' own events share when they are one change of several items.
TOGETHER = ("at", "batch_id", "from_state", "to_state", "kind", "message", "stage", "to_stage")


def lines(events: Sequence[Row], commands: Sequence[Row], *, now: float, limit: int) -> tuple[LogLine, ...]:
    """The newest ``limit`` lines, newest first: events (newest first) and commands (likewise) merged."""
    moved: list[tuple[float, LogLine]] = []
    for group in _together(events)[:limit]:
        first = group[0]
        if first["kind"] == takeovers.KIND:  # the run's own event: it moved no item
            moved.append((first["id"], LogLine(now - first["at"], "worker found dead", first["message"], "failed")))
            continue
        move = f"{first['from_state']} → {first['to_state']}" if first["from_state"] else f"new, {first['to_state']}"
        detail = stage_note(first["kind"], first["stage"], first["to_stage"], first["message"]) or (
            f"{first['kind']}: {first['message']}" if first["kind"] else (first["message"] or ""))
        what = f"{_where(first)}{_who(group)} {move}"
        moved.append((first["id"], LogLine(now - first["at"], what, detail, first["to_state"])))
    merged = sorted(
        [(line.age, 0, -order, line) for order, line in moved]
        + [(now - c["at"], 1, -c["id"], _command(c, now)) for c in commands],
        key=lambda entry: (entry[0], entry[1], entry[2]),
    )
    return tuple(line for *_, line in merged[:limit])


def _command(row: Row, now: float) -> LogLine:
    """A person's command in words: what they did, and what it does (for a retry, which items)."""
    command, outcome = row["command"], row["outcome"] or ""
    if command == "retry":
        what, detail = f"retried {_items(outcome)}", f"{_chosen(row['args'])}pending again, fresh attempt budgets"
    elif command in PAST:
        what, detail = f"{PAST[command]} {_items(outcome)}", f"{_chosen(row['args'])}{outcome}"
    elif command == "on_cancel":  # claimed first, ended after the calls: a claim never ended, its process stopped
        what, detail = "compensated cancelled items", f"the notebook's on_cancel: {outcome}"
    elif command == "confirm":
        what, detail = f"confirmed {_items(outcome)}", ", ".join(p for p in outcome.split(", ") if not p.startswith("0 "))
    else:
        what, detail = CONTROLS.get(command, (command, outcome))
    return LogLine(now - row["at"], what, detail, "person")


#: A person's commands on items, as the log says they were done.
PAST = {"cancel": "cancelled", "decide": "decided"}

#: The words of the commands on a run's controls: what a person did, and what it does.
CONTROLS = {
    "pause": ("paused by a person", "no new batches; those in flight finish"),
    "resume": ("resumed by a person", "one batch at a time until one succeeds, then full speed"),
    "step": ("let 1 batch run", "a person's step: then the run stays held"),
}


def _items(outcome: str) -> str:
    """How many items a retry or a confirmation moved, from the counts its outcome lists."""
    return plural(sum(int(word) for word in outcome.split() if word.isdigit()), "item")


def _together(rows: Sequence[Row]) -> list[list[Row]]:
    """Items' own events of one change of several items (one transaction: the same time, batch, move and reason,
    in any order: a pipeline's boundary sends some on to one stage, some to another); a batch's move is a group
    of its own. The groups in the order of their newest event."""
    groups: list[list[Row]] = []
    changes: dict[tuple[Any, ...], list[Row]] = {}
    for row in rows:
        change = tuple(row[f] for f in TOGETHER)
        if row["key"] is not None and change in changes:
            changes[change].append(row)
            continue
        groups.append([row])
        if row["key"] is not None:
            changes[change] = groups[-1]
    return groups


def _who(group: list[Row]) -> str:
    """The items of a log line: a batch's move (or items added) says how many, items' own events name them."""
    first = group[0]
    if first["key"] is None:
        return plural(first["items"], "item")
    return first["key"] if len(group) == 1 else f"{first['key']} +{len(group) - 1}"


def _where(event: Row) -> str:
    """The batch of a log line, and for a batch formed by a split, the batch it came from."""
    if not event["batch_id"]:
        return ""
    if event["parent_id"] and event["key"] is None and event["to_state"] == ItemState.QUEUED:
        return f"batch {event['batch_id']} (split from {event['parent_id']}): "
    return f"batch {event['batch_id']}: "


def _chosen(args: str) -> str:
    """Which failed items a retry chose, in words: ``kind transport: ``, ``p1 p2 +3: `` (all: nothing)."""
    try:
        given = json.loads(args)
    except ValueError:
        return ""
    if not isinstance(given, dict):
        return ""
    keys = given.get("keys") or []
    kind = f"kind {given['kind']}: " if given.get("kind") else ""
    shown = " ".join(str(key) for key in keys[:3]) + (f" +{len(keys) - 3}" if len(keys) > 3 else "")
    return kind + (f"{shown}: " if keys else "")
