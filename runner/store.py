"""The run store: one SQLite file that knows every item's state.

Every method that changes state is one ``BEGIN IMMEDIATE`` transaction, so a
crash leaves either all of a step or none of it. Connections run in WAL mode
with ``synchronous=FULL`` (a committed ``running`` survives a power loss, not
only a process crash) and a busy timeout, so that engines, the TUI and
notebook panels in other processes share the file. The hot transitions are
fixed SQL on the connection; sqlite-utils serves the queries.

Time is passed in (``now``, seconds since the epoch), never read here.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlite_utils

from . import schema
from .errors import RunError, StoreError
from .jobs import ItemRow, Job
from .breaker import Control
from .states import BatchState, BreakerState, FailureKind, ItemState

#: A heartbeat older than this means the engine holding the run is dead.
LEASE_SECONDS = 15.0
INSERT_CHUNK = 1_000


@dataclass(frozen=True)
class Batch:
    """A batch as formed: its id, group and item count."""

    id: int
    group: str
    size: int
    chars: int
    #: How often the items were split: 0 as formed, 1 halves, 2 single items.
    round: int = 0


@dataclass(frozen=True)
class StartedItem:
    """An item marked running, with what must be sent for it."""

    id: int
    key: str
    input: str
    #: Attempts left before this one counts against the bound (a person's retry resets it).
    attempts_left: int


@dataclass
class Settlement:
    """How a batch ends, item by item; applied in one transaction."""

    completed: dict[int, str] = field(default_factory=dict)
    #: item id -> (kind, message): tried again after ``not_before``, within the attempt bound.
    retry: dict[int, tuple[FailureKind, str]] = field(default_factory=dict)
    #: item id -> (kind, message, retryable by a person).
    failed: dict[int, tuple[FailureKind, str, bool]] = field(default_factory=dict)
    #: Item ids to send again at once in new, smaller batches (a wholly invalid answer).
    split: list[list[int]] = field(default_factory=list)
    not_before: float = 0.0
    #: How this batch moves the breaker, applied to its state inside the same transaction.
    breaker: Callable[[Control], Control] | None = None


class Store:
    """One run store file; open it with ``Store(path)``."""

    def __init__(self, path: str | Path, *, busy_timeout: float = 10.0) -> None:
        self.path = Path(path)
        try:
            conn = sqlite3.connect(self.path, timeout=busy_timeout, isolation_level=None)
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("PRAGMA foreign_keys = ON")
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: cannot open as a run store ({exc})") from exc
        self.db = sqlite_utils.Database(conn)
        self.conn = conn
        self._migrate()

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _migrate(self) -> None:
        with self.write():
            version = self.conn.execute("PRAGMA user_version").fetchone()[0]
            if version > schema.SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path}: written by a newer runner (schema {version}, this one knows "
                    f"{schema.SCHEMA_VERSION})"
                )
            for statements in schema.MIGRATIONS[version:]:
                for statement in statements:
                    self.conn.execute(statement)
            self.conn.execute(f"PRAGMA user_version = {schema.SCHEMA_VERSION}")

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; a sqlite3 failure becomes a StoreError and rolls back."""
        try:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
                self.conn.execute("COMMIT")
            except BaseException:
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: store write failed ({exc})") from exc

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        try:
            return list(self.db.query(sql, params))
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: store read failed ({exc})") from exc

    # Runs ---------------------------------------------------------------

    def prepare_run(self, job: Job, items: Iterable[ItemRow], *, now: float) -> int:
        """Create or continue the run ``job.name`` and add its items, in one transaction.

        New keys are added as pending; unchanged items are kept as they are.
        An item whose input fingerprint changed takes the new input; if it had
        already been sent or answered it becomes ``failed`` (input_changed), so
        that an old result is never taken for the new input and no new call is
        made without a person's retry. Any error leaves the store untouched.
        """
        with self.write() as conn:
            (run_id,) = conn.execute(
                "INSERT INTO runs (name, job, created_at, updated_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (name) DO UPDATE SET job = excluded.job, updated_at = excluded.updated_at "
                "RETURNING id",
                (job.name, job.to_json(), now, now),
            ).fetchone()
            chunk: list[tuple[Any, ...]] = []
            for row in items:
                chunk.append((run_id, row.key, row.group, row.seq, row.input, row.chars, row.fingerprint, now))
                if len(chunk) == INSERT_CHUNK:
                    conn.executemany(UPSERT_ITEM, chunk)
                    chunk.clear()
            conn.executemany(UPSERT_ITEM, chunk)
        return int(run_id)

    def run_id(self, name: str) -> int:
        rows = self._rows("SELECT id FROM runs WHERE name = ?", [name])
        if not rows:
            known = ", ".join(self.run_names()) or "none"
            raise RunError(f"no run named {name!r} in {self.path} (runs: {known})")
        return int(rows[0]["id"])

    def run_names(self) -> list[str]:
        return [r["name"] for r in self._rows("SELECT name FROM runs ORDER BY name")]

    def job(self, name: str) -> Job:
        """The resolved job saved for a run, to continue it by name."""
        self.run_id(name)
        (row,) = self._rows("SELECT job FROM runs WHERE name = ?", [name])
        return Job.from_json(row["job"])

    # The engine's transitions ---------------------------------------------

    def claim_batch(self, run_id: int, *, max_items: int, max_chars: int, now: float) -> Batch | None:
        """Form the next batch of one group (due waiting items first) and mark it queued.

        An item larger than ``max_chars`` on its own can never be sent within
        the limit: it fails as bad_request, with no call.
        """
        with self.write() as conn:
            while True:
                candidates = conn.execute(CLAIM_DUE_WAITING, (run_id, now, max_items)).fetchall()
                if not candidates:
                    candidates = conn.execute(CLAIM_PENDING, (run_id, max_items)).fetchall()
                if not candidates:
                    return None
                group, chosen, chars = _fill(candidates, max_chars)
                if chosen:
                    break
                item_id, _, item_chars = candidates[0]
                message = f"item is {item_chars} characters, over batch.max_chars ({max_chars})"
                conn.execute(FAIL_ONE, (FailureKind.BAD_REQUEST, message, now, item_id))
            (batch_id,) = conn.execute(
                "INSERT INTO batches (run_id, grp, state, size, chars, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
                (run_id, group, BatchState.QUEUED, len(chosen), chars, now),
            ).fetchone()
            conn.execute(
                "UPDATE items SET state = 'queued', batch_id = ?, updated_at = ? "
                "WHERE id IN (SELECT value FROM json_each(?))",
                (batch_id, now, json.dumps(chosen)),
            )
        return Batch(id=int(batch_id), group=group, size=len(chosen), chars=chars)

    def start_batch(
        self, batch_id: int, *, max_attempts: int, now: float, step: bool = False
    ) -> list[StartedItem]:
        """Mark a queued batch's items running, attempts + 1, before any upstream call.

        ``step`` spends one of the steps a person allowed while the run is held.
        """
        with self.write() as conn:
            rows = conn.execute(
                "UPDATE items SET state = 'running', attempts = attempts + 1, updated_at = ? "
                "WHERE batch_id = ? AND state = 'queued' "
                "RETURNING id, key, input, ? - (attempts - retry_base)",
                (now, batch_id, max_attempts),
            ).fetchall()
            conn.execute(
                "UPDATE batches SET state = ?, started_at = ? WHERE id = ?",
                (BatchState.RUNNING, now, batch_id),
            )
            if step:
                conn.execute(
                    "UPDATE runs SET steps = steps - 1 WHERE id = (SELECT run_id FROM batches WHERE id = ?)",
                    (batch_id,),
                )
        return [StartedItem(*row) for row in rows]

    def count_request_retry(self, batch_id: int) -> None:
        """One more request retry inside the batch's attempt."""
        with self.write() as conn:
            conn.execute("UPDATE batches SET retries = retries + 1 WHERE id = ?", (batch_id,))

    def record_answer(self, batch_id: int, outputs: Mapping[int, str], *, now: float) -> None:
        """Save a billed answer: every item of the batch paid one call; those answered become received."""
        with self.write() as conn:
            conn.execute(
                "UPDATE items SET paid_calls = paid_calls + 1 WHERE batch_id = ? AND state = 'running'",
                (batch_id,),
            )
            conn.executemany(
                "UPDATE items SET state = 'received', output = ?, updated_at = ? "
                "WHERE id = ? AND state = 'running'",
                [(output, now, item_id) for item_id, output in outputs.items()],
            )

    def settle_batch(
        self, batch_id: int, settlement: Settlement, *, max_attempts: int, now: float
    ) -> list[Batch]:
        """Apply a batch's outcome and release it: completed, re-attempted, split or failed.

        Returns the new batches a split formed, already queued.
        """
        with self.write() as conn:
            conn.executemany(
                "UPDATE items SET state = 'completed', result = ?, error_kind = NULL, error = NULL, "
                "retryable = NULL, updated_at = ? WHERE id = ?",
                [(result, now, item_id) for item_id, result in settlement.completed.items()],
            )
            conn.executemany(
                RETRY_ITEM,
                [
                    {"id": i, "kind": kind, "message": message, "max": max_attempts,
                     "not_before": settlement.not_before, "now": now}
                    for i, (kind, message) in settlement.retry.items()
                ],
            )
            conn.executemany(
                "UPDATE items SET state = 'failed', error_kind = ?, error = ?, retryable = ?, "
                "updated_at = ? WHERE id = ?",
                [(kind, message, retryable, now, i) for i, (kind, message, retryable) in settlement.failed.items()],
            )
            conn.execute(
                "UPDATE batches SET state = ?, finished_at = ? WHERE id = ?",
                (BatchState.DONE, now, batch_id),
            )
            if settlement.breaker is not None:
                (run_id,) = conn.execute("SELECT run_id FROM batches WHERE id = ?", (batch_id,)).fetchone()
                control = settlement.breaker(self.control(run_id))
                conn.execute(
                    "UPDATE runs SET breaker = ?, breaker_reason = ?, transport_failures = ? WHERE id = ?",
                    (control.breaker, control.reason, control.transport_failures, run_id),
                )
            return [_split_batch(conn, batch_id, ids, now) for ids in settlement.split if ids]

    def control(self, run_id: int) -> Control:
        """The run's breaker and a person's controls."""
        (row,) = self._rows(
            "SELECT breaker, breaker_reason, transport_failures, paused, steps FROM runs WHERE id = ?",
            [run_id],
        )
        return Control(
            BreakerState(row["breaker"]), row["breaker_reason"], row["transport_failures"],
            bool(row["paused"]), row["steps"],
        )

    def set_control(self, run_id: int, control: Control) -> None:
        """Write the breaker and controls in a transaction of their own."""
        with self.write() as conn:
            self.write_control(conn, run_id, control)

    @staticmethod
    def write_control(conn: sqlite3.Connection, run_id: int, control: Control) -> None:
        """Write the breaker and controls inside the caller's transaction."""
        conn.execute(
            "UPDATE runs SET breaker = ?, breaker_reason = ?, transport_failures = ?, paused = ?, "
            "steps = ? WHERE id = ?",
            (control.breaker, control.reason, control.transport_failures, int(control.paused),
             control.steps, run_id),
        )

    def recover(self, run_id: int, *, now: float) -> None:
        """Take over what a dead engine left: unsent items go back to pending, sent ones are held.

        Items still ``queued`` were never sent, so they return to pending.
        Items still ``running`` may or may not have reached the upstream: they
        are held for a person's confirmation, never re-sent on their own.
        ``received`` items keep their output for local validation.
        """
        with self.write() as conn:
            conn.execute(RELEASE_QUEUED, (now, run_id))
            conn.execute(
                "UPDATE items SET needs_confirmation = 1, updated_at = ? "
                "WHERE run_id = ? AND state = 'running' AND needs_confirmation = 0",
                (now, run_id),
            )
            conn.execute(
                "UPDATE batches SET state = ?, finished_at = ?, error = 'left by a stopped engine' "
                "WHERE run_id = ? AND state != ?",
                (BatchState.DONE, now, run_id, BatchState.DONE),
            )

    def release_queued(self, run_id: int, *, now: float) -> None:
        """Return formed but unsent batches' items to pending, when an engine stops."""
        with self.write() as conn:
            conn.execute(RELEASE_QUEUED, (now, run_id))
            conn.execute(
                "UPDATE batches SET state = ?, finished_at = ?, error = 'not sent: the engine stopped' "
                "WHERE run_id = ? AND state = ?",
                (BatchState.DONE, now, run_id, BatchState.QUEUED),
            )

    def received_items(self, run_id: int) -> list[dict[str, Any]]:
        """Items whose output is saved but not yet validated."""
        return self._rows(
            "SELECT id, key, batch_id, output FROM items WHERE run_id = ? AND state = 'received'",
            [run_id],
        )

    # The engine's lease ---------------------------------------------------

    def acquire_lease(self, run_id: int, *, token: str, pid: int, host: str, now: float) -> None:
        """Hold the run for one engine; refuse while another engine's heartbeat is fresh.

        A holder on this host whose process is gone is dead at once, so that a
        restart after a crash need not wait for its heartbeat to age.
        """
        with self.write() as conn:
            row = conn.execute(
                "SELECT token, pid, host, heartbeat_at FROM engines WHERE run_id = ?", (run_id,)
            ).fetchone()
            if row and row[0] != token and now - row[3] < LEASE_SECONDS and _alive(row[1], row[2]):
                raise RunError(
                    f"this run is being run by another engine (pid {row[1]} on {row[2]}, "
                    f"heartbeat {now - row[3]:.0f}s ago)"
                )
            conn.execute(
                "INSERT INTO engines (run_id, token, pid, host, started_at, heartbeat_at) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET token = excluded.token, "
                "pid = excluded.pid, host = excluded.host, started_at = excluded.started_at, "
                "heartbeat_at = excluded.heartbeat_at",
                (run_id, token, pid, host, now, now),
            )

    def heartbeat(self, run_id: int, *, token: str, now: float) -> None:
        with self.write() as conn:
            conn.execute(
                "UPDATE engines SET heartbeat_at = ? WHERE run_id = ? AND token = ?", (now, run_id, token)
            )

    def release_lease(self, run_id: int, *, token: str) -> None:
        with self.write() as conn:
            conn.execute("DELETE FROM engines WHERE run_id = ? AND token = ?", (run_id, token))

    # Reading progress -----------------------------------------------------

    def counts(self, run_id: int) -> dict[str, dict[str, int]]:
        """Items by group and state, from the counts table (cheap at any size)."""
        groups: dict[str, dict[str, int]] = {}
        for row in self._rows(
            "SELECT grp, state, n FROM counts WHERE run_id = ? AND n > 0 ORDER BY grp", [run_id]
        ):
            groups.setdefault(row["grp"], {s.value: 0 for s in ItemState})[row["state"]] = row["n"]
        return groups

    def unfinished(self, run_id: int) -> int:
        """Items that still need work, counted from the store, never from a queue."""
        rows = self._rows(
            "SELECT coalesce(sum(n), 0) AS n FROM counts WHERE run_id = ? AND state IN "
            "('pending', 'queued', 'waiting', 'running', 'received')",
            [run_id],
        )
        return int(rows[0]["n"])

    def next_due(self, run_id: int) -> float | None:
        """When the earliest waiting item may be tried again."""
        rows = self._rows(
            "SELECT min(not_before) AS t FROM items WHERE run_id = ? AND state = 'waiting' "
            "AND needs_confirmation = 0",
            [run_id],
        )
        due = rows[0]["t"]
        return float(due) if due is not None else None

    def status(self, name: str, *, now: float) -> dict[str, Any]:
        """The status contract of the brief, for one run."""
        run_id = self.run_id(name)
        groups = self.counts(run_id)
        totals = {s.value: sum(g[s.value] for g in groups.values()) for s in ItemState}
        (run,) = self._rows("SELECT breaker, breaker_reason FROM runs WHERE id = ?", [run_id])
        held = self._rows(
            "SELECT count(*) AS n FROM items WHERE run_id = ? AND needs_confirmation = 1", [run_id]
        )[0]["n"]
        engine = self._rows("SELECT heartbeat_at FROM engines WHERE run_id = ?", [run_id])
        return {
            "run": name,
            "total": sum(totals.values()),
            "counts": totals,
            "groups": groups,
            "breaker": {"state": BreakerState(run["breaker"]).value, "reason": run["breaker_reason"]},
            "needs_confirmation": held,
            "engine": {"alive": bool(engine) and now - engine[0]["heartbeat_at"] < LEASE_SECONDS},
        }

    def failures(self, name: str) -> list[dict[str, Any]]:
        """Failed items with their reason, as the failures contract lists them."""
        run_id = self.run_id(name)
        return [
            {**row, "retryable": bool(row["retryable"])}
            for row in self._rows(
                "SELECT key, grp AS \"group\", error_kind AS kind, error AS message, attempts, "
                "retryable FROM items WHERE run_id = ? AND state = 'failed' ORDER BY error_kind, seq",
                [run_id],
            )
        ]


