"""A run defined with a Python handler is saved as such, and goes on only from Python, where its handler is."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from scenes import db_named, location_of
from support import make_job, posts, python_run, runner_cli

from runner import jobs
from runner.notebook import Run
from runner.store import Store

def refusal(store: Store) -> str:
    return ("error: run 'test' was defined with a Python handler (support.label_all_but_p001) and is continued from "
            f"Python: await runner.notebook.Run.attach('test', db={db_named(store)!r}, provider=<that handler>).go()\n")


async def label_all(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"id": item["id"], "label": "question"} for item in items]


async def submit(ref: str, items: list[dict[str, Any]]) -> str:
    return json.dumps([item["id"] for item in items])


async def poll(task_id: str) -> list[dict[str, Any]] | None:
    return [{"id": key, "label": "praise"} for key in json.loads(task_id)]


async def test_a_run_given_a_python_handler_is_saved_as_kind_python_with_the_handlers_name(
    tmp_path: Path, store: Store
) -> None:
    assert (await python_run(store, tmp_path)).exit_code == 3
    saved = store.job("test").provider
    assert (saved.kind, saved.handler) == ("python", "support.label_all_but_p001")
    assert saved.describe() == "python · support.label_all_but_p001"


async def test_a_run_given_a_submit_poll_pair_in_a_notebook_is_saved_by_both_names(tmp_path: Path) -> None:
    assert (await Run("tasks", posts(2), db=tmp_path / "runs.db", provider=(submit, poll)).go()).exit_code == 0
    with Store(tmp_path / "runs.db", read_only=True) as store:
        saved = store.job("tasks").provider
    assert (saved.kind, saved.handler) == ("python", f"{__name__}.submit, {__name__}.poll")


async def test_runner_run_on_a_python_run_says_in_one_line_to_go_on_from_python_and_changes_nothing(
    tmp_path: Path, store: Store
) -> None:
    await python_run(store, tmp_path)
    assert runner_cli("retry", "test", "--yes", cwd=tmp_path).returncode == 0
    before = runner_cli("status", "test", "--json", cwd=tmp_path).stdout
    refused = runner_cli("run", "test", cwd=tmp_path)
    assert (refused.returncode, refused.stdout, refused.stderr) == (1, "", refusal(store))
    assert runner_cli("status", "test", "--json", cwd=tmp_path).stdout == before
    assert json.loads(before)["counts"]["pending"] == 1


async def test_the_call_the_refusal_names_goes_on_with_the_handler_given(tmp_path: Path, store: Store) -> None:
    await python_run(store, tmp_path)
    assert runner_cli("retry", "test", "--yes", cwd=tmp_path).returncode == 0
    outcome = await Run.attach("test", db=location_of(store), provider=label_all).go()
    assert (outcome.exit_code, outcome.status["counts"]["completed"]) == (0, 4)


async def test_status_and_failures_of_a_python_run_read_as_any_others(tmp_path: Path, store: Store) -> None:
    await python_run(store, tmp_path)
    status = runner_cli("status", "test", cwd=tmp_path)
    failures = runner_cli("failures", "test", "--json", cwd=tmp_path)
    assert (status.returncode, status.stderr) == (0, "")
    assert [(f["key"], f["kind"]) for f in json.loads(failures.stdout)] == [("p001", "item_invalid")]


def test_a_job_saved_before_python_runs_had_a_name_still_loads(tmp_path: Path) -> None:
    job = make_job(tmp_path, "http://127.0.0.1:9/v1", posts(2))
    saved = json.loads(job.to_json())
    del saved["provider"]["handler"]
    assert jobs.Job.from_json(json.dumps(saved)) == job
