"""A run store's SQLite file: opening it (for writing, or read-only for views), its transactions and reads.

Every verb that changes state is one ``BEGIN IMMEDIATE`` transaction (or
part of the caller's, inside :meth:`SQLiteFile.write`), so a crash leaves
either all of a step or none of it. Connections run in WAL mode with
``synchronous=FULL`` (a committed ``running`` survives a power loss, not
only a process crash) and a busy timeout, so that engines, the TUI and
notebook panels in other processes share the file. Views open it read-only
(``read_only=True``): they never write, never migrate and never wait for a
writer.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import NotARunStore, StoreError, StoreOutdated
from . import schema, tidy
from .database import Params
from .dialect import SQLITE, Compiling, compiled
from .transactions import Transactions, busy

NO_STORE = "no run store here (runner run or runner demo makes one)"
#: The oldest SQLite the store's SQL runs on (``IS [NOT] DISTINCT FROM``, 3.39: SQL PostgreSQL takes too).
OLDEST_SQLITE = (3, 39, 0)

#: The tables of a database, to tell a run store from another program's database.
TABLES = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite%' ORDER BY name"

#: A -wal over this size is checkpointed and truncated after a large write: twice the 4 MB that SQLite's
#: own checkpoints (every 1,000 pages of 4 KiB) let it reach, so only one large transaction (an input
#: read) or checkpoints that readers held back leave it there.
WAL_LIMIT = 8 * 1024 * 1024
#: Seconds a checkpoint waits for readers in the middle of a read.
CHECKPOINT_WAIT = 1.0

#: A read-only connection could not make or grow the -shm beside a WAL store:
#: a read-only folder, a read-only file system, a full disk.
NO_SHARED_MEMORY = {
    sqlite3.SQLITE_READONLY_DIRECTORY,
    sqlite3.SQLITE_CANTOPEN,
    sqlite3.SQLITE_IOERR_SHMOPEN,
    sqlite3.SQLITE_IOERR_SHMSIZE,
}


class SQLiteFile(Transactions):
    """One run store file, a ``Database``: ``SQLiteFile(path)`` opens it to write, creating it unless ``create=False``.

    ``SQLiteFile(path, read_only=True)`` opens an existing store for a view (status,
    failures, the TUI, the panel): on a connection that cannot write
    (``mode=ro``), so it works on a read-only file or folder, on a full disk
    and while another process holds the write lock (WAL readers wait for no
    writer). It is never created or migrated: a store of an older schema is
    refused with the command that upgrades it.
    """

    dialect = "sqlite"
    integrity_error: type[Exception] = sqlite3.IntegrityError
    driver_error: type[Exception] = sqlite3.Error

    def __init__(
        self, path: str | Path, *, create: bool = True, read_only: bool = False, busy_timeout: float = 10.0
    ) -> None:
        self.path = Path(path)
        #: How long a write waits for another process's write lock before StoreBusy.
        self.busy_timeout = busy_timeout
        if sqlite3.sqlite_version_info < OLDEST_SQLITE:
            raise StoreError(f"{self.path}: this Python's SQLite is {sqlite3.sqlite_version}; the run store needs "
                             f"{'.'.join(map(str, OLDEST_SQLITE))} or newer (a Python built with a newer SQLite)")
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
        tidy.opened(self.path)
        self._closed = False

    @property
    def location(self) -> Path:
        """The store's file."""
        return self.path

    def _use(self, conn: sqlite3.Connection, *, snapshot: bool = False) -> None:
        self.conn = conn
        #: The connection as the verbs use it: each statement in SQLite's dialect.
        self.compiling = Compiling(conn, SQLITE)
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
        return self._wal_bytes() > 0

    def _wal_bytes(self) -> int:
        """The size of the store's -wal file (0: none)."""
        try:
            return Path(f"{self.path}-wal").stat().st_size
        except FileNotFoundError:
            return 0

    def size(self) -> int:
        """The store's bytes on disk: its file and its -wal."""
        return self.path.stat().st_size + self._wal_bytes()

    def vacuum(self) -> None:
        """Rewrite the store file without its free pages, and truncate its -wal (no transaction may be open); one
        that fails (another writer held the store all along, a full disk) is a StoreError, the store as it was."""
        try:
            self.conn.execute("VACUUM")
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: the vacuum failed ({exc}); the store keeps its size") from exc

    def after_large_write(self) -> None:
        """After a large write, copy the -wal into the store and truncate it, when no reader is mid-read.

        SQLite's own checkpoints reuse the -wal but never shrink it: one large
        transaction (an input read) leaves it that large, beside a TUI that
        holds the store open, for as long as the store is used. A reader in
        the middle of a read is waited for at most ``CHECKPOINT_WAIT``; then
        the -wal stays as it is, and the next large write tries again; so it
        does when the checkpoint fails (a full disk, say): it never fails the
        write that came before it.
        """
        if self.conn.in_transaction or self._wal_bytes() <= WAL_LIMIT:
            return
        try:
            with self.waiting_at_most(CHECKPOINT_WAIT):
                self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        except sqlite3.Error as exc:  # all is committed already: the -wal stays, the next large write tries again
            import logging  # here: the light commands do without its import (3 ms of a cold start)

            logging.getLogger(__name__).warning(
                "%s: the -wal could not be truncated (%s); it stays as it is", self.path, exc
            )

    def _follow_writer(self) -> None:
        """A snapshot is opened again once a writer wrote (it may write the file itself at a checkpoint), between
        read transactions (``reading``)."""
        if self._snapshot and not self.conn.in_transaction and self._wal_written():
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
        """Close the store; this process's last connection to it leaves no -wal or -shm beside it (``tidy``)."""
        self.conn.close()
        if not self._closed:
            self._closed = True
            tidy.closed(self.path)

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

    def _in_transaction(self) -> bool:
        return bool(self.conn.in_transaction)

    def _write_failed(self, exc: Exception) -> StoreError:
        return _write_failed(self.path, exc)

    def _begin(self) -> None:
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY:
                raise
            raise busy(self.path, self.busy_timeout) from exc

    def _set_busy_timeout(self, seconds: float) -> None:
        self.conn.execute(f"PRAGMA busy_timeout = {int(seconds * 1000)}")
        self.busy_timeout = seconds

    def rows(self, sql: str, params: Params = ()) -> list[dict[str, Any]]:
        self._follow_writer()
        try:
            cursor = self.conn.execute(compiled(sql, SQLITE).sql, params)
            names = [column[0] for column in cursor.description]
            return [dict(zip(names, row)) for row in cursor]
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: store read failed ({exc})") from exc


@contextmanager
def _closed_on_error(conn: sqlite3.Connection) -> Iterator[None]:
    """Close a connection being opened if opening it fails, so that no refused store stays open."""
    try:
        yield
    except BaseException:
        conn.close()
        raise


def _cannot_write(exc: Exception) -> bool:
    """Whether SQLite refused a write for want of room or rights (not for what was written)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None:
        return False
    return (code & 0xFF) in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_FULL) or code in NO_SHARED_MEMORY


def _write_failed(path: Path, exc: Exception) -> StoreError:
    if _cannot_write(exc):
        return StoreError(f"{path} cannot be written here ({exc}); nothing was written")
    return StoreError(f"{path}: store write failed ({exc})")


def remove_if_no_run(path: str | Path) -> None:
    """Remove a store file (and its -wal and -shm) that holds no run: one a bad input or a copy cut short made."""
    conn = sqlite3.connect(f"file:{Path(path).absolute()}?mode=ro", uri=True)
    try:
        holds_a_run = conn.execute("SELECT 1 FROM runs LIMIT 1").fetchone() is not None
    except sqlite3.OperationalError:  # no runs table: its making was cut short
        holds_a_run = False
    finally:
        conn.close()
    if not holds_a_run:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
