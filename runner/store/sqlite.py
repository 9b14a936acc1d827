"""The run store: one SQLite file that knows every item's state.

Every method that changes state is one ``BEGIN IMMEDIATE`` transaction (or
part of the caller's, inside :meth:`Store.write`), so a crash leaves either
all of a step or none of it. Connections run in WAL mode with
``synchronous=FULL`` (a committed ``running`` survives a power loss, not
only a process crash) and a busy timeout, so that engines, the TUI and
notebook panels in other processes share the file. Views open it read-only
(``Store(path, read_only=True)``): they never write, never migrate and never
wait for a writer. The hot transitions are fixed SQL on the connection;
sqlite-utils serves the queries.

Time is passed in (``now``, seconds since the epoch), never read here.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlite_utils

from . import schema
from ..errors import InputError, NotARunStore, RunError, StoreBusy, StoreError, StoreOutdated
from ..jobs import ItemRow, Job, RetryLimits
from ..breaker import Control
from ..model import BatchState, BreakerState, FailureKind, ItemState

INSERT_CHUNK = 1_000

NO_STORE = "no run store here (runner run or runner demo makes one)"

#: The tables of a database, to tell a run store from another program's database.
TABLES = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite%' ORDER BY name"

#: A read-only connection could not make or grow the -shm beside a WAL store:
#: a read-only folder, a read-only file system, a full disk.
NO_SHARED_MEMORY = {
    sqlite3.SQLITE_READONLY_DIRECTORY,
    sqlite3.SQLITE_CANTOPEN,
    sqlite3.SQLITE_IOERR_SHMOPEN,
    sqlite3.SQLITE_IOERR_SHMSIZE,
}


@dataclass(frozen=True)
class Batch:
    """A batch as formed: its id, group and item count."""

    id: int
    group: str
    size: int
    chars: int
    #: How often the items were split: 0 as formed, 1 halves, 2 single items.
    round: int = 0
    #: Sent before a crash and confirmed by a person: poll its task, send nothing again.
    resume: bool = False


@dataclass(frozen=True)
class StartedItem:
    """An item marked running, with what must be sent for it."""

    id: int
    key: str
    input: str
    #: Attempts left before this one counts against the bound (a person's retry resets it).
    attempts_left: int
    #: Tries of this item the upstream refused in a row, before this one.
    refused_streak: int = 0


@dataclass
class Settlement:
    """How a batch ends, item by item; applied in one transaction."""

    #: Items whose saved output passed validation: completed, with that output as their result.
    completed: list[int] = field(default_factory=list)
    #: item id -> (kind, message): tried again after ``not_before``, within the attempt bound.
    retry: dict[int, tuple[FailureKind, str]] = field(default_factory=dict)
    #: item id -> (kind, message, retryable by a person).
    failed: dict[int, tuple[FailureKind, str, bool]] = field(default_factory=dict)
    #: Item ids to send again at once in new, smaller batches (a wholly invalid answer).
    split: list[list[int]] = field(default_factory=list)
    #: Items whose call may have been billed with no answer to show for it.
    maybe_paid: set[int] = field(default_factory=set)
    #: Items whose try the upstream refused before running anything (a 429; nothing billed): such a
    #: try counts against ``max_refusals`` in a row, not against ``max_attempts``.
    refused: set[int] = field(default_factory=set)
    not_before: float = 0.0
    #: How this batch moves the breaker, applied to its state inside the same transaction.
    breaker: Callable[[Control], Control] | None = None


class Store:
    """One run store file; ``Store(path)`` opens it for writing, creating it unless ``create=False``.

    ``Store(path, read_only=True)`` opens an existing store for a view (status,
    failures, the TUI, the panel): on a connection that cannot write
    (``mode=ro``), so it works on a read-only file or folder, on a full disk
    and while another process holds the write lock (WAL readers wait for no
    writer). It is never created or migrated: a store of an older schema is
    refused with the command that upgrades it.
    """

    def __init__(
        self, path: str | Path, *, create: bool = True, read_only: bool = False, busy_timeout: float = 10.0
    ) -> None:
        self.path = Path(path)
        #: How long a write waits for another process's write lock before StoreBusy.
        self.busy_timeout = busy_timeout
        if (read_only or not create) and not self.path.exists():
            raise StoreError(f"{self.path}: {NO_STORE}")
        if read_only:
            self._open_reading()
        else:
            conn, version = self._connect_writing()
            self._use(conn)
            if version < schema.SCHEMA_VERSION:  # else no write: opening waits for no other writer
                with _closed_on_error(conn):
                    self._migrate()

    def _use(self, conn: sqlite3.Connection, *, snapshot: bool = False) -> None:
        self.conn = conn
        self.db = sqlite_utils.Database(conn)
        #: Read as the file stood when opened, no -wal or -shm beside it (see ``_connect_reading``).
        self._snapshot = snapshot

    def _connect_writing(self) -> tuple[sqlite3.Connection, int]:
        """A connection that writes, and the schema version it found."""
        try:
            conn = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None)
            with _closed_on_error(conn):
                # Before anything that writes (journal_mode does): another program's database stays as it was.
                version = self._identify(conn)
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = FULL")
                conn.execute("PRAGMA foreign_keys = ON")
        except sqlite3.DatabaseError as exc:
            if _cannot_write(exc):
                raise _write_failed(self.path, exc) from exc
            raise StoreError(f"{self.path}: cannot open as a run store ({exc})") from exc
        return conn, version

    def _open_reading(self) -> None:
        try:
            conn, version, snapshot = self._connect_reading()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: cannot open as a run store ({exc})") from exc
        with _closed_on_error(conn):
            if not version:
                raise StoreError(f"{self.path}: {NO_STORE}")
            if version < schema.SCHEMA_VERSION:
                raise StoreOutdated(
                    f"{self.path} is at schema {version}, this runner reads {schema.SCHEMA_VERSION}: "
                    "`runner run NAME` (any writing command) upgrades it"
                )
        self._use(conn, snapshot=snapshot)

    def _connect_reading(self) -> tuple[sqlite3.Connection, int, bool]:
        """A connection that cannot write, the schema version, and whether it reads a snapshot.

        A WAL reader needs the -wal and -shm files beside the store and makes
        them when they are missing (they stay, empty, when it closes). In a
        read-only folder, or on a full disk, it cannot. Then, as long as no
        -wal holds transactions that the file lacks, no writer is at work and
        the file alone is the whole store: it is read as immutable (no locks,
        no -shm), until a writer writes (``_follow_writer``).
        """
        uri = self.path.resolve().as_uri()
        conn = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=self.busy_timeout, isolation_level=None)
        try:
            with _closed_on_error(conn):
                return conn, self._identify(conn), False
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode not in NO_SHARED_MEMORY or self._wal_written():
                raise
        conn = sqlite3.connect(f"{uri}?mode=ro&immutable=1", uri=True, isolation_level=None)
        with _closed_on_error(conn):
            return conn, self._identify(conn), True

    def _wal_written(self) -> bool:
        """Whether the store's -wal holds anything: transactions that the file alone may not have."""
        try:
            return Path(f"{self.path}-wal").stat().st_size > 0
        except FileNotFoundError:
            return False

    def _follow_writer(self) -> None:
        """A snapshot is opened again once a writer wrote (it may write the file itself at a checkpoint)."""
        if self._snapshot and self._wal_written():
            stale = self.conn
            self._open_reading()
            stale.close()

    def _identify(self, conn: sqlite3.Connection) -> int:
        """The store's schema version (0: a new, empty database); another program's or a newer runner's is refused."""
        version: int = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = [name for (name,) in conn.execute(TABLES)]
        if tables and (not version or "runs" not in tables):
            raise NotARunStore(
                f"{self.path} is a SQLite database but not a run store (it has tables {', '.join(tables)}); "
                "nothing was changed"
            )
        if version > schema.SCHEMA_VERSION:
            raise StoreError(
                f"{self.path}: written by a newer runner (schema {version}, this one knows {schema.SCHEMA_VERSION})"
            )
        return version

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
        """One write transaction; a sqlite3 failure becomes a StoreError and rolls back.

        Inside a transaction already open (the engine saves a finished batch,
        starts the next and forms another in one) it joins that transaction.
        A write lock that another process held for all of ``busy_timeout``
        raises StoreBusy before anything is written.
        """
        nested = self.conn.in_transaction
        try:
            if not nested:
                self._begin()
            try:
                yield self.conn
                if not nested:
                    self.conn.execute("COMMIT")
            except BaseException:
                if not nested and self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise _write_failed(self.path, exc) from exc

    def _begin(self) -> None:
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY:
                raise
            raise StoreBusy(
                f"{self.path}: the store is busy: another process holds its write lock (adding a large "
                f"input, say) and did not let go within {self.busy_timeout:g} s; nothing was written"
            ) from exc

    @contextmanager
    def waiting_at_most(self, seconds: float) -> Iterator[None]:
        """Inside the block, a write waits at most ``seconds`` for another process's write lock."""
        before = self.busy_timeout
        self._set_busy_timeout(seconds)
        try:
            yield
        finally:
            self._set_busy_timeout(before)

    def _set_busy_timeout(self, seconds: float) -> None:
        self.conn.execute(f"PRAGMA busy_timeout = {int(seconds * 1000)}")
        self.busy_timeout = seconds

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        self._follow_writer()
        try:
            return list(self.db.query(sql, params))
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: store read failed ({exc})") from exc

    # Runs ---------------------------------------------------------------

    def prepare_run(self, job: Job, items: Iterable[ItemRow], *, now: float) -> int:
        """Create or continue the run ``job.name`` and add its items, in one transaction.

        New keys are added as pending (one event for the run says how many);
        unchanged items are kept as they are.
        An item whose input fingerprint changed takes the new input: if it had
        already been sent or answered it becomes ``failed`` (input_changed), so
        that an old result is never taken for the new input and no new call is
        made without a person's retry; if it had failed, the fix is tried, with
        a fresh attempt budget; if it was in a formed, unsent batch, it leaves
        it for pending (the batch was sized, and grouped, for the old input).
        An input without records, or any error, leaves the store untouched.
        """
        with self.write() as conn:
            (run_id,) = conn.execute(
                "INSERT INTO runs (name, job, nonce, created_at, updated_at) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (name) DO UPDATE SET job = excluded.job, updated_at = excluded.updated_at "
                "RETURNING id",
                (job.name, job.to_json(), secrets.token_hex(4), now, now),
            ).fetchone()
            (before,) = conn.execute("SELECT coalesce(sum(n), 0) FROM counts WHERE run_id = ?", (run_id,)).fetchone()
            chunk: list[ItemRow] = []
            seen = 0
            for row in items:
                chunk.append(row)
                if len(chunk) == INSERT_CHUNK:
                    _upsert_items(conn, run_id, chunk, now)
                    chunk.clear()
                seen += 1
            _upsert_items(conn, run_id, chunk, now)
            if not seen:
                raise InputError(f"{job.input.describe()}: no records")
            conn.execute(LOG_ADDED, {"run": run_id, "now": now, "before": before})
        return int(run_id)

    def run_id(self, name: str) -> int:
        rows = self.rows("SELECT id FROM runs WHERE name = ?", [name])
        if not rows:
            known = ", ".join(self.run_names()) or "none"
            raise RunError(f"no run named {name!r} in {self.path} (runs: {known})")
        return int(rows[0]["id"])

    def run_names(self) -> list[str]:
        return [r["name"] for r in self.rows("SELECT name FROM runs ORDER BY name")]

    def job(self, name: str) -> Job:
        """The resolved job saved for a run, to continue it by name."""
        self.run_id(name)
        (row,) = self.rows("SELECT job FROM runs WHERE name = ?", [name])
        return Job.from_json(row["job"])

    # The engine's transitions ---------------------------------------------

    def claim_batch(self, run_id: int, *, max_items: int, max_chars: int, now: float) -> Batch | None:
        """Form the next batch of one group (due waiting items first) and mark it queued.

        An item larger than ``max_chars`` on its own can never be sent within
        the limit: it fails as bad_request, with no call.
        """
        with self.write() as conn:
            while True:
                origin = ItemState.WAITING
                candidates = conn.execute(CLAIM_DUE_WAITING, (run_id, now, max_items)).fetchall()
                if not candidates:
                    origin = ItemState.PENDING
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
                "FROM json_each(?) AS chosen WHERE items.id = chosen.value",
                (batch_id, now, json.dumps(chosen)),
            )
            conn.execute(LOG_BATCH, _move(batch_id, origin, ItemState.QUEUED, len(chosen), now))
        return Batch(id=int(batch_id), group=group, size=len(chosen), chars=chars)

    def start_batch(
        self,
        batch_id: int,
        *,
        lease: tuple[str, str],
        max_attempts: int,
        now: float,
        step: bool = False,
        intent: bool = True,
    ) -> list[StartedItem]:
        """Mark a queued batch's items running, attempts + 1, before any upstream call.

        Nothing starts unless the engine still holds the run's ``lease`` (run
        name, token). ``step`` spends one of the steps a person allowed while
        the run is held. ``intent``: the call follows at once (a provider that
        submits writes its intent later, just before its upload).
        """
        with self.write() as conn:
            rows = conn.execute(
                "UPDATE items SET state = 'running', attempts = attempts + 1, updated_at = ? "
                "WHERE batch_id = ? AND state = 'queued' "
                "AND EXISTS (SELECT 1 FROM engines WHERE run = ? AND token = ?) "
                f"RETURNING {STARTED_ITEM}",
                (now, batch_id, *lease, max_attempts),
            ).fetchall()
            conn.execute(LOG_BATCH, _move(batch_id, ItemState.QUEUED, ItemState.RUNNING, len(rows), now))
            conn.execute(
                "UPDATE batches SET state = ?, started_at = ?, intent_at = ?, submits = ? WHERE id = ?",
                (BatchState.RUNNING, now, now if intent else None, int(not intent), batch_id),
            )
            if step:
                conn.execute(
                    "UPDATE runs SET steps = steps - 1 "
                    "WHERE id = (SELECT run_id FROM batches WHERE id = ?) AND steps > 0",
                    (batch_id,),
                )
        return [StartedItem(*row) for row in rows]

    def count_request_retry(self, batch_id: int) -> None:
        """One more request retry inside the batch's attempt."""
        with self.write() as conn:
            conn.execute("UPDATE batches SET retries = retries + 1 WHERE id = ?", (batch_id,))

    def count_maybe_paid(self, batch_id: int) -> None:
        """A call of this batch was sent and its answer lost: each item may have paid for it."""
        with self.write() as conn:
            conn.execute(
                "UPDATE items SET maybe_paid = maybe_paid + 1 WHERE batch_id = ? AND state = 'running'", (batch_id,)
            )

    def open_breaker(self, run_id: int, reason: str) -> None:
        """Open the breaker on its own, keeping a person's pause and steps."""
        with self.write() as conn:
            conn.execute("UPDATE runs SET breaker = 'open', breaker_reason = ? WHERE id = ?", (reason, run_id))

    def mark_intent(self, batch_id: int, *, now: float) -> None:
        """Commit that a batch is about to be submitted, before anything is uploaded."""
        with self.write() as conn:
            conn.execute("UPDATE batches SET intent_at = ? WHERE id = ?", (now, batch_id))

    def save_task_id(self, batch_id: int, task_id: str) -> None:
        """Commit the upstream task id of a submitted batch, before waiting for it."""
        with self.write() as conn:
            conn.execute("UPDATE batches SET upstream_id = ? WHERE id = ?", (task_id, batch_id))

    def mark_create_sent(self, batch_id: int, *, lands_by: float) -> None:
        """Commit that a task's create is about to be sent, and until when it may land if its answer is lost."""
        with self.write() as conn:
            conn.execute("UPDATE batches SET lands_by = ? WHERE id = ?", (lands_by, batch_id))

    def lands_by(self, batch_id: int) -> float | None:
        """Until when the batch's create, sent, may still land upstream; None if it was never sent."""
        (row,) = self.rows("SELECT lands_by FROM batches WHERE id = ?", [batch_id])
        return None if row["lands_by"] is None else float(row["lands_by"])

    def record_duplicate(self, batch_id: int, upstream_id: str, *, cancelled: bool, message: str, now: float) -> bool:
        """A second upstream task carrying the batch's reference: kept once, with an unknown charge.

        Each of the batch's items still running may have paid for the lines
        the duplicate ran (``maybe_paid`` + 1), and the batch's history says
        so. False when this duplicate was recorded before.
        """
        with self.write() as conn:
            added = conn.execute(
                "INSERT INTO duplicates (run_id, batch_id, upstream_id, found_at, cancelled, message) "
                "SELECT run_id, id, ?, ?, ?, ? FROM batches WHERE id = ? ON CONFLICT DO NOTHING RETURNING id",
                (upstream_id, now, int(cancelled), message, batch_id),
            ).fetchone()
            if added is None:
                return False
            items = conn.execute(
                "UPDATE items SET maybe_paid = maybe_paid + 1 WHERE batch_id = ? AND state = 'running'", (batch_id,)
            ).rowcount
            conn.execute(NOTE, {"batch": batch_id, "state": ItemState.RUNNING, "items": items,
                                "kind": "duplicate", "message": message, "now": now})
        return True

    def note(self, batch_id: int, *, kind: str, message: str, now: float) -> None:
        """A line in the batch's history that moves no item (an engine error's traceback, say)."""
        with self.write() as conn:
            conn.execute(NOTE, {"batch": batch_id, "state": ItemState.RUNNING, "items": 0,
                                "kind": kind, "message": message, "now": now})

    def reference(self, run_id: int) -> str:
        """The run's name and nonce, unique across stores: the prefix of its tasks' references."""
        (row,) = self.rows("SELECT name, nonce FROM runs WHERE id = ?", [run_id])
        return f"{row['name']}:{row['nonce']}"

    def hold(self, batch_id: int, *, now: float) -> None:
        """Hold a batch's sent items for a person: their task's fate cannot be known now."""
        with self.write() as conn:
            conn.execute(
                "UPDATE items SET needs_confirmation = 1, updated_at = ? WHERE batch_id = ? AND state = 'running'",
                (now, batch_id),
            )

    def task_id(self, batch_id: int) -> str | None:
        (row,) = self.rows("SELECT upstream_id FROM batches WHERE id = ?", [batch_id])
        return str(row["upstream_id"]) if row["upstream_id"] else None

    def resumable(self, run_id: int) -> list[Batch]:
        """Batches whose sent items a person confirmed: poll (or look for) their task."""
        # From the few running items to their batches (CROSS JOIN keeps that order),
        # never from every batch the run has formed.
        rows = self.rows(
            "SELECT b.id, b.grp, count(*) AS size, sum(i.chars) AS chars, b.round "
            "FROM items i CROSS JOIN batches b ON b.id = i.batch_id "
            "WHERE i.run_id = ? AND i.state = 'running' AND i.needs_confirmation = 2 "
            "GROUP BY b.id ORDER BY b.id",
            [run_id],
        )
        return [Batch(r["id"], r["grp"], r["size"], r["chars"], r["round"], resume=True) for r in rows]

    def resume_batch(self, batch_id: int, *, max_attempts: int, now: float) -> list[StartedItem]:
        """Take back a confirmed batch's running items, with no new attempt (nothing is sent again)."""
        with self.write() as conn:
            rows = conn.execute(
                "UPDATE items SET needs_confirmation = 0, updated_at = ? "
                "WHERE batch_id = ? AND state = 'running' AND needs_confirmation = 2 "
                f"RETURNING {STARTED_ITEM}",
                (now, batch_id, max_attempts),
            ).fetchall()
            conn.execute("UPDATE batches SET state = ?, finished_at = NULL WHERE id = ?", (BatchState.RUNNING, batch_id))
        return [StartedItem(*row) for row in rows]

    def record_answer(
        self,
        batch_id: int,
        outputs: Mapping[int, str],
        *,
        raw: str,
        now: float,
        answered: Iterable[int] | None = None,
    ) -> None:
        """Save an answer as it came back (``raw``) and the ``answered`` items (default all) as received.

        Each answered item paid the call and becomes received, with its
        result in ``outputs`` if the answer held a usable one, else none (it
        is judged for that): whatever the answer's shape, it is saved before
        anything is validated, and no paid answer is left running.
        """
        answer = {
            "batch": batch_id, "now": now, "raw": raw, "outputs": json.dumps(outputs),
            "answered": None if answered is None else json.dumps(list(answered)),
        }
        with self.write() as conn:
            received = conn.execute(RECEIVE, answer).rowcount + conn.execute(RECEIVE_EMPTY, answer).rowcount
            conn.execute(LOG_BATCH, _move(batch_id, ItemState.RUNNING, ItemState.RECEIVED, received, now))
            conn.execute("UPDATE batches SET answer = :raw WHERE id = :batch", answer)

    def settle_batch(
        self, batch_id: int, settlement: Settlement, *, max_attempts: int, max_refusals: int = RetryLimits.max_refusals, now: float
    ) -> list[Batch]:
        """Apply a batch's outcome and release it: completed, re-attempted, split or failed.

        Returns the new batches a split formed, already queued.
        """
        with self.write() as conn:
            # Each update touches only items still in this batch's hands: an item
            # whose input changed meanwhile keeps the failure that says so.
            if settlement.maybe_paid:
                conn.execute(
                    "UPDATE items SET maybe_paid = maybe_paid + 1 "
                    f"WHERE id IN (SELECT value FROM json_each(?)) {IN_BATCH}",
                    (json.dumps(list(settlement.maybe_paid)), batch_id),
                )
            if settlement.refused or settlement.retry or settlement.failed:  # (an answer ended streaks already)
                conn.execute(COUNT_REFUSED, {"refused": json.dumps(list(settlement.refused)), "batch": batch_id})
            if settlement.completed:
                done = conn.execute(
                    COMPLETE, {"batch": batch_id, "now": now, "ids": json.dumps(settlement.completed)}
                ).rowcount
                conn.execute(LOG_BATCH, _move(batch_id, ItemState.RECEIVED, ItemState.COMPLETED, done, now))
            conn.executemany(
                RETRY_ITEM,
                [
                    {"id": i, "batch": batch_id, "kind": kind, "message": message, "max": max_attempts,
                     "max_refusals": max_refusals, "not_before": settlement.not_before, "now": now}
                    for i, (kind, message) in settlement.retry.items()
                ],
            )
            conn.executemany(
                "UPDATE items SET state = 'failed', error_kind = ?, error = ?, retryable = ?, "
                f"needs_confirmation = 0, updated_at = ? WHERE id = ? {IN_BATCH}",
                [(kind, message, retryable, now, i, batch_id)
                 for i, (kind, message, retryable) in settlement.failed.items()],
            )
            conn.execute(
                "UPDATE batches SET state = ?, finished_at = ? WHERE id = ?",
                (BatchState.DONE, now, batch_id),
            )
            if settlement.breaker is not None:
                (run_id,) = conn.execute("SELECT run_id FROM batches WHERE id = ?", (batch_id,)).fetchone()
                before = self.control(run_id)
                control = settlement.breaker(before)
                if control != before:
                    conn.execute(
                        "UPDATE runs SET breaker = ?, breaker_reason = ?, transport_failures = ? WHERE id = ?",
                        (control.breaker, control.reason, control.transport_failures, run_id),
                    )
            return [_split_batch(conn, batch_id, ids, now) for ids in settlement.split if ids]

    def control(self, run_id: int) -> Control:
        """The run's breaker and a person's controls (read by the engine before every start: plain sqlite3)."""
        try:
            (breaker, reason, failures, paused, steps), = self.conn.execute(
                "SELECT breaker, breaker_reason, transport_failures, paused, steps FROM runs WHERE id = ?", (run_id,)
            ).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: store read failed ({exc})") from exc
        return Control(BreakerState(breaker), reason, failures, bool(paused), steps)

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

        Items still ``queued``, or ``running`` in a batch whose call intent
        was never written or whose task's create was never sent, were never
        sent, so they return to pending. Other
        ``running`` items may or may not have reached the upstream: they are
        held for a person's confirmation, never re-sent on their own.
        ``received`` items keep their output for local validation.
        """
        with self.write() as conn:
            conn.execute(RELEASE_QUEUED, (now, run_id))
            conn.execute(
                "UPDATE items SET state = 'pending', batch_id = NULL, updated_at = ? "
                "WHERE run_id = ? AND state = 'running' AND batch_id IN "
                "(SELECT id FROM batches WHERE intent_at IS NULL "
                "OR (submits = 1 AND lands_by IS NULL AND upstream_id IS NULL))",
                (now, run_id),
            )
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

    def release_queued(self, run_id: int, *, lease: tuple[str, str], now: float) -> None:
        """Return formed but unsent batches' items to pending, when an engine stops.

        Only while it still holds the run's ``lease`` (run name, token): the
        queued batches of an engine that took the run over are its own.
        """
        with self.write() as conn:
            if conn.execute("SELECT 1 FROM engines WHERE run = ? AND token = ?", lease).fetchone() is None:
                return
            conn.execute(RELEASE_QUEUED, (now, run_id))
            conn.execute(
                "UPDATE batches SET state = ?, finished_at = ?, error = 'not sent: the engine stopped' "
                "WHERE run_id = ? AND state = ?",
                (BatchState.DONE, now, run_id, BatchState.QUEUED),
            )

    def received_items(self, run_id: int) -> list[dict[str, Any]]:
        """Items whose output is saved but not yet validated."""
        return self.rows(
            "SELECT id, key, batch_id, output FROM items WHERE run_id = ? AND state = 'received'",
            [run_id],
        )


@contextmanager
def _closed_on_error(conn: sqlite3.Connection) -> Iterator[None]:
    """Close a connection being opened if opening it fails, so that no refused store stays open."""
    try:
        yield
    except BaseException:
        conn.close()
        raise


def _cannot_write(exc: sqlite3.Error) -> bool:
    """Whether SQLite refused a write for want of room or rights (not for what was written)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None:
        return False
    return (code & 0xFF) in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_FULL) or code in NO_SHARED_MEMORY


