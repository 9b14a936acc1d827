"""Where a run stands, read from the store: cheap queries that any UI may poll.

Counts come from the ``counts`` table that triggers keep in step with every
item change, so none of these reads scans the items of a large run.
"""

from __future__ import annotations

from typing import Any

from .. import lease
from ..model import UNFINISHED, BreakerState, ItemState
from .sqlite import Store

UNFINISHED_SQL = ", ".join(f"'{state.value}'" for state in UNFINISHED)


def counts(store: Store, run_id: int) -> dict[str, dict[str, int]]:
    """Items by group and state (every state present, zeros included)."""
    groups: dict[str, dict[str, int]] = {}
    for row in store.rows("SELECT grp, state, n FROM counts WHERE run_id = ? AND n > 0 ORDER BY grp", [run_id]):
        groups.setdefault(row["grp"], {s.value: 0 for s in ItemState})[row["state"]] = row["n"]
    return groups


def unfinished(store: Store, run_id: int) -> int:
    """Items that still need work, counted from the store, never from a queue."""
    rows = store.rows(
        f"SELECT coalesce(sum(n), 0) AS n FROM counts WHERE run_id = ? AND state IN ({UNFINISHED_SQL})",
        [run_id],
    )
    return int(rows[0]["n"])


def next_due(store: Store, run_id: int) -> float | None:
    """When the earliest waiting item may be tried again."""
    rows = store.rows(
        "SELECT min(not_before) AS t FROM items WHERE run_id = ? AND state = 'waiting' AND needs_confirmation = 0",
        [run_id],
    )
    due = rows[0]["t"]
    return float(due) if due is not None else None


def status(store: Store, name: str, *, now: float) -> dict[str, Any]:
    """The status contract of the brief, for one run."""
    run_id = store.run_id(name)
    groups = counts(store, run_id)
    totals = {s.value: sum(g[s.value] for g in groups.values()) for s in ItemState}
    (run,) = store.rows("SELECT breaker, breaker_reason FROM runs WHERE id = ?", [run_id])
    (held,) = store.rows(
        "SELECT count(*) AS n FROM items WHERE run_id = ? AND needs_confirmation = 1", [run_id]
    )
    return {
        "run": name,
        "total": sum(totals.values()),
        "counts": totals,
        "groups": groups,
        "breaker": {"state": BreakerState(run["breaker"]).value, "reason": run["breaker_reason"]},
        "needs_confirmation": held["n"],
        "engine": {"alive": lease.alive(store, name, now=now)},
        "duplicate_tasks": len(duplicates(store, run_id)),
    }


def duplicates(store: Store, run_id: int) -> list[dict[str, Any]]:
    """Upstream tasks found beside a batch's own, carrying its reference: each may have billed what it ran."""
    return store.rows(
        "SELECT batch_id, upstream_id, found_at, cancelled, message FROM duplicates WHERE run_id = ? ORDER BY id",
        [run_id],
    )


def failures(store: Store, name: str) -> list[dict[str, Any]]:
    """Failed items with their reason, as the failures contract lists them."""
    run_id = store.run_id(name)
    return [
        {**row, "retryable": bool(row["retryable"])}
        for row in store.rows(
            'SELECT key, grp AS "group", error_kind AS kind, error AS message, attempts, retryable '
            "FROM items WHERE run_id = ? AND state = 'failed' ORDER BY error_kind, seq",
            [run_id],
        )
    ]


# What the TUI polls: each read uses an index or a LIMIT, never a scan of a run's items.

FINISHED_SQL = f"'{ItemState.COMPLETED.value}', '{ItemState.FAILED.value}'"


def runs(store: Store) -> list[dict[str, Any]]:
    """Every run in the store, by name, with its saved job, breaker and a person's controls."""
    return store.rows(
        "SELECT id, name, job, created_at, updated_at, breaker, breaker_reason, paused, steps "
        "FROM runs ORDER BY name"
    )


def held_count(store: Store, run_id: int) -> int:
    """Items held for a person's confirmation (a partial index keeps this cheap)."""
    (row,) = store.rows("SELECT count(*) AS n FROM items WHERE run_id = ? AND needs_confirmation = 1", [run_id])
    return int(row["n"])


