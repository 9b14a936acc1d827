"""What every group of the store's verbs stands on: one opened database, its transactions and reads.

``Store(location)`` opens the database the location names (a SQLite file's
path, or a PostgreSQL URL: :mod:`.location`) and keeps it as ``database``;
the verbs reach it only through the methods here, so they are the same on
every backend.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Self

from .connection import SQLiteFile
from .database import Conn, Database, Params
from ..location import is_url


class StoreBase:
    """A store's opened database; ``create=False`` refuses to make one, ``read_only=True`` opens it for a view."""

    def __init__(
        self, location: str | Path, *, create: bool = True, read_only: bool = False, busy_timeout: float = 10.0
    ) -> None:
        self.database: Database
        if is_url(location):
            from .postgres import PostgresDatabase  # here: a SQLite store never loads the driver

            self.database = PostgresDatabase(str(location), create=create, read_only=read_only,
                                             busy_timeout=busy_timeout)
        else:
            self.database = SQLiteFile(location, create=create, read_only=read_only, busy_timeout=busy_timeout)

    @property
    def path(self) -> Path | str:
        """Where the store is, as a person names it (``--db``): a file's path, or a URL without its password."""
        location: Path | str = self.database.location
        return location

    @property
    def dialect(self) -> str:
        """Which SQL the store's database speaks (``runner.store.dialect``)."""
        return self.database.dialect

    def write(self) -> AbstractContextManager[Conn]:
        """One write transaction (or a part of the one open already): see the database's ``write``."""
        return self.database.write()

    def part(self) -> AbstractContextManager[None]:
        """Inside a transaction that carries several steps, one step's part: see the database's ``part``."""
        return self.database.part()

    def rows(self, sql: str, params: Params = ()) -> list[dict[str, Any]]:
        """The rows of one read, each a dict by column name."""
        return self.database.rows(sql, params)

    @contextmanager
    def waiting_at_most(self, seconds: float) -> Iterator[None]:
        """Inside the block, a write waits at most ``seconds`` for another writer."""
        with self.database.waiting_at_most(seconds):
            yield

    def _shrink_wal(self) -> None:
        """After a large write: let the database give back what the write grew (a SQLite file's -wal)."""
        self.database.after_large_write()

    def close(self) -> None:
        self.database.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