def _write_failed(path: Path, exc: sqlite3.Error) -> StoreError:
    if _cannot_write(exc):
        return StoreError(f"{path} cannot be written here ({exc}); nothing was written")
    return StoreError(f"{path}: store write failed ({exc})")


def _split_batch(conn: sqlite3.Connection, parent: int, ids: list[int], now: float) -> Batch:
    """A new queued batch of some of a batch's items, one round of splitting further, that knows its parent."""
    members = json.dumps(ids)
    (batch_id, group, chars, round_) = conn.execute(
        "INSERT INTO batches (run_id, grp, state, size, chars, round, parent_id, created_at) "
        "SELECT run_id, grp, ?, ?, (SELECT sum(chars) FROM items WHERE id IN (SELECT value FROM json_each(?))), "
        "round + 1, id, ? FROM batches WHERE id = ? RETURNING id, grp, chars, round",
        (BatchState.QUEUED, len(ids), members, now, parent),
    ).fetchone()
    conn.execute(
        LOG_MOVING, {"batch": batch_id, "from_batch": parent, "to": ItemState.QUEUED, "now": now, "ids": members}
    )
    conn.execute(
        "UPDATE items SET state = 'queued', batch_id = ?, updated_at = ? "
        f"WHERE id IN (SELECT value FROM json_each(?)) {IN_BATCH}",
        (batch_id, now, members, parent),
    )
    return Batch(id=batch_id, group=group, size=len(ids), chars=chars, round=round_)


