"""The one read model: every question a UI asks, answered from the store.

The CLI, the TUI and the notebook panel render what these functions return
(plain rows, or the frozen dataclasses of :mod:`runner.store.answers`) and
write only commands; none of them reads the store another way. Where a run
stands (:func:`standing`) is assembled once, here, for all of them; the
status contract is its :meth:`~runner.store.answers.Standing.status`.

Counts come from the ``counts`` table that triggers keep in step with every
item change, so none of these reads scans the items of a large run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .. import liveness, words
from ..errors import RunError
from ..model import UNFINISHED, BreakerState, Case, HeldItem, Hold, Holder, ItemState
from ..rules import triage
from ..rules.breaker import Control
from . import event_log
from .answers import (
    STATES,
    BatchInFlight,
    FailedItem,
    FailuresView,
    HeldView,
    HistoryLine,
    ItemView,
    KindCount,
    RunView,
    Standing,
)

from .lists import EXPORT_STATES, RESULT, batches, export_page, history, holds, items, results

if TYPE_CHECKING:
    from .sqlite import Store

__all__ = ["EXPORT_STATES", "batches", "export_page", "history", "holds", "items", "results"]  # from lists

UNFINISHED_SQL = ", ".join(f"'{state.value}'" for state in UNFINISHED)

#: An item held for a person's confirmation, and one the engine may take.
HELD = "hold = 'confirm'"
NOT_HELD = "hold = 'none'"

#: Throughput is counted over this many seconds of the run's latest events.
RATE_WINDOW = 60.0
#: Lines of a run's event log.
EVENT_LINES = 14
#: Failed items of one kind listed at the most.
FAILED_ROWS = 200


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
        f"SELECT min(not_before) AS t FROM items WHERE run_id = ? AND state = 'waiting' AND {NOT_HELD}",
        [run_id],
    )
    due = rows[0]["t"]
    return float(due) if due is not None else None


def status(store: Store, name: str, *, now: float) -> dict[str, Any]:
    """The status contract of the brief, for one run."""
    return standing(store, name, now=now).status()


def standing(store: Store, name: str, *, now: float) -> Standing:
    """Where one run stands: counts, groups, breaker and controls, held items, its engine, last change."""
    return _standing(store, _run(store, name), now=now)


def runs_overview(store: Store, *, now: float) -> tuple[Standing, ...]:
    """Where every run in the store stands, by name."""
    return tuple(_standing(store, run, now=now) for run in runs(store))


def engine_alive(store: Store, name: str, *, now: float) -> bool:
    """Whether a live engine runs ``name``: who will obey a command written now."""
    return _lives(store.holder(name), now)


def _lives(holder: Holder | None, now: float) -> bool:
    return holder is not None and liveness.lives(holder, now)


def _standing(store: Store, run: Mapping[str, Any], *, now: float) -> Standing:
    groups = counts(store, run["id"])
    last = last_event_at(store, run["id"])
    holder = store.holder(run["name"])  # an engine gives its lease back when it ends: one left behind died
    alive = _lives(holder, now)
    return Standing(
        name=run["name"], counts={state: sum(group[state] for group in groups.values()) for state in STATES},
        groups=groups, control=_control(run), held=held_count(store, run["id"]), engine_alive=alive,
        duplicate_tasks=len(duplicates(store, run["id"])), idle_for=None if last is None else now - last,
        engine_silent_for=None if holder is None or alive else now - holder.heartbeat_at,
        paid_calls=run["paid_calls"], maybe_paid=run["maybe_paid"],
    )


def _run(store: Store, name: str) -> dict[str, Any]:
    """The run's row, by name; a name the store does not have raises the core's RunError, listing the runs."""
    (run,) = store.rows(f"SELECT {RUN_COLUMNS} FROM runs WHERE id = ?", [store.run_id(name)])
    return run


def _control(run: Mapping[str, Any]) -> Control:
    return Control(
        BreakerState(run["breaker"]), run["breaker_reason"], run["transport_failures"], bool(run["paused"]),
        run["steps"],
    )


def duplicates(store: Store, run_id: int) -> list[dict[str, Any]]:
    """Upstream tasks found beside a batch's own, carrying its reference: each may have billed what it ran."""
    return store.rows(
        "SELECT batch_id, upstream_id, found_at, cancelled, message FROM duplicates WHERE run_id = ? ORDER BY id",
        [run_id],
    )


def failures(store: Store, name: str) -> list[dict[str, Any]]:
    """Failed items with their reason, as the failures contract lists them, and the calls each paid or may have."""
    run_id = store.run_id(name)
    return [
        {**row, "retryable": bool(row["retryable"])}
        for row in store.rows(
            'SELECT key, grp AS "group", error_kind AS kind, error AS message, attempts, retryable, paid_calls, '
            "maybe_paid FROM items WHERE run_id = ? AND state = 'failed' ORDER BY error_kind, seq",
            [run_id],
        )
    ]


# What the TUI polls: each read uses an index or a LIMIT, never a scan of a run's items.

FINISHED_SQL = f"'{ItemState.COMPLETED.value}', '{ItemState.FAILED.value}'"
RUN_COLUMNS = (
    "id, name, job, created_at, updated_at, breaker, breaker_reason, transport_failures, paused, steps, "
    "paid_calls, maybe_paid, input_read_at"
)


