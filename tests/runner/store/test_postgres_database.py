"""A store on PostgreSQL (issue 20): the baseline is SQLite's schema, one writer at a time, views that never write."""

from __future__ import annotations

from pathlib import Path

import pytest
from postgres_server import fresh_schema

from runner.errors import StoreBusy, StoreError
from runner.store import Store, schema

SQLITE_TABLES = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite%' ORDER BY name"
SQLITE_INDEXES = "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL ORDER BY name"
POSTGRES_TABLES = ("SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema() "
                   "AND table_name != 'store_version' ORDER BY table_name")
#: The indexes made by CREATE INDEX (not those of a primary key or a UNIQUE column, which SQLite makes unnamed).
POSTGRES_INDEXES = ("SELECT indexname AS name FROM pg_indexes WHERE schemaname = current_schema() AND indexname "
                    "NOT IN (SELECT conname FROM pg_constraint WHERE connamespace = CAST(current_schema() AS regnamespace)) "
                    "ORDER BY indexname")


def shape(store: Store, tables: str, indexes: str) -> dict[str, object]:
    names = [row["name"] for row in store.rows(tables)]
    return {"tables": {name: [row["name"] for row in store.rows("@columns_of(?)", [name])] for name in names},
            "indexes": [row["name"] for row in store.rows(indexes)]}


def test_a_fresh_postgresql_store_has_the_tables_columns_and_indexes_of_a_fresh_sqlite_store(
    tmp_path: Path, pg_server: str
) -> None:
    with Store(tmp_path / "runs.db") as sqlite, fresh_schema(pg_server) as location, Store(location) as postgres:
        assert shape(postgres, POSTGRES_TABLES, POSTGRES_INDEXES) == shape(sqlite, SQLITE_TABLES, SQLITE_INDEXES)
        assert postgres.rows("SELECT version FROM store_version") == [{"version": schema.SCHEMA_VERSION}]


def test_a_postgresql_store_opened_again_is_not_made_again_and_keeps_its_rows(pg_server: str) -> None:
    with fresh_schema(pg_server) as location:
        with Store(location) as first, first.write() as conn:
            conn.execute("INSERT INTO queues (name, concurrency) VALUES ('shared', 4)")
        with Store(location) as again:
            assert again.rows("SELECT name, concurrency FROM queues") == [{"name": "shared", "concurrency": 4}]


def test_a_write_while_another_connection_holds_the_stores_lock_is_busy_and_writes_nothing(pg_server: str) -> None:
    with fresh_schema(pg_server) as location, Store(location) as store, Store(location) as other:
        with other.write() as conn:  # holds the store's advisory lock until its commit
            conn.execute("INSERT INTO queues (name, concurrency) VALUES ('held', 1)")
            with store.waiting_at_most(0.05), pytest.raises(StoreBusy, match="the store is busy"):
                with store.write() as mine:
                    mine.execute("INSERT INTO queues (name, concurrency) VALUES ('mine', 1)")
        assert store.rows("SELECT name FROM queues") == [{"name": "held"}]


def test_a_postgresql_store_opened_for_a_view_cannot_write(pg_server: str) -> None:
    with fresh_schema(pg_server) as location:
        Store(location).close()
        with Store(location, read_only=True) as view, pytest.raises(StoreError, match="read-only transaction"):
            with view.write() as conn:
                conn.execute("INSERT INTO queues (name, concurrency) VALUES ('q', 1)")