def _split_batch(conn: sqlite3.Connection, parent: int, ids: list[int], now: float) -> Batch:
    """A new queued batch of some of a batch's items, one round of splitting further."""
    (batch_id, group, chars, round_) = conn.execute(
        "INSERT INTO batches (run_id, grp, state, size, chars, round, created_at) "
        "SELECT run_id, grp, ?, ?, (SELECT sum(chars) FROM items WHERE id IN (SELECT value FROM json_each(?))), "
        "round + 1, ? FROM batches WHERE id = ? RETURNING id, grp, chars, round",
        (BatchState.QUEUED, len(ids), json.dumps(ids), now, parent),
    ).fetchone()
    conn.execute(
        "UPDATE items SET state = 'queued', batch_id = ?, updated_at = ? "
        "WHERE id IN (SELECT value FROM json_each(?))",
        (batch_id, now, json.dumps(ids)),
    )
    return Batch(id=batch_id, group=group, size=len(ids), chars=chars, round=round_)


def _alive(pid: int, host: str) -> bool:
    """Whether a lease holder's process may still live: on this host we can look."""
    if host != socket.gethostname():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _fill(candidates: list[tuple[int, str, int]], max_chars: int) -> tuple[str, list[int], int]:
    """The leading candidates of the first one's group that fit in ``max_chars``."""
    group = candidates[0][1]
    chosen: list[int] = []
    chars = 0
    for item_id, item_group, item_chars in candidates:
        if item_group != group or chars + item_chars > max_chars:
            break
        chosen.append(item_id)
        chars += item_chars
    return group, chosen, chars