def _upsert_items(conn: sqlite3.Connection, run_id: int, rows: list[ItemRow], now: float) -> None:
    """Add or update items and their inputs (an unchanged input is left as it is)."""
    conn.executemany(
        UPSERT_ITEM, [(run_id, row.key, row.group, row.seq, row.chars, row.fingerprint, now) for row in rows]
    )
    conn.executemany(UPSERT_INPUT, [(row.input, run_id, row.key) for row in rows])


def _move(batch_id: int, origin: ItemState, to: ItemState, items: int, now: float) -> dict[str, Any]:
    """The parameters of ``LOG_BATCH``: ``items`` of a batch moved from ``origin`` to ``to``."""
    return {"batch": batch_id, "from": origin, "to": to, "items": items, "now": now}


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


IN_BATCH = "AND batch_id = ? AND state IN ('running', 'received')"

# The batch path's moves are logged here, once per batch and move, and counted
# by the trigger ``events_count_batch``; the trigger ``items_change`` counts and
# logs every other state change per item (see ``schema``).

#: A line in a batch's history about ``:items`` of its items that stay in ``:state``.
NOTE = """
INSERT INTO events (run_id, batch_id, at, from_state, to_state, items, kind, message)
SELECT run_id, id, :now, :state, :state, :items, :kind, :message FROM batches WHERE id = :batch
"""

