"""The light commands start light: ``--help``, ``status``, ``failures`` and ``export`` import no engine, no
simulator, no HTTP client, no UI library and no data-frame library (issue #15: each cost a cold start
seconds); ``status`` and ``failures`` print their tables without rich, and ``--help`` loads no store.

Each command runs, in a fresh interpreter, on a real store, and that interpreter then names the modules
it loaded. The command's output is checked too: a command that failed before its work would load little.
Speed itself is measured in ``bench/cold_start.py``, never asserted here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import ROOT
from unwritable import SMALL_COUNTS, small_store

#: Top-level packages that no light command may load; logging (3 ms) and secrets (with hashlib and hmac, 2.5 ms)
#: are imported where a store logs a failed checkpoint or names a new run, not on the way to a read.
HEAVY_PACKAGES = ("httpx", "textual", "tui", "ipywidgets", "pandas", "numpy", "pyarrow", "jsonschema_rs",
                  "sqlite_utils", "logging", "secrets")
#: Parts of runner that only running a job (or serving the simulator) needs.
HEAVY_PARTS = ("runner.engine", "runner.sim", "runner.providers", "runner.runs", "runner.terminal_run",
               "runner.tasks", "runner.validation", "rich.progress")

#: Runs the command of ``argv[1:]`` as ``runner`` would, then prints, on its last line, the heavy modules it
#: loaded, whether it loaded rich at all, and whether it loaded the store.
PROBE = f"""
import json, sys
from runner.cli import main
try:
    main(sys.argv[1:], standalone_mode=False)
finally:
    heavy = sorted(m for m in sys.modules if m.split(".")[0] in {HEAVY_PACKAGES!r} or m.startswith({HEAVY_PARTS!r}))
    print(json.dumps({{"heavy": heavy, "rich": "rich" in sys.modules, "store": "runner.store" in sys.modules}}))
"""


def probe(*args: str | Path, cwd: Path, then: str = "") -> tuple[str, dict[str, object]]:
    """The output of ``runner ARGS`` in a fresh interpreter, and what it loaded (after ``then``, if given)."""
    code = PROBE.replace("finally:\n", f"finally:\n    {then}\n") if then else PROBE
    done = subprocess.run([sys.executable, "-c", code, *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert done.returncode == 0, done.stderr
    output, _, loaded = done.stdout.rstrip("\n").rpartition("\n")
    return output, json.loads(loaded)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A closed store with a run ``posts`` of three items: one completed, one failed, one pending."""
    return small_store(tmp_path)


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_imports_nothing_heavy_no_rich_and_no_store(db: Path, flag: str) -> None:
    output, loaded = probe(flag, cwd=db.parent)
    assert "Usage:" in output and "status" in output
    assert loaded == {"heavy": [], "rich": False, "store": False}


def test_status_as_json_imports_nothing_heavy_and_no_rich(db: Path) -> None:
    output, loaded = probe("status", "posts", "--json", "--db", db, cwd=db.parent)
    assert json.loads(output)["counts"] == SMALL_COUNTS
    assert loaded == {"heavy": [], "rich": False, "store": True}


def test_failures_as_json_import_nothing_heavy_and_no_rich(db: Path) -> None:
    output, loaded = probe("failures", "posts", "--json", "--db", db, cwd=db.parent)
    assert [(f["key"], f["kind"]) for f in json.loads(output)] == [("p001", "item_invalid")]
    assert loaded == {"heavy": [], "rich": False, "store": True}


@pytest.mark.parametrize("args, shown", [
    (("status", "posts"), "run posts: 3 items"),
    (("status",), "run posts: 3 items"),
    (("failures", "posts"), "run posts: 1 failed item"),
])
def test_status_and_failures_tables_import_no_rich_and_nothing_heavy(
    db: Path, args: tuple[str, ...], shown: str
) -> None:
    output, loaded = probe(*args, "--db", db, cwd=db.parent)
    assert shown in output
    assert loaded == {"heavy": [], "rich": False, "store": True}


def test_export_imports_nothing_heavy(db: Path) -> None:
    out = db.parent / "posts.export.jsonl"
    _, loaded = probe("export", "posts", "--out", out, "--db", db, cwd=db.parent)
    assert [json.loads(line)["key"] for line in out.read_text().splitlines()] == ["p000", "p001", "p002"]
    assert loaded["heavy"] == []


def test_the_probe_sees_the_heavy_modules_that_running_a_job_imports(db: Path) -> None:
    """What ``runner run`` loads (the engine, httpx) is seen by the same probe: its empty lists above mean something."""
    _, loaded = probe("status", "posts", "--json", "--db", db, cwd=db.parent, then="import runner.terminal_run")
    heavy = loaded["heavy"]
    assert isinstance(heavy, list)
    assert {"httpx", "runner.engine", "runner.terminal_run", "rich.progress", "logging", "secrets"} <= set(heavy)
