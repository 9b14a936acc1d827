"""The seam between the store's verbs and a database: what the verbs need of a connection and of a database.

The verbs and the read model are written once, in SQL both backends take
(``:name`` and ``?`` placeholders; see :mod:`runner.store.dialect`), against
these protocols: ``Conn`` is what a verb does inside a transaction (the
connection of a ``write()``), ``Database`` what a store does with its
database: open a transaction, a part of one, a read transaction, read,
wait, close. A SQLite file (:class:`runner.store.connection.SQLiteFile`)
and a PostgreSQL database (:class:`runner.store.postgres.PostgresDatabase`)
are the two kinds.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

#: A statement's parameters: by position (``?``) or by name (``:name``).
Params = Sequence[Any] | Mapping[str, Any]


class Cursor(Protocol):
    """The rows of one statement, each a tuple (read by index), and how many rows it changed."""

    @property
    def rowcount(self) -> int: ...
    @property
    def description(self) -> Any: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...
    def __iter__(self) -> Iterator[Any]: ...


class Conn(Protocol):
    """A connection inside a transaction, as the verbs use it (sqlite3's and the PostgreSQL one's alike)."""

    def execute(self, sql: str, parameters: Params = ..., /) -> Cursor: ...
    def executemany(self, sql: str, parameters: Iterable[Params], /) -> Cursor: ...


class Database(Protocol):
    """One run store's database: its transactions, reads, and where it is."""

    #: Which SQL the database speaks: ``"sqlite"`` or ``"postgres"`` (see ``dialect``).
    dialect: str
    #: The error of a row that breaks a unique index (a key twice).
    integrity_error: type[Exception]

    @property
    def location(self) -> Any: ...
    #: The driver's own connection (sqlite3's, psycopg's), for what only that database does.
    conn: Any
    def write(self) -> AbstractContextManager[Conn]: ...
    def part(self) -> AbstractContextManager[None]: ...
    def reading(self) -> AbstractContextManager[None]: ...
    def rows(self, sql: str, params: Params = ()) -> list[dict[str, Any]]: ...
    def waiting_at_most(self, seconds: float) -> AbstractContextManager[None]: ...
    def after_large_write(self) -> None: ...
    def size(self) -> int: ...
    def vacuum(self) -> None: ...
    def close(self) -> None: ...