#: Items of a batch that moved together; no row when none did.
LOG_BATCH = """
INSERT INTO events (run_id, batch_id, at, from_state, to_state, items)
SELECT run_id, id, :now, :from, :to, :items FROM batches WHERE id = :batch AND :items > 0
"""

#: Before they move to ``:to``: the items ``:ids`` still in the hands of batch
#: ``:from_batch``, one row per state they leave, logged for batch ``:batch``.
LOG_MOVING = """
INSERT INTO events (run_id, batch_id, at, from_state, to_state, items)
SELECT run_id, :batch, :now, state, :to, count(*) FROM items
WHERE id IN (SELECT value FROM json_each(:ids)) AND batch_id = :from_batch AND state IN ('running', 'received')
GROUP BY run_id, state
"""

#: The items a prepare added to the run (counted from ``counts``); no row when none.
LOG_ADDED = """
INSERT INTO events (run_id, at, to_state, items)
SELECT :run, :now, 'pending', sum(n) - :before FROM counts WHERE run_id = :run HAVING sum(n) > :before
"""

UPSERT_ITEM = """
INSERT INTO items (run_id, key, grp, seq, chars, fingerprint, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (run_id, key) DO UPDATE SET
    grp = excluded.grp, seq = excluded.seq, chars = excluded.chars,
    fingerprint = excluded.fingerprint, updated_at = excluded.updated_at,
    state = CASE
        WHEN state IN ('running', 'received', 'completed') THEN 'failed'
        WHEN state IN ('failed', 'queued') THEN 'pending'
        ELSE state END,
    batch_id = CASE WHEN state = 'queued' THEN NULL ELSE batch_id END,
    retry_base = CASE WHEN state = 'failed' THEN attempts - refused ELSE retry_base END,
    refused_streak = CASE WHEN state = 'failed' THEN 0 ELSE refused_streak END,
    error_kind = CASE
        WHEN state IN ('running', 'received', 'completed') THEN 'input_changed'
        WHEN state = 'failed' THEN NULL
        ELSE error_kind END,
    error = CASE
        WHEN state IN ('running', 'received', 'completed')
        THEN 'input changed after it was sent; its old result does not apply (retry to send the new input)'
        WHEN state = 'failed' THEN NULL
        ELSE error END,
    retryable = CASE
        WHEN state IN ('running', 'received', 'completed') THEN 1
        WHEN state = 'failed' THEN NULL
        ELSE retryable END,
    needs_confirmation = 0
WHERE items.fingerprint != excluded.fingerprint
"""

