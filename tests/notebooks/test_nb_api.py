"""The notebook API: a job defined in Python, awaited or run in the background, and reattached to."""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support import ROOT, commands_given, make_job, posts, write_jsonl
from unwritable import small_store

from runner import lease, runs
from runner.errors import InputError, JobError, RateLimited, RunError
from runner.notebook import Background, Run
from runner.recovery import Case
from runner.sim import Simulator
from runner.store import Store


def run_of(tmp_path: Path, sim: Simulator, items: Any, name: str = "nb", **options: Any) -> Run:
    options = {"group": "month", "batch": {"max_items": 5}, **options}
    return Run(name, items, db=tmp_path / "runs.db", base_url=sim.base_url, **options)


async def test_items_from_a_list_are_written_beside_the_store_and_the_results_come_back_as_rows(
    tmp_path: Path, sim: Simulator
) -> None:
    run = run_of(tmp_path, sim, posts(12, groups=2), schema={"type": "object", "required": ["label"]})
    outcome = await run.go()
    assert outcome.exit_code == 0
    assert (tmp_path / "runs.db.inputs" / "nb.jsonl").read_text().splitlines()[0] == json.dumps(posts(1)[0])
    rows = run.results()
    assert [r["key"] for r in rows] == [f"p{i:03d}" for i in range(12)]
    assert rows[0]["group"] == "2026-01" and set(rows[0]) == {
        "key", "group", "state", "label", "input.month", "input.body", "kind", "message", "attempts", "paid_calls",
        "maybe_paid", "not_billed", "reused", "tokens_in", "tokens_out", "cost",
    }
    assert run.status()["counts"]["completed"] == 12
    assert run.failures() == []


async def test_items_from_a_dataframe_take_its_index_as_key_dates_as_text_and_nan_as_null(
    tmp_path: Path, sim: Simulator
) -> None:
    pandas = pytest.importorskip("pandas")
    frame = pandas.DataFrame(
        {"body": ["one", "two", None], "score": [1.5, float("nan"), 3.0],
         "seen": pandas.to_datetime(["2026-01-01", "2026-01-02", "2026-01-03"])},
        index=pandas.Index(["a", "b", "c"], name="id"),
    )
    run = run_of(tmp_path, sim, frame, group=None)
    assert (await run.go()).exit_code == 0
    records = [json.loads(line) for line in (tmp_path / "runs.db.inputs" / "nb.jsonl").read_text().splitlines()]
    assert records[1] == {"id": "b", "body": "two", "score": None, "seen": "2026-01-02T00:00:00.000"}
    assert [r["key"] for r in run.results()] == ["a", "b", "c"]
    assert list(run.results(frame=True)["key"]) == ["a", "b", "c"]


def test_records_that_are_not_json_are_refused_with_their_number(tmp_path: Path) -> None:
    with pytest.raises(JobError, match="item 2: cannot be sent as JSON"):
        Run("nb", [{"id": "a"}, {"id": "b", "x": float("nan")}], db=tmp_path / "runs.db")
    with pytest.raises(JobError, match="item 1: expected a dict"):
        Run("nb", ["a"], db=tmp_path / "runs.db")
    record = {"id": "a", "when": datetime.date(2026, 1, 2)}
    Run("nb", [record], db=tmp_path / "runs.db")
    assert json.loads((tmp_path / "runs.db.inputs" / "nb.jsonl").read_text())["when"] == "2026-01-02"


def test_the_job_is_checked_as_a_job_file_is(tmp_path: Path) -> None:
    with pytest.raises(JobError, match="unknown key 'size'"):
        Run("nb", posts(2), db=tmp_path / "runs.db", batch={"size": 3})
    with pytest.raises(JobError, match="'max_items' must be at least 1"):
        Run("nb", posts(2), db=tmp_path / "runs.db", batch={"max_items": 0})


async def test_items_from_a_file_and_a_job_file(tmp_path: Path, sim: Simulator) -> None:
    source = write_jsonl(tmp_path / "posts.jsonl", posts(6))
    assert (await run_of(tmp_path, sim, source, name="file").go()).exit_code == 0
    (tmp_path / "job.toml").write_text('name = "toml"\ninput = "posts.jsonl"\n[provider]\nbase_url = "x"\n')
    run = Run.from_job_file(tmp_path / "job.toml", db=tmp_path / "runs.db", base_url=sim.base_url)
    assert (await run.go()).exit_code == 0
    assert Run.attach("toml", db=tmp_path / "runs.db").status()["counts"]["completed"] == 6