def runs(store: Store) -> list[dict[str, Any]]:
    """Every run in the store, by name: its saved job, breaker, a person's controls, paid totals, input last read."""
    return store.rows(f"SELECT {RUN_COLUMNS} FROM runs ORDER BY name")


def held_count(store: Store, run_id: int) -> int:
    """Items held for a person's confirmation (the partial index on exactly this condition keeps it cheap)."""
    (row,) = store.rows(f"SELECT count(*) AS n FROM items WHERE run_id = ? AND {HELD}", [run_id])
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
        f"(SELECT input FROM inputs WHERE item_id = items.id) AS input, output, {RESULT} AS result, "
        "error_kind AS kind, error AS message, retryable, hold, updated_at "
        "FROM items WHERE run_id = ? AND key = ?",
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


# What the screens show: each assembled from the reads above.


def run_view(store: Store, name: str, *, now: float) -> RunView:
    """One run: where it stands, batches in flight, throughput and the log's tail."""
    from ..jobs import Job  # here: the CLI's read-only commands never load the job file's parser

    run = _run(store, name)
    job = Job.from_json(run["job"])
    finished, since = finished_since(store, run["id"], since=now - RATE_WINDOW)
    standing = _standing(store, run, now=now)
    return RunView(
        standing=standing, concurrency=job.batch.concurrency,
        provider=job.provider.describe(), go_on=words.go_on(job, store.path),
        batches=tuple(_batch(row, now) for row in batches_in_flight(store, run["id"])),
        log=event_log.lines(
            event_tail(store, run["id"], limit=EVENT_LINES * 25), command_tail(store, run["id"], limit=EVENT_LINES),
            now=now, limit=EVENT_LINES,
        ),
        per_minute=finished / max(now - since, 1.0) * 60.0,
        took=None if standing.engine_alive else work_span(store, run["id"]),
    )


def failures_view(store: Store, name: str, *, kind: str | None, limit: int = FAILED_ROWS) -> FailuresView:
    """Failed items by kind, and the first ``limit`` items of ``kind`` (or, not failed now, of the largest kind)."""
    run_id = store.run_id(name)
    kinds = tuple(
        KindCount(row["kind"] or "unknown", row["n"], row["retryable"], row["message"] or "")
        for row in failure_kinds(store, run_id)
    )
    if kind not in {k.kind for k in kinds}:
        kind = kinds[0].kind if kinds else None
    rows = failed_items(store, run_id, kind=kind, limit=limit) if kind else []
    items = tuple(
        FailedItem(r["key"], r["group"], r["attempts"], r["paid_calls"], r["maybe_paid"], bool(r["retryable"]),
                   r["message"] or "")
        for r in rows
    )
    return FailuresView(name, kinds, kind, items)


def item_view(store: Store, name: str, key: str, *, now: float) -> ItemView:
    """One item of a run in full, with its history from the events table."""
    row = item(store, store.run_id(name), key)
    if row is None:
        raise RunError(f"run {name!r} has no item {key!r}")
    history = tuple(
        HistoryLine(h["at"], now - h["at"], h["batch_id"], h["from_state"], h["to_state"], h["kind"], h["message"],
                    h["items"] if h["batch_move"] else None)
        for h in item_history(store, row["id"])
    )
    return ItemView(
        run=name, key=row["key"], group=row["group"], state=row["state"], attempts=row["attempts"],
        paid_calls=row["paid_calls"], maybe_paid=row["maybe_paid"], held=row["hold"] == Hold.CONFIRM,
        input=row["input"], output=row["output"], result=row["result"], kind=row["kind"], message=row["message"],
        retryable=None if row["retryable"] is None else bool(row["retryable"]), history=history,
    )


def held_view(store: Store, name: str, *, now: float) -> HeldView:
    """The items held for a person on a run, each with its case (what confirming it does)."""
    return HeldView(name, engine_alive(store, name, now=now), tuple(held(store, name)))


def _batch(row: Mapping[str, Any], now: float) -> BatchInFlight:
    since = row["started_at"] if row["started_at"] is not None else row["created_at"]
    return BatchInFlight(
        id=row["id"], group=row["grp"], state=row["state"], size=row["size"], age=now - since,
        upstream_id=row["upstream_id"], retries=row["retries"], round=row["round"],
    )


def held(store: Store, name: str) -> list[HeldItem]:
    """The items of a run that wait for a person, with their case."""
    return [_held_item(row, case_of(row)) for row in store.held_items(store.run_id(name))]


def _held_item(row: dict[str, Any], case: Case) -> HeldItem:
    lands_by = row["lands_by"] if case is Case.ADOPT else None
    return HeldItem(row["key"], row["grp"], case, row["upstream_id"], row["attempts"], row["paid_calls"], lands_by)


def case_of(row: dict[str, Any]) -> Case:
    """What confirming a held item does (a held task's create was sent, or its items would be pending)."""
    left = triage.Left(sent=True, task_id_saved=bool(row["upstream_id"]), create_sent=bool(row["submits"]))
    return Case(triage.on_confirm(left))
