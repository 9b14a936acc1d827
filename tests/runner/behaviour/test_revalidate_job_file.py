"""Revalidating against a job file: applied, the run's job takes the file's output schemas of the stages checked.

As ``runner run JOB.toml`` gives a run its job, so that what runs the run
next (by name, the TUI, the panel, ``runner revalidate NAME``) checks as
the revalidation did, and the results it kept stand for their stage.
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

import pytest
from pipelines import calls_by_stage
from support import make_job, posts, runner_cli
from test_contract import rule
from test_revalidate import NARROW, WIDE, job, labels, praised_after_a_wide_run

from runner import liveness, revalidating, runs
from runner.errors import RunError
from runner.sim import Simulator
from runner.store import Store


async def test_revalidating_against_a_job_file_gives_the_run_the_file_s_output_schema_and_says_so_in_one_line(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    await praised_after_a_wide_run(tmp_path, sim, store)
    narrow = job(tmp_path, sim.base_url, NARROW)
    agreed = runner_cli("revalidate", "pipeline.toml", "--yes", cwd=tmp_path)
    assert agreed.returncode == 0, agreed.stderr
    assert ("run 'triage' now has the job file's output schema of stage classify as its own: running it, "
            "revalidating it by name, the TUI and the panel check against it") in agreed.stdout.splitlines()
    assert store.job("triage").to_json() == narrow.to_json()


async def test_after_revalidating_against_a_job_file_a_run_by_name_sends_only_the_items_it_sent_again(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    praised = await praised_after_a_wide_run(tmp_path, sim, store)
    job(tmp_path, sim.base_url, NARROW)
    assert runner_cli("revalidate", "pipeline.toml", "--yes", cwd=tmp_path).returncode == 0
    sim.ledger.reset()
    ran = runner_cli("run", "triage", "--no-wait", cwd=tmp_path)
    calls = calls_by_stage(sim.ledger.snapshot()["calls"])
    assert calls["classify"] == praised and set(calls.get("summarize", [])) <= set(praised)  # the results kept stand
    assert ran.returncode in (0, 3), ran.stderr
    assert {label for key, label in labels(store).items() if key in praised} <= {"bug", "complaint"}


async def test_a_job_file_s_revalidation_of_one_stage_gives_the_run_that_stage_s_schema_alone(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    await praised_after_a_wide_run(tmp_path, sim, store)
    wide = store.job("triage")
    path = tmp_path / "pipeline.toml"
    job(tmp_path, sim.base_url, NARROW)
    path.write_text(path.read_text().replace('required = ["id", "summary"]', 'required = ["id"]'))
    agreed = runner_cli("revalidate", "pipeline.toml", "--stage", "classify", "--yes", cwd=tmp_path)
    assert agreed.returncode == 0, agreed.stderr
    given = store.job("triage")
    assert given.stage("classify").output_schema["properties"]["label"]["enum"] == ["bug", "complaint"]
    assert given.stage("summarize").output_schema == wide.stage("summarize").output_schema  # checked when it is run


async def test_a_revalidation_against_a_job_file_not_agreed_to_leaves_the_run_s_job_as_it_was(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    wide = await narrowed_after_a_wide_run(tmp_path, sim, store)
    assert runner_cli("revalidate", "pipeline.toml", cwd=tmp_path).returncode == 1  # a script: asked, not agreed
    assert store.job("triage").to_json() == wide


def test_a_job_file_s_schema_with_no_saved_output_to_check_is_the_run_s_all_the_same(tmp_path: Path) -> None:
    with Store(tmp_path / "runs.db") as store:
        runs.prepare(store, job(tmp_path, "http://127.0.0.1:9/v1", WIDE), now=1.0)
    narrow = job(tmp_path, "http://127.0.0.1:9/v1", NARROW)
    said = runner_cli("revalidate", "pipeline.toml", cwd=tmp_path)
    assert (said.returncode, said.stdout.splitlines()) == (0, [
        "stage classify: no saved output", "stage summarize: no saved output",
        "run 'triage' now has the job file's output schema of stage classify as its own: running it, revalidating "
        "it by name, the TUI and the panel check against it",
        "nothing to revalidate: no saved output of run 'triage' changes"])
    with Store(tmp_path / "runs.db", read_only=True) as store:
        assert store.job("triage").to_json() == narrow.to_json()


async def test_a_run_given_a_python_check_is_not_revalidated_against_a_job_without_it(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    checked = make_job(tmp_path, sim.base_url, posts(2), check=lambda result: None)
    await runs.execute(store, checked)
    with pytest.raises(RunError, match="checks its results with a Python function"):
        revalidating.plan(store, "test", job=dataclasses.replace(checked, check=None))


async def test_a_job_file_s_revalidation_is_refused_while_live_workers_run_the_run(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    wide = await narrowed_after_a_wide_run(tmp_path, sim, store)
    now = time.time()  # the worker's heartbeat as the CLI, which reads the clock, will judge it: fresh
    store.join_run("triage", token="other", pid=os.getpid(), host=liveness.this_host(), now=now,
                   choose=rule("other", now))
    sim.ledger.reset()
    refused = runner_cli("revalidate", "pipeline.toml", "--yes", cwd=tmp_path)
    assert (refused.returncode, refused.stderr.strip()) == (1, (
        "error: run 'triage' is being run by workers that check against the output schema it has; nothing was "
        "changed: revalidate against the changed one once they end (or stop them)"))
    assert store.job("triage").to_json() == wide and sim.ledger.snapshot()["calls"] == []


async def narrowed_after_a_wide_run(tmp_path: Path, sim: Simulator, store: Store) -> str:
    """A run of the wide job, its job file then narrowed: the run's job (JSON) as it was."""
    await praised_after_a_wide_run(tmp_path, sim, store)
    job(tmp_path, sim.base_url, NARROW)
    return store.job("triage").to_json()