async def test_a_python_handler_and_a_submit_poll_pair_replace_the_http_provider(tmp_path: Path) -> None:
    seen: list[list[str]] = []

    async def classify(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        seen.append([item["id"] for item in items])
        if len(seen) == 1:
            raise RateLimited("slow down", retry_after=0.01)
        return [{"id": item["id"], "label": "question"} for item in items]

    run = Run("handler", posts(4), db=tmp_path / "runs.db", provider=classify, batch={"max_items": 2},
              retry={"backoff": 0.01})
    assert (await run.go()).exit_code == 0
    assert {r["label"] for r in run.results()} == {"question"}
    assert len(seen) == 3 and seen[0] in seen[1:]  # the rate-limited batch went again

    tasks: dict[str, list[dict[str, Any]]] = {}

    async def submit(ref: str, items: list[dict[str, Any]]) -> str:
        tasks[ref] = [{"id": item["id"], "label": "praise"} for item in items]
        return ref

    async def poll(task_id: str) -> list[dict[str, Any]] | None:
        return tasks[task_id]

    pair = Run("tasks", posts(4), db=tmp_path / "runs.db", provider=(submit, poll), batch={"max_items": 2})
    assert (await pair.go()).exit_code == 0
    assert len(tasks) == 2 and {r["label"] for r in pair.results()} == {"praise"}


async def test_start_returns_at_once_and_starting_again_reattaches_to_the_same_engine(
    tmp_path: Path,
) -> None:
    with Simulator(latency=0.05).start() as sim:
        run = run_of(tmp_path, sim, posts(20, groups=2))
        background = run.start()
        assert isinstance(background, Background) and not background.done()
        again = run_of(tmp_path, sim, posts(20, groups=2))  # the cell run a second time
        assert again.start() is background and again.background is background
        outcome = await again.go()  # awaits the live engine rather than starting a second
        assert background.result() is outcome
    assert outcome.exit_code == 0 and outcome.status["counts"]["completed"] == 20
    assert run.background is None  # gone from the registry once it ended
    assert "ended, exit code 0" in repr(background)


async def test_a_background_run_can_be_stopped_and_continued(tmp_path: Path) -> None:
    with Simulator(latency=0.05).start() as sim:
        run = run_of(tmp_path, sim, posts(40, groups=2), batch={"max_items": 2, "concurrency": 1})
        background = run.start()
        while not run.status()["counts"]["completed"]:
            await asyncio.sleep(0.02)
        background.stop()
        stopped = await background
        assert stopped.stopped_for == "stopped from the notebook" and stopped.exit_code == 4
        assert 0 < stopped.status["counts"]["completed"] < 40
        assert (await run.go()).exit_code == 0
        early = run.start()
        early.stop()  # before its engine even exists
        assert (await early).stopped_for == "stopped from the notebook"


async def test_bad_input_and_a_run_held_elsewhere_raise_in_the_cell(tmp_path: Path, sim: Simulator) -> None:
    duplicate = run_of(tmp_path, sim, [{"id": "a", "month": "m"}, {"id": "a", "month": "m"}], name="dup")
    with pytest.raises(InputError, match="duplicate key 'a'"):
        duplicate.start()
    assert duplicate.background is None
    run = run_of(tmp_path, sim, posts(4))
    with Store(tmp_path / "runs.db") as store:
        lease.acquire(store, "nb", token="another engine", now=time.time())
        with pytest.raises(RunError, match="being run by another engine"):
            run.start()
        lease.release(store, "nb", token="another engine")
    assert run.background is None


def test_without_a_running_loop_the_background_is_a_thread(tmp_path: Path, sim: Simulator) -> None:
    run = run_of(tmp_path, sim, posts(10))
    background = run.start()
    deadline = time.monotonic() + 30
    while not background.done():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert background.result().exit_code == 0
    with pytest.raises(RunError, match="still running"):
        Background("x", tmp_path).result()


async def test_failures_and_events_as_rows_and_frames(tmp_path: Path) -> None:
    with Simulator(faults={"rules": [{"fault": "http_400", "keys": ["p001"]}]}).start() as sim:
        run = run_of(tmp_path, sim, posts(4), batch={"max_items": 2})
        assert (await run.go()).exit_code == 3
    assert [(f["key"], f["kind"], f["retryable"]) for f in run.failures()] == [("p001", "bad_request", False)]
    assert [(e["to_state"], e["items"], e["batch_move"]) for e in run.events("p001")] == [
        ("queued", 2, 1), ("running", 2, 1), ("queued", 1, 1), ("running", 1, 1), ("failed", 1, 0),
    ]
    assert sorted((e["key"] or "", e["to_state"], e["items"]) for e in run.events() if e["to_state"] != "queued"
                  and e["to_state"] != "running") == [
        ("", "completed", 1), ("", "completed", 2), ("", "pending", 4), ("", "received", 1), ("", "received", 2),
        ("p001", "failed", 1),
    ]
    assert run.item("p001")["kind"] == "bad_request" and len(run.item("p001")["history"]) == 5
    pytest.importorskip("pandas")
    assert list(run.failures(frame=True)["kind"]) == ["bad_request"]
    assert list(run.events("p001", frame=True)["to_state"])[-1] == "failed"
    with pytest.raises(RunError, match="no item 'nope'"):
        run.events("nope")


def test_a_frame_without_pandas_is_one_error_that_says_how_to_install_it(tmp_path: Path) -> None:
    db = small_store(tmp_path)
    cell = ("import sys; sys.modules['pandas'] = None\n"  # pandas cannot be imported, as where it is not installed
            "from runner.notebook import Run\n"
            f"Run.attach('posts', db={str(db)!r}).failures(frame=True)\n")
    done = subprocess.run([sys.executable, "-c", cell], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        "runner.errors.MissingPackage: frame=True needs pandas, which is not installed: pip install pandas (or the "
        "notebook extra: pip install -e '.[notebook]'), or leave out frame=True for the rows")
    assert "ImportError" not in done.stderr and "During handling" not in done.stderr


async def test_a_persons_controls_are_written_as_commands_that_the_engine_obeys(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    run = run_of(tmp_path, sim, posts(20), batch={"max_items": 5})
    runs.prepare(store, run.job, now=time.time())
    assert run.pause().paused
    assert run.step().steps == 1
    outcome = await run.go()
    assert outcome.stopped_for == "paused by a person" and outcome.status["counts"]["completed"] == 5
    assert run.resume().breaker == "probing"
    assert (await run.go()).exit_code == 0
    assert run.retry(kind="transport") == 0
    assert run.held() == [] and run.confirm() == {Case.POLL: 0, Case.ADOPT: 0, Case.RESUBMIT: 0}
    assert commands_given(store, run="nb") == ["pause", "step", "resume"]  # a retry or confirm of nothing: none


def test_a_run_of_a_ready_job_keeps_its_python_check(tmp_path: Path, sim: Simulator) -> None:
    job = make_job(
        tmp_path, sim.base_url, posts(3), max_attempts=1, check=lambda result: "no" if result["id"] == "p001" else None
    )
    run = Run.from_job(job, db=tmp_path / "runs.db", provider="openai-chat")
    outcome = asyncio.run(run.go())
    assert [f["key"] for f in run.failures()] == ["p001"] and outcome.exit_code == 3


def test_importing_the_notebook_api_loads_no_ui_library() -> None:
    code = "import sys, runner.notebook; print(sorted(m for m in ('ipywidgets', 'textual') if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"


async def test_a_finished_notebook_run_leaves_no_wal_or_shm_beside_its_store(tmp_path: Path, sim: Simulator) -> None:
    run = run_of(tmp_path, sim, posts(12, groups=2))
    assert (await run.go()).exit_code == 0
    run.results()
    assert sorted(path.name for path in tmp_path.iterdir() if path.name.startswith("runs.db")) == [
        "runs.db", "runs.db.inputs"]


async def test_revalidate_from_a_notebook_completes_an_item_the_fixed_schema_passes_with_no_call(
    tmp_path: Path
) -> None:
    calls: list[str] = []

    async def label_all_but_p001(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        calls.extend(item["id"] for item in items)
        return [{"id": item["id"], **({} if item["id"] == "p001" else {"label": "question"})} for item in items]

    def defined(schema: dict[str, Any]) -> Run:
        return Run("nb", posts(4), db=tmp_path / "runs.db", provider=label_all_but_p001, schema=schema,
                   retry={"max_attempts": 1})

    assert (await defined({"type": "object", "required": ["label"]}).go()).exit_code == 3
    calls.clear()
    fixed = defined({"type": "object"})
    done = fixed.revalidate()
    assert done.applied and (done.stages[0].completed, done.may_repeat) == (1, 0)
    assert calls == [] and fixed.status()["counts"]["completed"] == 4


async def test_a_notebook_run_given_a_stricter_schema_sends_no_answered_item_again_on_its_own(tmp_path: Path) -> None:
    calls: list[str] = []

    async def label_p001_praise(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        calls.extend(item["id"] for item in items)
        return [{"id": item["id"], "label": "praise" if item["id"] == "p001" else "question"} for item in items]

    def defined(labels: list[str]) -> Run:
        schema = {"type": "object", "properties": {"label": {"enum": labels}}}
        return Run("nb", posts(4), db=tmp_path / "runs.db", provider=label_p001_praise, schema=schema)

    assert (await defined(["praise", "question"]).go()).exit_code == 0
    calls.clear()
    stricter = defined(["question"])
    outcome = await stricter.go()
    assert calls == [] and outcome.exit_code == 3
    assert outcome.revalidated["python"].refused == 1
    assert stricter.plan_retry(kind="item_invalid").may_repeat.items == 1
