"""Issue 19's unique work across runs (``[cache] reuse``) over the simulator, whose ledger counts the calls."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from pipelines import calls_by_stage, pipeline
from scenes import location_of
from support import add_all, make_job, posts, runner_cli

from runner import export, jobs, runs
from runner.job_queue import Cache
from runner.jobs import Job, Prompt
from runner.model import Claim, ItemState
from runner.sim import Simulator
from runner.reusing import Reuse
from runner.store import Store, views
from runner.validation import ResultCheck

SCHEMA = {"type": "object", "required": ["id"]}


def reusing(job: Job, name: str) -> Job:
    """The same job as another run, which reuses."""
    return dataclasses.replace(job, name=name, cache=Cache(reuse=True))


def calls(sim: Simulator) -> list[dict[str, Any]]:
    return list(sim.ledger.snapshot()["calls"])


async def test_a_run_over_the_same_work_completes_every_item_with_no_call(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    job = make_job(tmp_path, sim.base_url, posts(6), max_items=2, schema=SCHEMA)
    await runs.execute(store, job)
    made = len(calls(sim))
    outcome = await runs.execute(store, reusing(job, "again"))
    assert outcome.status["counts"][ItemState.COMPLETED] == 6
    assert len(calls(sim)) == made
    assert outcome.status["reused"] == 6
    assert outcome.status["cost"]["charges"] == {"billed": 0, "not_billed": 0, "unknown": 0}  # reused: no charge
    assert {item["key"]: item["result"] for item in views.results(store, store.run_id("again"))} == {
        item["key"]: item["result"] for item in views.results(store, store.run_id("test"))}


async def test_reused_items_are_marked_and_say_so_in_their_history(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    job = make_job(tmp_path, sim.base_url, posts(2), schema=SCHEMA)
    await runs.execute(store, job)
    await runs.execute(store, reusing(job, "again"))
    run_id = store.run_id("again")
    assert [row["reused"] for row in export.rows(store, "again")] == [1, 1]
    assert [(event["kind"], event["message"]) for event in views.history(store, run_id) if event["kind"]] == [
        ("reused", "the result of the same work saved in this store, checked again: no call, not billed")]
    assert "reused 2, not billed" in runner_cli("status", "again", "--db", location_of(store), cwd=tmp_path).stdout


async def test_a_changed_prompt_does_not_reuse(tmp_path: Path, sim: Simulator, store: Store) -> None:
    job = make_job(tmp_path, sim.base_url, posts(3), schema=SCHEMA)
    await runs.execute(store, job)
    changed = dataclasses.replace(reusing(job, "again"), prompt=Prompt(instructions="Label each record."))
    outcome = await runs.execute(store, changed)
    assert sorted(key for call in calls(sim)[1:] for key in call["ids"]) == ["p000", "p001", "p002"]
    assert outcome.status["reused"] == 0


async def test_a_changed_schema_or_input_does_not_reuse(tmp_path: Path, sim: Simulator, store: Store) -> None:
    job = make_job(tmp_path, sim.base_url, posts(2), schema=SCHEMA)
    await runs.execute(store, job)
    await runs.execute(store, dataclasses.replace(reusing(job, "schema"), output_schema={"type": "object"}))
    other = make_job(tmp_path, sim.base_url, posts(2, body="Another text"), name="input", schema=SCHEMA)
    outcome = await runs.execute(store, reusing(other, "input"))
    assert len(calls(sim)) == 3
    assert outcome.status["reused"] == 0


async def test_without_the_key_nothing_is_reused(tmp_path: Path, sim: Simulator, store: Store) -> None:
    job = make_job(tmp_path, sim.base_url, posts(3), schema=SCHEMA)
    await runs.execute(store, job)
    outcome = await runs.execute(store, dataclasses.replace(job, name="again"))
    assert len(calls(sim)) == 2
    assert outcome.status["reused"] == 0


async def test_a_result_reused_is_checked_by_the_python_check_now(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    job = make_job(tmp_path, sim.base_url, posts(2), schema=SCHEMA)
    await runs.execute(store, job)
    strict = dataclasses.replace(reusing(job, "again"), check=lambda result: "no" if result["id"] == "p001" else None)
    outcome = await runs.execute(store, strict)
    assert [key for call in calls(sim)[1:] for key in call["ids"]] == ["p001"] * 3
    assert outcome.status["reused"] == 1


async def test_an_item_reuses_a_result_of_its_own_run(tmp_path: Path, sim: Simulator, store: Store) -> None:
    job = reusing(make_job(tmp_path, sim.base_url, posts(2), schema=SCHEMA), "test")
    await runs.execute(store, job)
    add_all(store, dataclasses.replace(job, name="later"), now=0.0)
    outcome = await runs.execute(store, dataclasses.replace(job, name="later"), read_input=False)
    assert len(calls(sim)) == 1
    assert outcome.status["reused"] == 2


async def test_a_pipeline_stage_reuses_independently(tmp_path: Path, sim: Simulator, store: Store) -> None:
    job = pipeline(tmp_path, sim.base_url, count=6)
    await runs.execute(store, job)
    first = calls_by_stage(calls(sim))
    text = (tmp_path / "pipeline.toml").read_text(encoding="utf-8")
    (tmp_path / "pipeline.toml").write_text(
        text.replace('name = "triage"', 'name = "again"').replace("[[stage]]", "[cache]\nreuse = true\n[[stage]]", 1)
        .replace("Summarize each post.", "Summarize each post in a line."), encoding="utf-8")
    outcome = await runs.execute(store, jobs.load(tmp_path / "pipeline.toml"))
    assert outcome.status["counts"][ItemState.COMPLETED] == 6
    assert calls_by_stage(calls(sim)) == {**first, "summarize": sorted(first["summarize"] * 2)}
    assert outcome.status["stages"]["classify"]["reused"] == 6
    assert outcome.status["stages"]["summarize"]["reused"] == 0


def test_a_reuse_that_is_not_true_or_false_is_one_line_and_exit_1(tmp_path: Path) -> None:
    (tmp_path / "posts.jsonl").write_text('{"id": "a"}\n', encoding="utf-8")
    (tmp_path / "job.toml").write_text('name = "x"\ninput = "posts.jsonl"\n[cache]\nreuse = "yes"\n', encoding="utf-8")
    done = runner_cli("run", "job.toml", "--db", str(tmp_path / "runs.db"), cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == ["error: job.toml [cache]: 'reuse' must be true or false, not 'yes'"]
    assert not (tmp_path / "runs.db").exists()


async def test_results_reused_before_a_stop_are_settled_by_the_next_engine_with_no_call(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    job = make_job(tmp_path, sim.base_url, posts(2), schema=SCHEMA)
    await runs.execute(store, job)
    again = reusing(job, "again")
    add_all(store, again, now=0.0)
    stage = again.stages[0]
    reuse = Reuse(again, stage, stage.fingerprint(again.version), ResultCheck(SCHEMA))
    taken = store.claim_first(store.run_id("again"), [Claim(None, 25, 20_000, reuse=reuse)], now=0.0)
    assert taken is not None and taken.reused and taken.size == 2
    assert views.status(store, "again", now=0.0)["counts"][ItemState.RECEIVED] == 2
    outcome = await runs.execute(store, again, read_input=False)
    assert outcome.status["counts"][ItemState.COMPLETED] == 2
    assert len(calls(sim)) == 1


async def test_a_stage_of_its_own_cache_reuses_alone(tmp_path: Path, sim: Simulator, store: Store) -> None:
    job = pipeline(tmp_path, sim.base_url, count=4)
    await runs.execute(store, job)
    first = calls_by_stage(calls(sim))
    text = (tmp_path / "pipeline.toml").read_text(encoding="utf-8")
    summarize = '[stage.provider]\nmodel = "m-summarize"'
    (tmp_path / "pipeline.toml").write_text(text.replace('name = "triage"', 'name = "again"').replace(
        summarize, f"[stage.cache]\nreuse = true\n{summarize}"), encoding="utf-8")
    outcome = await runs.execute(store, jobs.load(tmp_path / "pipeline.toml"))
    assert calls_by_stage(calls(sim)) == {
        "classify": sorted(first["classify"] * 2), "extract": sorted(first["extract"] * 2),
        "summarize": first["summarize"]}
    assert {stage: row["reused"] for stage, row in outcome.status["stages"].items()} == {
        "classify": 0, "extract": 0, "summarize": len(first["summarize"])}