UPSERT_ITEM = """
INSERT INTO items (run_id, key, grp, seq, input, chars, fingerprint, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (run_id, key) DO UPDATE SET
    grp = excluded.grp, seq = excluded.seq, input = excluded.input, chars = excluded.chars,
    fingerprint = excluded.fingerprint, updated_at = excluded.updated_at,
    state = CASE WHEN state IN ('running', 'received', 'completed') THEN 'failed' ELSE state END,
    error_kind = CASE WHEN state IN ('running', 'received', 'completed')
        THEN 'input_changed' ELSE error_kind END,
    error = CASE WHEN state IN ('running', 'received', 'completed')
        THEN 'input changed after it was sent; its old result does not apply (retry to send the new input)'
        ELSE error END,
    retryable = CASE WHEN state IN ('running', 'received', 'completed') THEN 1 ELSE retryable END,
    needs_confirmation = 0
WHERE items.fingerprint != excluded.fingerprint
"""

CLAIM_DUE_WAITING = """
SELECT id, grp, chars FROM items
WHERE run_id = ? AND state = 'waiting' AND not_before <= ? AND needs_confirmation = 0
ORDER BY grp, seq LIMIT ?
"""

CLAIM_PENDING = """
SELECT id, grp, chars FROM items
WHERE run_id = ? AND state = 'pending'
ORDER BY grp, seq LIMIT ?
"""

RELEASE_QUEUED = """
UPDATE items SET state = 'pending', batch_id = NULL, updated_at = ?
WHERE run_id = ? AND state = 'queued'
"""

FAIL_ONE = """
UPDATE items SET state = 'failed', error_kind = ?, error = ?, retryable = 0, updated_at = ?
WHERE id = ?
"""

RETRY_ITEM = """
UPDATE items SET
    state = CASE WHEN attempts - retry_base >= :max THEN 'failed' ELSE 'waiting' END,
    not_before = :not_before, error_kind = :kind, retryable = 1, updated_at = :now,
    error = CASE WHEN attempts - retry_base >= :max
        THEN :message || ' (gave up after ' || (attempts - retry_base) || ' attempts, '
            || paid_calls || ' paid calls)'
        ELSE :message END
WHERE id = :id
"""
