"""The store: durable settings on every connection, one schema version, counts kept by triggers, a -wal kept small."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from scenes import reader_mid_read, v4_store, wal_bytes, write_lock_held
from support import ROOT, add_all, make_job, posts
from test_contract import rule
from unwritable import NOW, Folder, small_store

from runner import control
from runner.jobs import Job
from runner.model import FailureKind
from runner.store import connection, schema, views
from runner.errors import StoreError
from runner.store import Store


# A SQLite file's own settings and version (PostgreSQL's: test_postgres_database.py).

def test_every_connection_uses_wal_full_sync_and_a_busy_timeout(tmp_path: Path) -> None:
    with Store(tmp_path / "runs.db") as store:
        pragmas = {name: store.database.conn.execute(f"PRAGMA {name}").fetchone()[0]
                   for name in ("journal_mode", "synchronous", "busy_timeout")}
    assert pragmas == {"journal_mode": "wal", "synchronous": 2, "busy_timeout": 10_000}


def test_a_new_store_is_at_the_current_schema_version(tmp_path: Path) -> None:
    with Store(tmp_path / "runs.db") as store:
        assert store.database.conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
        tables = {row["name"] for row in store.rows("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"runs", "items", "counts", "batches", "events", "commands", "workers"} <= tables


def test_a_store_from_a_newer_runner_is_refused_untouched(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "runs.db") as conn:
        conn.execute(f"PRAGMA user_version = {schema.SCHEMA_VERSION + 1}")
    with pytest.raises(StoreError, match="written by a newer runner"):
        Store(tmp_path / "runs.db")
    with sqlite3.connect(tmp_path / "runs.db") as conn:
        assert conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0


def test_the_core_imports_no_ui_library() -> None:
    code = "import sys, runner, runner.cli, runner.sim; print(sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'ipywidgets', 'tui')))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_the_core_passes_mypy_strict() -> None:
    result = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_a_store_of_an_older_version_is_migrated_keeping_every_item_and_input(tmp_path: Path) -> None:
    v4_store(tmp_path / "runs.db")
    with Store(tmp_path / "runs.db") as store:
        assert store.database.conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
        kept = store.rows("SELECT key, state, input FROM items JOIN inputs ON item_id = items.id ORDER BY key")
        assert kept == [
            {"key": "k0", "state": "completed", "input": '{"id":"k0"}'},
            {"key": "k1", "state": "completed", "input": '{"id":"k1"}'},
            {"key": "k2", "state": "running", "input": '{"id":"k2"}'},
        ]


def test_a_store_read_where_no_wal_could_be_made_is_read_afresh_once_a_writer_writes(unwritable: Folder) -> None:
    db = small_store(unwritable.path)
    unwritable.read_only()
    with Store(db, read_only=True) as view:
        before = views.status(view, "posts", now=NOW)["breaker"]
        unwritable.writable()
        with Store(db) as engine:
            engine.open_breaker(engine.run_id("posts"), FailureKind.STORE, "opened after the view")
            after = views.status(view, "posts", now=NOW)["breaker"]
    assert (before, after) == ({"state": "closed", "reason": None}, {"state": "open", "reason": "opened after the view"})


def test_a_store_opened_for_reading_writes_nothing_whoever_runs_it(tmp_path: Path) -> None:
    db = small_store(tmp_path)
    before = db.read_bytes()
    with Store(db, read_only=True) as view, pytest.raises(StoreError, match="cannot be written here .* nothing was written"):
        control.pause(view, "posts", now=NOW)
    assert db.read_bytes() == before


def test_opening_a_store_at_the_current_schema_for_writing_waits_for_no_other_writer(tmp_path: Path) -> None:
    db = small_store(tmp_path)
    with write_lock_held(db), Store(db, busy_timeout=30.0) as store:
        assert store.run_names() == ["posts"]


def large_job(tmp_path: Path) -> Job:
    """A job over an input whose items, added in one transaction, write more than ``WAL_LIMIT`` to the -wal."""
    return make_job(tmp_path, "http://127.0.0.1:9/v1", posts(10_000, body="word " * 200))


def test_a_large_input_read_while_a_reader_holds_the_store_open_leaves_the_wal_small(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    job = large_job(tmp_path)
    with Store(db) as store, Store(db, read_only=True) as tui:
        assert views.runs(tui) == []
        add_all(store, job, now=NOW)
        assert wal_bytes(db) < 64 * 1024 < connection.WAL_LIMIT < db.stat().st_size
        assert views.status(tui, "test", now=NOW)["total"] == 10_000


def test_a_wal_a_reader_kept_large_is_truncated_when_the_run_gives_its_lease_back(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    job = large_job(tmp_path)
    with Store(db) as store:
        store.join_run("test", token="engine", pid=1, host="here", now=NOW, choose=rule("engine", NOW))
        with reader_mid_read(db):
            add_all(store, job, now=NOW)
            kept = wal_bytes(db)
        store.leave_run("test", token="engine")
        assert kept > connection.WAL_LIMIT > 64 * 1024 > wal_bytes(db)
