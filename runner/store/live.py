"""The reads behind a run's live screens, which the TUI repeats twice a second: throughput, batches in flight,
the tails of its events and commands, its failures by kind, and one item with its history.

Each read uses an index or a LIMIT, never a scan of a run's items, so that a
screen read again twice a second stays cheap on a run of a million items.
:mod:`runner.store.views` assembles the screens from them (and re-exports them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..model import ItemState
from .lists import RESULT, STAGES

if TYPE_CHECKING:
    from .sqlite import Store

FINISHED_SQL = f"'{ItemState.COMPLETED.value}', '{ItemState.FAILED.value}'"
#: An event of items done with a stage: completed or failed, or moved on to the next stage with the stage's answer
#: (from ``received``) or a person's decision or a join (from ``waiting``): in a pipeline, items move on for a long
#: while before any completes, and throughput counts them.
THROUGH_SQL = (f"(to_state IN ({FINISHED_SQL}) OR to_stage IS NOT NULL AND to_state = 'pending' "
               "AND from_state IN ('received', 'waiting'))")
#: Throughput is counted over this many seconds of the run's latest events.
RATE_WINDOW = 60.0


def finished_since(store: Store, run_id: int, *, since: float, limit: int = 5_000) -> tuple[int, float]:
    """Items that completed or failed after ``since`` (or a pipeline's passed a stage: :data:`THROUGH_SQL`), and the
    time from which that count holds.

    Only the run's last ``limit`` events are read (each counts the items it
    moved): when all of them are newer than ``since``, the count holds from
    the oldest of them. When the first event counted is items starting rather
    than finishing, work began (or resumed) then, and the count holds from
    that moment.
    """
    (row,) = store.rows(
        "WITH tail AS (SELECT at, from_state, to_state, to_stage, items FROM events WHERE run_id = ? "
        "ORDER BY id DESC LIMIT ?) "
        f"SELECT coalesce(sum(CASE WHEN {THROUGH_SQL} THEN items END), 0) AS n, "
        "min(CASE WHEN to_state = 'running' THEN at END) AS started, "
        f"min(CASE WHEN {THROUGH_SQL} THEN at END) AS finished, "
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


def pace(store: Store, run_id: int, *, now: float) -> float:
    """Items of the run done with a stage (a run of one stage: completed or failed) per minute, over its last
    :data:`RATE_WINDOW` seconds of events."""
    finished, since = finished_since(store, run_id, since=now - RATE_WINDOW)
    return finished / max(now - since, 1.0) * 60.0


def work_span(store: Store, run_id: int) -> float | None:
    """Seconds from the run's first item started to its last one finished (None before one finished).

    Two index walks of the run's events, from each end, each stopping at its first match.
    """
    (row,) = store.rows(
        "SELECT (SELECT at FROM events WHERE run_id = ?1 AND to_state = 'running' ORDER BY id LIMIT 1) AS first, "
        f"(SELECT at FROM events WHERE run_id = ?1 AND to_state IN ({FINISHED_SQL}) ORDER BY id DESC LIMIT 1) AS last",
        [run_id],
    )
    return None if row["first"] is None or row["last"] is None else max(row["last"] - row["first"], 0.0)


def batches_in_flight(store: Store, run_id: int) -> list[dict[str, Any]]:
    """The run's batches formed or sent and not yet settled, oldest first."""
    return store.rows(
        "SELECT id, grp, state, size, round, retries, upstream_id, created_at, started_at, stage FROM batches "
        "WHERE run_id = ? AND state IN ('queued', 'running') ORDER BY id",
        [run_id],
    )


def batches_upstream(store: Store, run_id: int) -> int:
    """The run's batches an upstream holds as tasks (sent, their task id saved), waiting for their results."""
    return int(store.rows(
        "SELECT COUNT(*) AS n FROM batches WHERE run_id = ? AND state = 'running' AND upstream_id IS NOT NULL", [run_id]
    )[0]["n"])