def last_event_at(store: Store, run_id: int) -> float | None:
    """When items of the run last changed state (or were added)."""
    rows = store.rows("SELECT at FROM events WHERE run_id = ? ORDER BY id DESC LIMIT 1", [run_id])
    return float(rows[0]["at"]) if rows else None


def finished_since(store: Store, run_id: int, *, since: float, limit: int = 5_000) -> tuple[int, float]:
    """Items that completed or failed after ``since``, and the time from which that count holds.

    Only the run's last ``limit`` events are read (each counts the items it
    moved): when all of them are newer than ``since``, the count holds from
    the oldest of them. When the first event counted is items starting rather
    than finishing, work began (or resumed) then, and the count holds from
    that moment.
    """
    (row,) = store.rows(
        "WITH tail AS (SELECT at, to_state, items FROM events WHERE run_id = ? ORDER BY id DESC LIMIT ?) "
        f"SELECT coalesce(sum(CASE WHEN to_state IN ({FINISHED_SQL}) THEN items END), 0) AS n, "
        "min(CASE WHEN to_state = 'running' THEN at END) AS started, "
        f"min(CASE WHEN to_state IN ({FINISHED_SQL}) THEN at END) AS finished, "
        "(SELECT min(at) FROM tail) AS oldest, (SELECT count(*) FROM tail) AS events "
        "FROM tail WHERE at > ?",
        [run_id, limit, since],
    )
    start = since
    if row["events"] == limit and row["oldest"] > since:
        start = row["oldest"]
    if row["started"] is not None and (row["finished"] is None or row["started"] <= row["finished"]):
        start = max(start, row["started"])
    return int(row["n"]), float(start)


def batches_in_flight(store: Store, run_id: int) -> list[dict[str, Any]]:
    """The run's batches formed or sent and not yet settled, oldest first."""
    return store.rows(
        "SELECT id, grp, state, size, round, retries, upstream_id, created_at, started_at FROM batches "
        "WHERE run_id = ? AND state IN ('queued', 'running') ORDER BY id",
        [run_id],
    )


def event_tail(store: Store, run_id: int, *, limit: int) -> list[dict[str, Any]]:
    """The run's last ``limit`` events, newest first.

    Each moved ``items`` items; an item's own event has its ``key``, a
    batch's move none (and ``parent_id``, the batch it was split from).
    """
    return store.rows(
        "SELECT e.id, e.at, i.key, e.batch_id, b.parent_id, e.from_state, e.to_state, e.kind, e.message, e.items "
        "FROM events e LEFT JOIN items i ON i.id = e.item_id LEFT JOIN batches b ON b.id = e.batch_id "
        "WHERE e.run_id = ? ORDER BY e.id DESC LIMIT ?",
        [run_id, limit],
    )


def command_tail(store: Store, run_id: int, *, limit: int) -> list[dict[str, Any]]:
    """The last ``limit`` commands people gave the run (pause, resume, step, retry, confirm), newest first."""
    return store.rows(
        "SELECT id, created_at AS at, command, args, outcome FROM commands WHERE run_id = ? "
        "ORDER BY id DESC LIMIT ?",
        [run_id, limit],
    )


def failure_kinds(store: Store, run_id: int) -> list[dict[str, Any]]:
    """Failed items by kind, most first: how many, how many a person may retry, and the first one's message."""
    kinds = store.rows(
        "SELECT error_kind AS kind, count(*) AS n, coalesce(sum(retryable), 0) AS retryable, "
        "min(seq) AS first FROM items WHERE run_id = ? AND state = 'failed' "
        "GROUP BY error_kind ORDER BY n DESC, error_kind",
        [run_id],
    )
    for kind in kinds:  # the first one's message: one indexed row per kind
        (first,) = store.rows(
            "SELECT error FROM items WHERE run_id = ? AND state = 'failed' AND error_kind IS ? AND seq = ?",
            [run_id, kind["kind"], kind["first"]],
        )
        kind["message"] = first["error"]
    return kinds


def failed_items(store: Store, run_id: int, *, kind: str, limit: int) -> list[dict[str, Any]]:
    """The first ``limit`` failed items of one kind, in input order."""
    return store.rows(
        'SELECT key, grp AS "group", attempts, paid_calls, maybe_paid, retryable, error AS message '
        "FROM items WHERE run_id = ? AND state = 'failed' AND error_kind = ? ORDER BY seq LIMIT ?",
        [run_id, kind, limit],
    )


