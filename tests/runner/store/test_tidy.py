"""No -wal or -shm beside a store once the last connection to it closes; while another process has it open, they may stay."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from support import make_job, posts, runner_cli
from unwritable import NOW, Folder, digest, small_store

from runner import runs
from runner.store import Store, views


def beside(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir() if path.name.startswith("runs.db"))


def test_a_view_closing_last_after_a_run_leaves_only_the_store(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    writer, view = Store(db), Store(db, read_only=True)
    runs.prepare(writer, make_job(tmp_path, "http://127.0.0.1:9/v1", posts(50)), now=1.0)
    views.standing(view, "test", now=2.0)
    writer.close()
    assert beside(tmp_path) == ["runs.db", "runs.db-shm", "runs.db-wal"]  # the view still has it open
    view.close()
    assert beside(tmp_path) == ["runs.db"]
    with Store(db, read_only=True) as again:
        assert views.standing(again, "test", now=3.0).total == 50


def test_the_files_may_stay_while_another_process_has_the_store_open(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    with Store(db) as store:
        runs.prepare(store, make_job(tmp_path, "http://127.0.0.1:9/v1", posts(5)), now=1.0)
    reader = subprocess.Popen(
        [sys.executable, "-c", "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
         "c.execute('SELECT count(*) FROM items').fetchall(); print('open', flush=True); sys.stdin.read()", str(db)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    assert reader.stdout is not None and reader.stdout.readline() == "open\n"
    with Store(db) as store:
        runs.prepare(store, make_job(tmp_path, "http://127.0.0.1:9/v1", posts(8)), now=2.0)
    assert beside(tmp_path) == ["runs.db", "runs.db-shm", "runs.db-wal"]
    reader.communicate("")
    Store(db, read_only=True).close()
    assert beside(tmp_path) == ["runs.db"]


def test_after_runner_demo_only_the_store_remains(tmp_path: Path) -> None:
    done = runner_cli("demo", "--latency", "0", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert beside(tmp_path) == ["runs.db"]


def left_with_its_wal(folder: Path) -> Path:
    """``folder/runs.db`` with a -wal and -shm beside it, as an engine killed mid-run leaves them."""
    db = small_store(folder)
    code = (
        "import os, sqlite3, sys\n"
        "conn = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "conn.execute(\"UPDATE runs SET updated_at = updated_at + 1\")\n"
        "os._exit(0)\n"  # no close: the -wal stays, its pages not checkpointed
    )
    subprocess.run([sys.executable, "-c", code, str(db)], check=True)
    assert beside(folder) == ["runs.db", "runs.db-shm", "runs.db-wal"]
    return db


def test_a_view_closing_in_a_read_only_folder_leaves_the_files_as_they_were(unwritable: Folder) -> None:
    db = left_with_its_wal(unwritable.path)
    unwritable.read_only()
    before = {name: digest(unwritable.path / name) for name in beside(unwritable.path)}
    with Store(db, read_only=True) as view:
        assert views.standing(view, "posts", now=NOW).total == 3
    assert {name: digest(unwritable.path / name) for name in beside(unwritable.path)} == before


def test_a_view_closing_on_a_read_only_file_leaves_it_and_its_wal_as_they_were(tmp_path: Path) -> None:
    """Even for root, who may write it: no checkpoint. (The -shm is SQLite's index of the -wal, which any reader
    may rebuild.)"""
    db = left_with_its_wal(tmp_path)
    db.chmod(0o444)
    wal = tmp_path / "runs.db-wal"
    before = digest(db), digest(wal)
    with Store(db, read_only=True) as view:
        assert views.standing(view, "posts", now=NOW).total == 3
    assert beside(tmp_path) == ["runs.db", "runs.db-shm", "runs.db-wal"]
    assert (digest(db), digest(wal)) == before


def test_a_view_closing_in_a_folder_whose_modes_forbid_writing_leaves_the_store_and_its_wal(tmp_path: Path) -> None:
    """Even for root, who may write there."""
    folder = tmp_path / "store"
    folder.mkdir()
    db = left_with_its_wal(folder)
    wal = folder / "runs.db-wal"
    before = digest(db), digest(wal)
    folder.chmod(0o555)
    try:
        with Store(db, read_only=True) as view:
            assert views.standing(view, "posts", now=NOW).total == 3
        assert beside(folder) == ["runs.db", "runs.db-shm", "runs.db-wal"]
        assert (digest(db), digest(wal)) == before
    finally:
        folder.chmod(0o755)