def event_tail(store: Store, run_id: int, *, limit: int) -> list[dict[str, Any]]:
    """The run's last ``limit`` events, newest first.

    Each moved ``items`` items; an item's own event has its ``key``, a
    batch's move none (and ``parent_id``, the batch it was split from).
    """
    return store.rows(
        "SELECT e.id, e.at, i.key, e.batch_id, b.parent_id, e.from_state, e.to_state, e.kind, e.message, e.items, "
        "e.stage, e.to_stage "
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
            "SELECT error FROM items WHERE run_id = ? AND state = 'failed' AND error_kind IS NOT DISTINCT FROM ? "
            "AND seq = ?",
            [run_id, kind["kind"], kind["first"]],
        )
        kind["message"] = first["error"]
    return kinds


def failed_items(store: Store, run_id: int, *, kind: str, limit: int) -> list[dict[str, Any]]:
    """The first ``limit`` failed items of one kind, in input order, with the stage each failed at."""
    return store.rows(
        'SELECT key, grp AS "group", attempts, paid_calls, maybe_paid, retryable, error AS message, stage '
        "FROM items WHERE run_id = ? AND state = 'failed' AND error_kind = ? ORDER BY seq LIMIT ?",
        [run_id, kind, limit],
    )


def item(store: Store, run_id: int, key: str) -> dict[str, Any] | None:
    """One item as the store keeps it, by key."""
    rows = store.rows(
        'SELECT id, key, grp AS "group", state, attempts, paid_calls, maybe_paid, batch_id, not_before, '
        f"(SELECT input FROM inputs WHERE item_id = items.id) AS input, output, {RESULT} AS result, "
        "error_kind AS kind, error AS message, retryable, hold, updated_at, stage, "
        f"{STAGES} AS results FROM items WHERE run_id = ? AND key = ?",
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
        "WITH RECURSIVE own AS (SELECT id, at, batch_id, from_state, to_state, kind, message, items, stage, to_stage "
        "FROM events WHERE item_id = ?1), "
        "named(batch_id) AS (SELECT batch_id FROM own UNION SELECT batch_id FROM items WHERE id = ?1), "
        "was_in(batch_id) AS (SELECT batch_id FROM named WHERE batch_id IS NOT NULL "
        "UNION SELECT b.parent_id FROM batches b JOIN was_in w ON b.id = w.batch_id WHERE b.parent_id IS NOT NULL) "
        "SELECT id, at, batch_id, from_state, to_state, kind, message, items, stage, to_stage, 0 AS batch_move "
        "FROM own UNION ALL SELECT id, at, batch_id, from_state, to_state, kind, message, items, stage, to_stage, 1 "
        "FROM events "
        "WHERE item_id IS NULL AND batch_id IN (SELECT batch_id FROM was_in) "
        "ORDER BY id LIMIT ?2",
        [item_id, limit],
    )


def waiting_decisions(store: Store, run_id: int, *, limit: int) -> list[dict[str, Any]]:
    """Items waiting at a decide stage (the first ``limit``, in input order): key, group, stage, input and the
    results of the stages they passed (JSON texts); the partial index of those items keeps it cheap."""
    return store.rows(
        'SELECT key, grp AS "group", stage, (SELECT input FROM inputs WHERE item_id = items.id) AS input, '
        "(SELECT coalesce(@object_agg(stage, @json(result)), '{}') FROM results WHERE item_id = items.id) "
        "AS results FROM items WHERE run_id = ? AND hold = 'decide' ORDER BY seq LIMIT ?",
        [run_id, limit],
    )


def scheduled(store: Store, run_id: int) -> tuple[int, float | None]:
    """Items waiting for their scheduled time, and the earliest such time (the partial index on this condition)."""
    (row,) = store.rows("SELECT count(*) AS n, min(not_before) AS t FROM items "
                        "WHERE run_id = ? AND hold = 'scheduled'", [run_id])
    return int(row["n"]), None if row["t"] is None else float(row["t"])