UPSERT_INPUT = """
INSERT INTO inputs (item_id, input) SELECT id, ? FROM items WHERE run_id = ? AND key = ?
ON CONFLICT (item_id) DO UPDATE SET input = excluded.input WHERE input != excluded.input
"""

#: An item's input, in a RETURNING clause of an update of ``items``.
INPUT_OF_ITEM = "(SELECT input FROM inputs WHERE item_id = items.id)"

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

# The set-based updates below take the items from the JSON argument and each by
# its id (``+batch_id`` keeps SQLite from scanning the batch for every one).

#: The items of a batch with a result in ``:outputs`` (item id -> output) become received with
#: it, each having paid the call.
RECEIVE = """
UPDATE items SET state = 'received', output = answer.value, updated_at = :now,
    paid_calls = paid_calls + 1, refused_streak = 0
FROM json_each(:outputs) AS answer
WHERE items.id = CAST(answer.key AS INTEGER) AND +items.batch_id = :batch AND items.state = 'running'
"""

#: The other answered items of the batch (``:answered``, or all when NULL) become received with no
#: result: the answer held none of theirs, and they paid the call all the same.
RECEIVE_EMPTY = """
UPDATE items SET state = 'received', output = NULL, updated_at = :now, paid_calls = paid_calls + 1,
    refused_streak = 0
WHERE batch_id = :batch AND state = 'running'
    AND (:answered IS NULL OR id IN (SELECT value FROM json_each(:answered)))
"""

