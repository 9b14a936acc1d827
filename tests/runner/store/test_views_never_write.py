"""Views never need to write: status and failures read a store they cannot write, and wait for no writer.

Each store here is made unwritable for real (see ``unwritable``), and each
view runs as the ``runner`` command a person types. A SQLite database that is
not a run store is refused by every command, and left byte for byte as it was.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from scenes import another_programs_database, schema_version, v4_store, write_lock_held
from support import ROOT
from unwritable import SMALL_COUNTS, Folder, digest, reader_argv, small_store

from runner.model import FailureKind
from runner.store import schema
from runner.store import Store


def runner_cli(*args: str | Path, cwd: Path, reader: bool = False) -> subprocess.CompletedProcess[str]:
    """``runner ARGS`` in ``cwd``; ``reader``: with no right to write what the files' modes forbid."""
    argv = [sys.executable, "-m", "runner", *map(str, args)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        reader_argv(*argv) if reader else argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


def assert_views_read(db: Path, *, reader: bool = True, breaker: str = "closed") -> None:
    """``runner status`` (table and JSON) and ``runner failures --json`` read the small store at ``db``."""
    status = runner_cli("status", "posts", "--json", "--db", db, cwd=db.parent, reader=reader)
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["counts"] == SMALL_COUNTS
    assert json.loads(status.stdout)["breaker"]["state"] == breaker
    failures = runner_cli("failures", "posts", "--json", "--db", db, cwd=db.parent, reader=reader)
    assert failures.returncode == 0, failures.stderr
    assert [(f["key"], f["kind"], f["message"]) for f in json.loads(failures.stdout)] == [
        ("p001", "item_invalid", "no label")
    ]
    table = runner_cli("status", "--db", db, cwd=db.parent, reader=reader)
    assert table.returncode == 0, table.stderr
    assert "run posts: 3 items" in table.stdout


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    """A folder of its own for the store, whose modes a test may change (given back for the clean-up)."""
    path = tmp_path / "store"
    path.mkdir()
    yield path
    path.chmod(0o755)


def test_views_read_a_store_whose_file_is_read_only(folder: Path) -> None:
    db = small_store(folder)
    db.chmod(0o444)
    before = digest(db)
    assert_views_read(db)
    assert digest(db) == before


def test_views_read_a_store_in_a_read_only_folder_that_no_engine_has_open(folder: Path) -> None:
    db = small_store(folder)
    folder.chmod(0o555)
    before = digest(db)
    assert_views_read(db)
    assert digest(db) == before and sorted(p.name for p in folder.iterdir()) == ["posts.jsonl", "runs.db"]


def test_views_read_a_store_in_a_read_only_folder_as_an_engine_writes_it(folder: Path) -> None:
    db = small_store(folder)
    with Store(db) as engine:
        for path in (*folder.iterdir(), folder):  # the engine's -wal and -shm are there; a reader can write nothing
            path.chmod(0o555 if path == folder else 0o444)
        engine.open_breaker(engine.run_id("posts"), FailureKind.STORE, "written while the folder was read-only")
        assert_views_read(db, breaker="open")


def test_views_read_a_store_on_a_full_disk(unwritable: Folder) -> None:
    db = small_store(unwritable.path)
    unwritable.fill()
    assert_views_read(db, reader=False)


def test_views_do_not_wait_for_another_process_holding_the_write_lock(tmp_path: Path) -> None:
    db = small_store(tmp_path)
    with write_lock_held(db):  # its breaker opened but not committed: not shown
        assert_views_read(db, reader=False)


@pytest.fixture
def foreign(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    """``runs.db``, another program's SQLite database, with ``user_version`` the parameter."""
    db = tmp_path / "runs.db"
    another_programs_database(db, user_version=request.param)
    (tmp_path / "posts.jsonl").write_text('{"id": "p1", "body": "hello"}\n')
    (tmp_path / "job.toml").write_text('name = "posts"\ninput = "posts.jsonl"\n[provider]\nbase_url = "http://127.0.0.1:9/v1"\n')
    return db


@pytest.mark.parametrize("foreign", [0, 3], indirect=True, ids=["user_version 0", "user_version 3"])
@pytest.mark.parametrize("command", [
    ["status"], ["status", "posts", "--json"], ["failures", "posts"], ["tui"], ["pause", "posts"], ["run", "posts"],
    ["run", "job.toml"],
])
def test_a_sqlite_database_of_another_program_is_refused_by_every_command_and_left_as_it_was(
    foreign: Path, command: list[str]
) -> None:
    before, files = digest(foreign), sorted(foreign.parent.iterdir())
    result = runner_cli(*command, cwd=foreign.parent)
    assert (result.returncode, result.stderr) == (
        1, "error: runs.db is a SQLite database but not a run store (it has tables notes, tags); nothing was changed\n"
    )
    assert digest(foreign) == before and sorted(foreign.parent.iterdir()) == files


def test_an_empty_file_becomes_a_new_store_for_writing_and_holds_no_store_for_a_view(tmp_path: Path) -> None:
    (tmp_path / "runs.db").touch()
    view = runner_cli("status", cwd=tmp_path)
    assert (view.returncode, view.stderr) == (1, "error: runs.db: no run store here (runner run or runner demo makes one)\n")
    Store(tmp_path / "runs.db").close()
    assert schema_version(tmp_path / "runs.db") == schema.SCHEMA_VERSION


def test_a_view_of_a_store_at_an_older_schema_changes_nothing_and_names_the_command_that_upgrades_it(
    tmp_path: Path,
) -> None:
    v4_store(tmp_path / "runs.db")
    before = digest(tmp_path / "runs.db")
    for view in (["status"], ["failures", "old"], ["tui"]):
        refused = runner_cli(*view, cwd=tmp_path)
        assert (refused.returncode, refused.stderr) == (
            1, f"error: runs.db is at schema 4, this runner reads {schema.SCHEMA_VERSION}: "
            "`runner run NAME` (any writing command) upgrades it\n"
        )
    assert digest(tmp_path / "runs.db") == before
    assert runner_cli("pause", "old", cwd=tmp_path).returncode == 0
    upgraded = runner_cli("status", "old", "--json", cwd=tmp_path)
    assert upgraded.returncode == 0, upgraded.stderr
    assert json.loads(upgraded.stdout)["counts"]["completed"] == 2
