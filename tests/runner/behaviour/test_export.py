"""``runner export``: every item out as rows, through the real command, from a run with completed and failed items."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from scenes import db_named, location_of
from support import ROOT, make_job, posts, python_run, runner_cli

from runner import export, runs
from runner.providers.handler import PythonHandler
from runner.store import Store

#: What ``python_run`` leaves: p001 failed (its result has no label), p000, p002 and p003 completed.
FAILED = {"kind": "item_invalid", "attempts": 1, "paid_calls": 1, "maybe_paid": 0}


@pytest.fixture
async def run_db(store: Store, tmp_path: Path) -> Path:
    await python_run(store, tmp_path)
    return tmp_path


def test_jsonl_to_stdout_is_one_row_per_item_with_its_result_input_and_failure(run_db: Path) -> None:
    done = runner_cli("export", "test", cwd=run_db)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert [row["key"] for row in rows] == ["p000", "p001", "p002", "p003"]
    assert rows[0] == {
        "key": "p000", "group": "2026-01", "state": "completed", "label": "question",
        "input": {"month": "2026-01", "body": "Something about the product #0"},
        "kind": None, "message": None, "attempts": 1, "paid_calls": 1, "maybe_paid": 0,
        "not_billed": 0, "reused": 0, "tokens_in": 0, "tokens_out": 0, "cost": None,  # no usage from Python
    }
    assert rows[1]["state"] == "failed" and "label" not in rows[1]
    assert {field: rows[1][field] for field in FAILED} == FAILED and rows[1]["message"]


def test_csv_flattens_the_input_and_result_into_columns_and_keeps_the_failure_of_failed_rows(run_db: Path) -> None:
    done = runner_cli("export", "test", "--format", "csv", "--out", "test.csv", cwd=run_db)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "4 rows of 'test' written to test.csv\n"
    with (run_db / "test.csv").open(newline="", encoding="utf-8") as file:
        table = csv.DictReader(file)
        rows = list(table)
    assert table.fieldnames == [
        "key", "group", "state", "label", "input.month", "input.body", "kind", "message", "attempts", "paid_calls",
        "maybe_paid", "not_billed", "reused", "tokens_in", "tokens_out", "cost",
    ]
    assert [(row["key"], row["state"], row["label"]) for row in rows] == [
        ("p000", "completed", "question"), ("p001", "failed", ""), ("p002", "completed", "question"),
        ("p003", "completed", "question"),
    ]
    assert {field: rows[1][field] for field in FAILED} == {field: str(value) for field, value in FAILED.items()}


def test_the_state_option_keeps_only_the_items_in_that_state(run_db: Path) -> None:
    keys = {state: [json.loads(line)["key"] for line in runner_cli("export", "test", "--state", state, cwd=run_db)
                    .stdout.splitlines()] for state in ("completed", "failed", "all")}
    assert keys == {"completed": ["p000", "p002", "p003"], "failed": ["p001"],
                    "all": ["p000", "p001", "p002", "p003"]}


def test_parquet_holds_the_same_columns_and_rows_as_csv(run_db: Path) -> None:
    import pyarrow.parquet as parquet  # in the test extra: this test never skips

    done = runner_cli("export", "test", "--format", "parquet", "--out", "test.parquet", cwd=run_db)
    assert done.returncode == 0, done.stderr
    table = parquet.read_table(run_db / "test.parquet")
    assert table.column_names[:4] == ["key", "group", "state", "label"]
    assert table.column("label").to_pylist() == ["question", None, "question", "question"]
    assert table.column("attempts").to_pylist() == [1, 1, 1, 1]


def test_parquet_without_pyarrow_is_one_line_and_exit_1(run_db: Path, store: Store) -> None:
    hidden = "import sys; sys.modules['pyarrow'] = None; from runner.cli import main; main()"
    done = subprocess.run(
        [sys.executable, "-c", hidden, "export", "test", "--format", "parquet", "--out", "t.parquet",
         "--db", location_of(store)],
        cwd=run_db, env={"PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
    )
    assert (done.returncode, done.stderr) == (
        1, "error: parquet needs pyarrow, which is not installed: pip install pyarrow\n")
    assert not list(run_db.glob("*parquet*"))


@pytest.mark.parametrize(("args", "message"), [
    (["nope"], "error: no run named 'nope' in {db} (runs: test)\n"),
    (["test", "--format", "xlsx"], "error: unknown format 'xlsx': one of jsonl, csv, parquet\n"),
    (["test", "--state", "done"], "error: unknown state 'done': one of all, completed, failed\n"),
    (["test", "--out", "missing/t.csv"], "error: cannot write missing/t.csv: No such file or directory\n"),
])
def test_bad_input_is_one_line_on_stderr_and_exit_1(
    run_db: Path, store: Store, args: list[str], message: str
) -> None:
    done = runner_cli("export", *args, cwd=run_db)
    assert (done.returncode, done.stderr, done.stdout) == (1, message.format(db=db_named(store)), "")


def test_an_export_to_a_pipe_or_device_writes_into_it_and_leaves_it_what_it_was(run_db: Path) -> None:
    fifo = run_db / "rows.fifo"
    os.mkfifo(fifo)
    export_ = subprocess.Popen([sys.executable, "-m", "runner", "export", "test", "--out", str(fifo)], cwd=run_db,
                               env={**os.environ, "PYTHONPATH": str(ROOT)}, stderr=subprocess.PIPE, text=True)
    with fifo.open() as reader:
        rows = [json.loads(line) for line in reader]
    _, errors = export_.communicate(timeout=60)
    assert export_.returncode == 0, errors
    assert [row["key"] for row in rows] == ["p000", "p001", "p002", "p003"]
    assert fifo.is_fifo() and not (run_db / ".rows.fifo.part").exists()


def test_the_export_reads_the_store_a_page_at_a_time(run_db: Path, store: Store) -> None:
    pages = [[row["key"] for row in page] for page in export.pages(store, "test", size=3)]
    assert pages == [["p000", "p001", "p002"], ["p003"]]


def test_the_demo_shows_three_results_and_its_export_gives_every_item_a_label(tmp_path: Path) -> None:
    demo = runner_cli("demo", "--latency", "0", cwd=tmp_path)
    assert demo.returncode == 0, demo.stderr
    assert demo.stdout.splitlines()[-1].startswith("At gpt-4o-mini's price")  # what the demo would have cost
    assert demo.stdout.splitlines()[-9:-1] == [
        "Run 'demo' is in runs.db; see it with:", "runner status demo",
        "Its first results:", "  post-00001: feature_request", "  post-00002: bug_report", "  post-00003: praise",
        "All results:", "runner export demo --format csv --out demo.csv",
    ]
    done = runner_cli("export", "demo", "--format", "csv", "--out", "demo.csv", cwd=tmp_path)
    with (tmp_path / "demo.csv").open(newline="", encoding="utf-8") as file:
        labels = [row["label"] for row in csv.DictReader(file)]
    assert (done.returncode, len(labels), all(labels)) == (0, 2400, True)


async def test_an_export_to_a_reader_that_stops_reading_ends_quietly(tmp_path: Path, store: Store) -> None:
    async def label(payloads: list[dict[str, object]]) -> str:
        return json.dumps({"results": [{"id": p["id"], "label": "question"} for p in payloads]})

    long = make_job(tmp_path, "http://127.0.0.1:9/v1", posts(2_000, body="x" * 200))
    await runs.execute(store, long, provider=PythonHandler(label))  # about 600 KB of rows: more than a pipe holds
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with subprocess.Popen([sys.executable, "-m", "runner", "export", "test"], cwd=tmp_path, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE) as export_run:
        assert export_run.stdout is not None and export_run.stderr is not None
        first = export_run.stdout.read(100)
        export_run.stdout.close()
        said = export_run.stderr.read()
        ended = export_run.wait()
    assert (ended, said, first[:8]) == (0, b"", b'{"key": ')


def test_a_csv_export_of_no_rows_still_has_its_header_row(run_db: Path) -> None:
    assert runner_cli("archive", "test", "--state", "failed", cwd=run_db).returncode == 0
    done = runner_cli("export", "test", "--state", "failed", "--format", "csv", cwd=run_db)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [",".join((*export.HEAD, *export.TAIL))]


def test_an_export_of_a_run_whose_items_are_all_archived_says_so_and_names_archived(run_db: Path) -> None:
    assert runner_cli("archive", "test", "--older", "0m", cwd=run_db).returncode == 0
    done = runner_cli("export", "test", cwd=run_db)
    assert (done.returncode, done.stdout) == (0, "")
    assert done.stderr == ("no rows: its archive holds 4 items of run 'test' (runner archive); export them with "
                           "--archived\n")
