"""A database's transactions as the store's verbs use them, the same on SQLite and PostgreSQL.

A database kind (``SQLiteFile``, ``PostgresDatabase``) says how it begins a
write (its lock), whether a transaction is open, how long a write waits for
another writer's lock, and what a driver's failure means; this module's
``Transactions`` makes of them the ``write()``, ``part()``, ``reading()`` and
``waiting_at_most()`` of the ``Database`` protocol.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import GroupLost, StoreBusy, StoreError
from .database import Conn


def busy(location: Path | str, seconds: float) -> StoreBusy:
    """A write that waited ``seconds`` for another writer's lock, and wrote nothing."""
    return StoreBusy(f"{location}: the store is busy: another process holds its write lock (adding a large input, "
                     f"say) and did not let go within {seconds:g} s; nothing was written")


class Transactions(ABC):
    """The transactions of one database connection (``conn``), its statements compiled by ``compiling``."""

    conn: Any
    compiling: Conn
    #: How long a write waits for another writer's lock before StoreBusy.
    busy_timeout: float
    #: The driver's error.
    driver_error: type[Exception]

    @property
    @abstractmethod
    def location(self) -> Any: ...

    @abstractmethod
    def _in_transaction(self) -> bool: ...

    @abstractmethod
    def _begin(self) -> None:
        """Begin a write transaction, holding the database's write lock (StoreBusy if it waited too long)."""

    #: The statement that begins a read transaction: every read in it sees the store as the first one did.
    begin_reading = "BEGIN"

    @abstractmethod
    def _set_busy_timeout(self, seconds: float) -> None: ...

    @abstractmethod
    def _write_failed(self, exc: Exception) -> StoreError:
        """What a driver's failure of a write means, in one line."""

    def _told(self, exc: Exception) -> str:
        """A driver's failure in a few words."""
        return str(exc)

    @contextmanager
    def write(self) -> Iterator[Conn]:
        """One write transaction; a driver's failure becomes a StoreError and rolls back.

        Inside a transaction already open (the engine saves a finished batch,
        starts the next and forms another in one) it joins that transaction.
        A write lock that another process held for all of ``busy_timeout``
        raises StoreBusy before anything is written.
        """
        nested = self._in_transaction()
        try:
            if not nested:
                self._begin()
            try:
                yield self.compiling
                if not nested:
                    self.conn.execute("COMMIT")
            except BaseException:
                if not nested and self._in_transaction():
                    self.conn.execute("ROLLBACK")
                raise
        except self.driver_error as exc:
            raise self._write_failed(exc) from exc

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Inside the block, every read sees the store as the first read did (one read transaction, no lock): a
        copy of a run read in many chunks is the run at one moment, whatever another writer does meanwhile."""
        try:
            self.conn.execute(self.begin_reading)
        except self.driver_error as exc:
            raise StoreError(f"{self.location}: store read failed ({self._told(exc)})") from exc
        try:
            yield
        finally:
            if self._in_transaction():
                self.conn.execute("ROLLBACK")

    @contextmanager
    def part(self) -> Iterator[None]:
        """Inside a transaction (``write``) that carries several steps, one step's part (a savepoint).

        A step that fails undoes only its own changes, and the others go on
        to the commit. A failure that ended the whole transaction (SQLite
        rolls back on some I/O errors), or a savepoint that cannot be undone
        or released (the step's writes might be kept with the others'),
        raises ``GroupLost``: none of the steps is written, and no more may
        run outside a transaction.
        """
        self._group_statement("SAVEPOINT step")
        try:
            yield
        except BaseException as exc:
            if not self._in_transaction():
                raise GroupLost(f"{self.location}: store write failed; the transaction was rolled back") from exc
            self._group_statement("ROLLBACK TO SAVEPOINT step", "RELEASE SAVEPOINT step")
            raise
        self._group_statement("RELEASE SAVEPOINT step")

    def _group_statement(self, *statements: str) -> None:
        """A savepoint's statements; one that fails leaves the group's writes unknown, so none is kept."""
        try:
            for statement in statements:
                self.conn.execute(statement)
        except self.driver_error as exc:
            raise GroupLost(
                f"{self.location}: store write failed ({self._told(exc)}); none of the group was written"
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
