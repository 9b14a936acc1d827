"""Where a run stands, read from the store: cheap queries that any UI may poll.

Counts come from the ``counts`` table that triggers keep in step with every
item change, so none of these reads scans the items of a large run.
"""

from __future__ import annotations

from typing import Any

from . import lease
from .states import BreakerState, ItemState
from .store import Store

UNFINISHED_SQL = ", ".join(f"'{s.value}'" for s in (
    ItemState.PENDING, ItemState.QUEUED, ItemState.WAITING, ItemState.RUNNING, ItemState.RECEIVED
))


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
    }


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
