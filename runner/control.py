"""A person's hand on a run: pause, resume, step, retry.

The CLI, the TUI and the notebook panel all call these; none of them holds a
rule. Each command is one transaction that logs it in ``commands`` and
changes the run's control row, which the engine holding the run reads on
every turn of its loop (about twice a second), whatever process it lives in.
Without a live engine, the change waits in the store for the next one.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import replace

from . import breaker
from .breaker import Control
from .errors import RunError
from .store import Store


def pause(store: Store, name: str, *, now: float) -> Control:
    """Stop starting batches; batches in flight finish."""
    return _apply(store, name, "pause", now, lambda c: replace(c, paused=True))


def resume(store: Store, name: str, *, now: float) -> Control:
    """Lift a pause or an open breaker: one batch at a time until one succeeds."""
    return _apply(store, name, "resume", now, breaker.resumed)


def step(store: Store, name: str, *, now: float) -> Control:
    """Let exactly one more batch start while paused or open; the run stays held."""

    def one_more(control: Control) -> Control:
        if not control.held:
            raise RunError(f"run {name!r} is not paused and its breaker is not open: nothing to step")
        return replace(control, steps=control.steps + 1)

    return _apply(store, name, "step", now, one_more)


def retry(store: Store, name: str, *, now: float, kind: str | None = None, keys: Sequence[str] = ()) -> int:
    """Send failed items again (all, one kind, or some keys), each with a fresh attempt budget."""
    run_id = store.run_id(name)
    args = {"kind": kind, "keys": json.dumps(list(keys))}
    with store.write() as conn:
        released = conn.execute(
            "UPDATE items SET state = 'pending', retry_base = attempts - refused, refused_streak = 0, batch_id = NULL, "
            "error_kind = NULL, error = NULL, retryable = NULL, not_before = NULL, updated_at = :now "
            "WHERE run_id = :run AND state = 'failed' AND (:kind IS NULL OR error_kind = :kind) "
            "AND (:keys = '[]' OR key IN (SELECT value FROM json_each(:keys))) RETURNING id",
            {**args, "run": run_id, "now": now},
        ).fetchall()
        _log(conn, run_id, "retry", json.dumps({"kind": kind, "keys": list(keys)}), now, f"{len(released)} items")
    return len(released)


def _apply(store: Store, name: str, command: str, now: float, change: Callable[[Control], Control]) -> Control:
    run_id = store.run_id(name)
    with store.write() as conn:
        control = change(store.control(run_id))
        store.write_control(conn, run_id, control)
        _log(conn, run_id, command, "{}", now, f"{control.breaker.value}, paused={control.paused}")
    return control


def _log(conn: sqlite3.Connection, run_id: int, command: str, args: str, now: float, outcome: str) -> None:
    conn.execute(
        "INSERT INTO commands (run_id, command, args, created_at, done_at, outcome) VALUES (?, ?, ?, ?, ?, ?)",
        (run_id, command, args, now, now, outcome),
    )
