"""No -wal or -shm beside a store once the last connection to it closes; while another process has it open, they may stay."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from support import make_job, posts, runner_cli

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