#: The tries of a batch's items that did not succeed: those the upstream refused (``:refused``,
#: item ids) are counted, in a row too; any other ends a streak of refusals.
COUNT_REFUSED = """
UPDATE items SET
    refused = refused + (id IN (SELECT value FROM json_each(:refused))),
    refused_streak = CASE WHEN id IN (SELECT value FROM json_each(:refused)) THEN refused_streak + 1 ELSE 0 END
WHERE batch_id = :batch AND state IN ('running', 'received')
    AND (refused_streak > 0 OR id IN (SELECT value FROM json_each(:refused)))
"""

#: Received items of a batch (``:ids``) completed, their validated output saved as the result (an item
#: received with no usable result has nothing to complete with).
COMPLETE = """
UPDATE items SET state = 'completed', result = output, error_kind = NULL, error = NULL, retryable = NULL,
    needs_confirmation = 0, updated_at = :now
FROM json_each(:ids) AS done
WHERE items.id = done.value AND +items.batch_id = :batch AND items.state = 'received' AND items.output IS NOT NULL
"""

#: An item re-attempted after ``:not_before``, or failed once the tries that may have cost reach
#: ``:max`` or the refusals in a row reach ``:max_refusals``.
RETRY_ITEM = """
UPDATE items SET
    state = CASE WHEN attempts - refused - retry_base >= :max OR refused_streak >= :max_refusals
        THEN 'failed' ELSE 'waiting' END,
    not_before = :not_before, error_kind = :kind, retryable = 1, needs_confirmation = 0, updated_at = :now,
    error = CASE WHEN attempts - refused - retry_base >= :max OR refused_streak >= :max_refusals
        THEN :message || CASE WHEN refused_streak >= :max_refusals
            THEN ' (gave up after ' || refused_streak || ' refusals in a row, nothing billed for them; '
            ELSE ' (gave up; ' END
            || 'attempts: ' || attempts || CASE WHEN refused > 0 THEN ', refused: ' || refused ELSE '' END
            || ', paid calls: ' || paid_calls
            || CASE WHEN maybe_paid > 0 THEN ', maybe paid: ' || maybe_paid ELSE '' END || ')'
        ELSE :message END
WHERE id = :id AND batch_id = :batch AND state IN ('running', 'received')
"""

#: A started item as the engine needs it, in a RETURNING clause of an update of ``items``
#: (the attempts left bound ``?``).
STARTED_ITEM = f"id, key, {INPUT_OF_ITEM}, ? - (attempts - refused - retry_base), refused_streak"
