"""A run store in a PostgreSQL database (a ``Database``): its connection, transactions and reads.

One connection per store, in autocommit mode, with explicit transactions:
every write is ``BEGIN``, then ``pg_advisory_xact_lock`` on the store's own
key, so that one writer at a time changes a store, as in a SQLite file (the
verbs that read, then write, stay right as they are), held until the commit.
A write that waited ``busy_timeout`` for the lock (``lock_timeout``) is
StoreBusy, nothing written. Reads take no lock. A store opened read-only
(a view) runs every transaction read-only. The schema is
:mod:`.schema_postgres`'s baseline, then the migrations after it.
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any

from ..errors import NotARunStore, StoreError, StoreOutdated
from ..location import shown
from . import schema, schema_postgres
from .database import Params
from .dialect import POSTGRES, Compiling, compiled, parameters
from .transactions import Transactions, busy

if TYPE_CHECKING:
    import psycopg

NO_DRIVER = "PostgreSQL needs the postgres extra (the psycopg driver): pip install -e '.[postgres]' in runner's folder"
NO_STORE = "no run store here (runner run or runner demo makes one)"

#: The tables of the connection's schema, to tell a run store from another program's database.
TABLES = ("SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
          "ORDER BY table_name")


def _driver() -> Any:
    try:
        import psycopg
    except ImportError as exc:
        raise StoreError(NO_DRIVER) from exc
    return psycopg


class PostgresDatabase(Transactions):
    """One run store in a PostgreSQL database (its URL's schema: ``options=-csearch_path=...`` chooses another)."""

    dialect = POSTGRES
    #: A snapshot for the whole transaction (PostgreSQL's default takes one per statement).
    begin_reading = "BEGIN ISOLATION LEVEL REPEATABLE READ"

    def __init__(self, url: str, *, create: bool = True, read_only: bool = False, busy_timeout: float = 10.0) -> None:
        driver = _driver()
        self.url = url
        self.shown = shown(url)
        #: The error of a row that breaks a unique index.
        self.integrity_error: type[Exception] = driver.IntegrityError
        self.driver_error: type[Exception] = driver.Error
        try:
            self.conn: psycopg.Connection[Any] = driver.connect(url, autocommit=True)
        except driver.Error as exc:
            raise StoreError(f"cannot reach the run store at {self.shown} ({_unreachable(exc)})") from exc
        try:
            self._configure(driver, read_only, busy_timeout)
            version = self._identify()
            if read_only or not create:
                if not version:
                    raise StoreError(f"{self.shown}: {NO_STORE}")
            if read_only and version < schema.SCHEMA_VERSION:
                raise StoreOutdated(f"{self.shown} is at schema {version}, this runner reads "
                                    f"{schema.SCHEMA_VERSION}: `runner run NAME` (any writing command) upgrades it")
            if not read_only and version < schema.SCHEMA_VERSION:
                self._migrate()
        except BaseException:
            self.conn.close()
            raise

    def _configure(self, driver: Any, read_only: bool, busy_timeout: float) -> None:
        """Sums as numbers (PostgreSQL's sum of integers is numeric), flags as the numbers 1 and 0 (as SQLite keeps
        them), the lock's key and wait, read-only views."""

        class Number(driver.adapt.Loader):  # type: ignore[misc]
            def load(self, data: Any) -> int | float:
                number = Decimal(bytes(data).decode())
                return int(number) if number == number.to_integral_value() else float(number)

        class Flag(driver.adapt.Dumper):  # type: ignore[misc]
            oid = driver.adapters.types["int8"].oid

            def dump(self, obj: bool) -> bytes:
                return b"1" if obj else b"0"

        self.conn.adapters.register_loader("numeric", Number)
        self.conn.adapters.register_dumper(bool, Flag)
        self.compiling = Compiling(self.conn, POSTGRES)
        self._key = self._one("SELECT hashtext('runner store ' || current_schema())")
        self._set_busy_timeout(busy_timeout)
        if read_only:
            self.conn.execute("SET default_transaction_read_only = on")

    @property
    def location(self) -> str:
        """The store's URL, as a person may see it (no password)."""
        return self.shown

    def _identify(self) -> int:
        """The store's schema version (0: no store yet); another program's tables or a newer runner's are refused."""
        tables = [name for (name,) in self.conn.execute(TABLES)]
        if not tables:
            return 0
        if "store_version" not in tables or "runs" not in tables:
            raise NotARunStore(f"{self.shown} is a PostgreSQL database but not a run store (it has tables "
                               f"{', '.join(tables)}); nothing was changed")
        version = self._one("SELECT version FROM store_version")
        if version > schema.SCHEMA_VERSION:
            raise StoreError(f"{self.shown}: written by a newer runner (schema {version}, this one knows "
                             f"{schema.SCHEMA_VERSION})")
        return int(version)

    def _migrate(self) -> None:
        """The baseline for a new store, then each migration after the store's version, in one transaction."""
        with self.write() as conn:
            version = self._identify()
            if not version:
                for statement in schema_postgres.CREATE:
                    conn.execute(statement)
                version = schema_postgres.BASELINE
            for statements in schema.postgres_migrations(version):
                for statement in statements:
                    conn.execute(statement)
            conn.execute("UPDATE store_version SET version = ?", (schema.SCHEMA_VERSION,))

    def _write_failed(self, exc: Exception) -> StoreError:
        return StoreError(f"{self.shown}: store write failed ({_reason(exc)})")

    def _told(self, exc: Exception) -> str:
        return _reason(exc)

    def _in_transaction(self) -> bool:
        return bool(self.conn.info.transaction_status != 0)  # 0: idle

    def _begin(self) -> None:
        self.conn.execute("BEGIN")
        try:
            self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._key,))
        except self.driver_error as exc:
            self.conn.execute("ROLLBACK")
            if getattr(exc, "sqlstate", None) != "55P03":  # lock_not_available: lock_timeout passed
                raise
            raise busy(self.shown, self.busy_timeout) from exc

    def _set_busy_timeout(self, seconds: float) -> None:
        self.conn.execute(f"SET lock_timeout = {int(seconds * 1000)}")
        self.busy_timeout = seconds

    def rows(self, sql: str, params: Params = ()) -> list[dict[str, Any]]:
        statement = compiled(sql, POSTGRES)
        try:
            cursor = self.conn.execute(statement.sql, parameters(statement, params))
            names = [column.name for column in cursor.description or ()]
            return [dict(zip(names, row)) for row in cursor]
        except self.driver_error as exc:
            raise StoreError(f"{self.shown}: store read failed ({_reason(exc)})") from exc

    def after_large_write(self) -> None:
        """Nothing to give back: the server keeps its own files."""

    def size(self) -> int:
        """The bytes of the store's tables and their indexes."""
        return int(self._one(
            "SELECT coalesce(sum(pg_total_relation_size(format('%I.%I', table_schema, table_name))), 0) "
            "FROM information_schema.tables WHERE table_schema = current_schema()"))

    def vacuum(self) -> None:
        """Give the free space of the store's tables back to the server (``VACUUM``, outside any transaction)."""
        try:
            self.conn.execute("VACUUM")
        except self.driver_error as exc:
            raise StoreError(f"{self.shown}: the vacuum failed ({_reason(exc)}); the store keeps its size") from exc

    def _one(self, sql: str) -> Any:
        """The one value of a query of the store's own (no parameters)."""
        row = self.conn.execute(sql).fetchone()
        return None if row is None else row[0]

    def close(self) -> None:
        self.conn.close()


def _unreachable(exc: BaseException) -> str:
    """Why a connection failed, in a few words: the server refused it, or the reason it gave."""
    text = str(exc)
    for known in ("connection refused", "password authentication failed", "does not exist", "timeout expired"):
        if known in text.lower():
            return known if known != "does not exist" else _reason(exc).rpartition(": ")[2]
    return _reason(exc).rpartition(": ")[2] or _reason(exc)


def _reason(exc: BaseException) -> str:
    """A driver's error in one line (its first: the server's message, without its context)."""
    lines = str(exc).strip().splitlines()
    return lines[0].removeprefix("ERROR:").strip() if lines else type(exc).__name__