def item(store: Store, run_id: int, key: str) -> dict[str, Any] | None:
    """One item as the store keeps it, by key."""
    rows = store.rows(
        'SELECT id, key, grp AS "group", state, attempts, paid_calls, maybe_paid, batch_id, not_before, '
        "(SELECT input FROM inputs WHERE item_id = items.id) AS input, output, result, error_kind AS kind, "
        "error AS message, retryable, needs_confirmation, updated_at FROM items WHERE run_id = ? AND key = ?",
        [run_id, key],
    )
    return rows[0] if rows else None


def item_history(store: Store, item_id: int, *, limit: int = 500) -> list[dict[str, Any]]:
    """An item's state changes, oldest first (its first ``limit``): its own, and its batches'.

    The item's own events (``batch_move`` 0) and the moves of every batch it
    was in (``batch_move`` 1, ``items`` how many of the batch's items moved):
    the batches its own events name, the one it is in, and the batches those
    were split from.
    """
    return store.rows(
        "WITH RECURSIVE own AS (SELECT id, at, batch_id, from_state, to_state, kind, message, items "
        "FROM events WHERE item_id = ?1), "
        "named(batch_id) AS (SELECT batch_id FROM own UNION SELECT batch_id FROM items WHERE id = ?1), "
        "was_in(batch_id) AS (SELECT batch_id FROM named WHERE batch_id IS NOT NULL "
        "UNION SELECT b.parent_id FROM batches b JOIN was_in w ON b.id = w.batch_id WHERE b.parent_id IS NOT NULL) "
        "SELECT id, at, batch_id, from_state, to_state, kind, message, items, 0 AS batch_move FROM own "
        "UNION ALL SELECT id, at, batch_id, from_state, to_state, kind, message, items, 1 FROM events "
        "WHERE item_id IS NULL AND batch_id IN (SELECT batch_id FROM was_in) "
        "ORDER BY id LIMIT ?2",
        [item_id, limit],
    )


# What the notebook API reads when a person asks: whole lists, never polled.


def results(store: Store, run_id: int) -> list[dict[str, Any]]:
    """Completed items with their saved result (JSON text), in input order."""
    return store.rows(
        "SELECT key, grp AS \"group\", result FROM items WHERE run_id = ? AND state = 'completed' ORDER BY seq",
        [run_id],
    )


def history(store: Store, run_id: int) -> list[dict[str, Any]]:
    """Every event of a run, oldest first: ``items`` moved, an item's own with its key, a batch's without."""
    return store.rows(
        "SELECT e.at, i.key, e.batch_id, e.from_state, e.to_state, e.kind, e.message, e.items FROM events e "
        "LEFT JOIN items i ON i.id = e.item_id WHERE e.run_id = ? ORDER BY e.id",
        [run_id],
    )


# A whole run row by row, for scripts and tests: every item, every batch, who holds what.


def items(store: Store, run_id: int) -> list[dict[str, Any]]:
    """Every item of a run in input order: its state, tries, charges, batch, saved output and error."""
    return store.rows(
        'SELECT id, key, grp AS "group", state, attempts, refused, paid_calls, maybe_paid, batch_id, not_before, '
        "output, error_kind AS kind, error AS message, retryable FROM items WHERE run_id = ? ORDER BY seq",
        [run_id],
    )


def batches(store: Store, run_id: int) -> list[dict[str, Any]]:
    """Every batch of a run, oldest first: its group, state, size, the batch it was split from, upstream id and answer."""
    return store.rows(
        'SELECT id, parent_id, grp AS "group", state, size, round, retries, upstream_id, answer, created_at, '
        "started_at, lands_by FROM batches WHERE run_id = ? ORDER BY id",
        [run_id],
    )


def holds(store: Store, run_id: int) -> dict[str, int]:
    """A run's items by what they wait for from a person: ``confirm`` (held), ``confirmed`` (released), ``none``."""
    rows = store.rows(
        "SELECT CASE needs_confirmation WHEN 1 THEN 'confirm' WHEN 2 THEN 'confirmed' ELSE 'none' END AS hold, "
        "count(*) AS n FROM items WHERE run_id = ? GROUP BY hold",
        [run_id],
    )
    return {row["hold"]: row["n"] for row in rows}
