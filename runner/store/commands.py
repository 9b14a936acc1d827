"""A person's hand on a run, as the store keeps it: the control row, retries, confirmations, and the log of commands.

Each verb is one transaction that logs its command in ``commands``; what a
command does to the control row (pause, resume, step) is the rules' to say
(``change``), and the engine holding the run reads the row on every turn.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import RunError, StoreError
from ..model import BreakerState, FailureKind
from ..rules.breaker import Control
from ..rules.cancelling import BY_A_PERSON, IN_FLIGHT
from .connection import SQLiteFile
from . import items
from .items import move

#: Items of a run (``:run``), all or those whose key is in ``:keys`` (a JSON list; empty: all), with the sub-items
#: of a named parent of a fan-out (a parent's cancel, retry or confirmation is its sub-items' too).
CHOSEN = (
    "items.run_id = :run AND (:keys = '[]' OR items.key IN (SELECT value FROM json_each(:keys)) "
    "OR items.parent_id IN (SELECT named.id FROM items AS named WHERE named.run_id = :run "
    "AND named.key IN (SELECT value FROM json_each(:keys))))"
)

#: The keys in ``:keys`` (a JSON list) that no item of the run ``:run`` has.
UNKNOWN_KEYS = """
SELECT value AS key FROM json_each(:keys)
WHERE value NOT IN (SELECT key FROM items WHERE run_id = :run) ORDER BY key LIMIT 6
"""

#: The failed items a retry takes: of kind ``:kind``, or (none given) any but those a person cancelled,
#: unless their ``:keys`` name them.
RETRIED_KIND = (
    "(items.error_kind = :kind OR (:kind IS NULL AND (:keys != '[]' OR items.error_kind IS NOT 'cancelled')))"
)

#: Items a cancel fails at once: not in flight (pending, queued, waiting, or held for a person's confirmation).
NOT_IN_FLIGHT = "(items.state IN ('pending', 'queued', 'waiting') OR (items.state = 'running' AND items.hold != 'none'))"

LOG_COMMAND = """
INSERT INTO commands (run_id, command, args, created_at, done_at, outcome) VALUES (?, ?, ?, ?, ?, ?)
"""


class Commands(SQLiteFile):
    """The verbs of a person's commands, and the control row the engine reads."""

    def control(self, run_id: int) -> Control:
        """The run's breaker and a person's controls (read by the engine before every start: plain sqlite3)."""
        try:
            (breaker, kind, reason, failures, paused, steps), = self.conn.execute(
                "SELECT breaker, breaker_kind, breaker_reason, transport_failures, paused, steps FROM runs "
                "WHERE id = ?", (run_id,)
            ).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: store read failed ({exc})") from exc
        return Control(BreakerState(breaker), reason, failures, bool(paused), steps,
                       FailureKind(kind) if kind else None)

    def write_control(self, conn: sqlite3.Connection, run_id: int, control: Control) -> None:
        """Write the breaker and controls inside the caller's transaction."""
        conn.execute(
            "UPDATE runs SET breaker = ?, breaker_kind = ?, breaker_reason = ?, transport_failures = ?, "
            "paused = ?, steps = ? WHERE id = ?",
            (control.breaker, control.kind, control.reason, control.transport_failures, int(control.paused),
             control.steps, run_id),
        )

    def open_breaker(self, run_id: int, kind: FailureKind, reason: str) -> None:
        """Open the breaker on its own, keeping a person's pause and steps."""
        with self.write() as conn:
            conn.execute("UPDATE runs SET breaker = 'open', breaker_kind = ?, breaker_reason = ? WHERE id = ?",
                         (kind, reason, run_id))

    def command(self, run_id: int, command: str, change: Callable[[Control], Control], *, now: float) -> Control:
        """A person's ``command`` on the control row, as ``change`` makes it (it may refuse by raising)."""
        with self.write() as conn:
            control = change(self.control(run_id))
            self.write_control(conn, run_id, control)
            conn.execute(LOG_COMMAND, (run_id, command, "{}", now, now,
                                       f"{control.breaker.value}, paused={control.paused}"))
        return control

    def retry_failed(self, run_id: int, *, kind: str | None, keys: Sequence[str], now: float) -> int:
        """Failed items (all, one kind, or some keys) back to pending, each with a fresh attempt budget.

        Items a person cancelled are retried only when named: by their kind or their keys.
        """
        params = {"run": run_id, "kind": kind, "keys": json.dumps(list(keys)), "now": now}
        with self.write() as conn:
            self.refuse_unknown(run_id, keys)
            released = move(conn, "retry_failed", where=f"{CHOSEN} AND {RETRIED_KIND}",
                            values=items.FRESH_BUDGET,
                            params=params, returning="id")
            if released:  # a retry that found nothing to retry changed nothing: no command to log
                conn.execute(LOG_COMMAND, (run_id, "retry", json.dumps({"kind": kind, "keys": list(keys)}), now, now,
                                           f"{len(released)} items"))
        return len(released)

    def refuse_unknown(self, run_id: int, keys: Sequence[str]) -> None:
        """Refuse keys that no item of the run has (``RunError`` naming the first of them); a read, in any transaction."""
        unknown = [row["key"] for row in self.rows(UNKNOWN_KEYS, {"run": run_id, "keys": json.dumps(list(keys))})]
        if unknown:
            (run,) = self.rows("SELECT name FROM runs WHERE id = ?", [run_id])
            listed = ", ".join(repr(key) for key in unknown[:5]) + (", ..." if len(unknown) > 5 else "")
            raise RunError(f"run {run['name']!r} has no item{'s' if len(unknown) > 1 else ''} {listed}: "
                           "nothing was changed")

    def held_items(self, run_id: int) -> list[dict[str, Any]]:
        """The items held for a person, in order, with what their batch knows of its task."""
        return self.rows(
            "SELECT i.key, i.grp, b.upstream_id, b.submits, b.lands_by, i.attempts, i.paid_calls FROM items i "
            "LEFT JOIN batches b ON b.id = i.batch_id "
            "WHERE i.run_id = ? AND i.hold = 'confirm' ORDER BY i.seq",
            [run_id],
        )

    def confirm(self, run_id: int, *, keys: Sequence[str], now: float) -> tuple[int, int, int]:
        """Release held items (all, or ``keys``): (to poll their saved task, to look for it, sent again)."""
        params = {"run": run_id, "keys": json.dumps(list(keys)), "now": now,
                  "again": "confirmed by a person: sent again, may charge twice"}
        with self.write() as conn:
            self.refuse_unknown(run_id, keys)
            polled = move(conn, "confirm", params=params, returning="id", where=(
                f"{CHOSEN} AND items.batch_id IN (SELECT id FROM batches WHERE upstream_id IS NOT NULL)"))
            adopted = move(conn, "confirm", params=params, returning="id", where=(
                f"{CHOSEN} AND items.batch_id IN (SELECT id FROM batches WHERE submits = 1)"))
            resent = move(conn, "resend", where=CHOSEN, values={"error": "error = :again"}, params=params,
                          returning="id")
            if polled or adopted or resent:  # a confirm that released nothing changed nothing: no command to log
                outcome = f"{len(polled)} to poll, {len(adopted)} to look for, {len(resent)} sent again"
                conn.execute(LOG_COMMAND, (run_id, "confirm", params["keys"], now, now, outcome))
        return len(polled), len(adopted), len(resent)


    def cancel(self, run_id: int, *, keys: Sequence[str], now: float, engine_alive: bool) -> tuple[int, int]:
        """Fail unfinished items (all, or ``keys``) as ``cancelled``: (failed now, failing when their batch ends).

        Items not in flight fail at once. An item in flight (running, or
        received and not yet validated) is marked, and fails when its batch
        settles, unless its answer completes it (``rules.cancelling``); with
        no ``engine_alive`` to settle it, it fails now, its call counted as
        maybe billed. One transaction, logged as the command ``cancel``.
        """
        params = {"run": run_id, "keys": json.dumps(list(keys)), "now": now}
        with self.write() as conn:
            self.refuse_unknown(run_id, keys)
            failed = move(conn, "cancel", where=f"{CHOSEN} AND {NOT_IN_FLIGHT}", values=items.CANCELLED,
                          params={**params, "message": BY_A_PERSON}, returning="id")
            unmarked = f"{CHOSEN} AND items.error_kind IS NOT 'cancelled'"
            marked = [*move(conn, "cancel_running", where=unmarked, values=items.CANCEL_MARK,
                            params={**params, "message": IN_FLIGHT}, returning="id"),
                      *move(conn, "cancel_received", where=unmarked, values=items.CANCEL_MARK,
                            params={**params, "message": IN_FLIGHT}, returning="id")]
            left = 0
            if not engine_alive:
                items.count_maybe_paid_held(conn, run_id, cancelled=True)
                left = items.fail_left_cancelled(conn, CHOSEN, params)
                left += len(move(conn, "cancel", where=f"{CHOSEN} AND items.state = 'received' AND "
                                 "items.error_kind = 'cancelled'", values=items.CANCELLED,
                                 params={**params, "message": items.ENGINE_GONE}, returning="id"))
            now_failed, later = len(failed) + left, len(marked) if engine_alive else 0
            if now_failed or later:  # a cancel that found nothing unfinished changed nothing: no command to log
                conn.execute(LOG_COMMAND, (run_id, "cancel", json.dumps({"keys": list(keys)}), now, now,
                                           f"{now_failed} failed, {later} when their batch ends"))
        return now_failed, later

    def compensated(self, run_id: int, *, keys: Sequence[str], errors: int, now: float) -> None:
        """Log that a person's ``on_cancel`` ran for cancelled items (``errors`` of them raised): never again for them."""
        with self.write() as conn:
            conn.execute(LOG_COMMAND, (run_id, "on_cancel", json.dumps({"keys": list(keys)}), now, now,
                                       f"{len(keys)} items, {errors} raised"))
