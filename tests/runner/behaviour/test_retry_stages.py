"""Retry from the failed stage: a failed item is sent again at the stage where it failed, keeping the results of
the stages it passed; ``--stage`` takes the items failed at one stage; ``failures`` says each item's stage."""

from __future__ import annotations

import json
from pathlib import Path

from pipelines import calls_by_stage, pipeline
from support import runner_cli

from runner import control, export, runs
from runner.errors import UnknownStage
from runner.model import ItemState
from runner.sim import Simulator
from runner.store import Store, views

import pytest


def refuse(*keys: str) -> dict[str, object]:
    """A fault plan: every call carrying one of ``keys`` is refused as malformed (a 400, never billed)."""
    return {"rules": [{"fault": "http_400", "keys": list(keys)}]}


async def failed_at_two_stages(tmp_path: Path, sim: Simulator, store: Store) -> None:
    """Run ``triage`` over 4 posts, one a call: p002 fails at classify; p001 passes classify, fails at summarize."""
    sim.set_faults(refuse("p002"))
    await runs.execute(store, pipeline(tmp_path, sim.base_url, count=4, stages="classify", max_items=1))
    sim.set_faults(refuse("p001"))
    await runs.execute(store, pipeline(tmp_path, sim.base_url, count=4, stages="classify summarize", max_items=1))
    sim.set_faults(None)
    sim.ledger.reset()


def classified(store: Store) -> dict[str, object]:
    return {row["key"]: row["classify"] for row in export.rows(store, "triage") if "classify" in row}


async def test_a_retry_sends_a_failed_item_again_at_the_stage_where_it_failed_keeping_the_results_before(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    await failed_at_two_stages(tmp_path, sim, store)
    kept = classified(store)
    assert control.retry(store, "triage", now=100.0, keys=["p001"]).again == 1
    outcome = await runs.execute(store, pipeline(tmp_path, sim.base_url, count=4, stages="classify summarize",
                                                 max_items=1))
    assert calls_by_stage(sim.ledger.snapshot()["calls"]) == {"summarize": ["p001"]}
    assert classified(store)["p001"] == kept["p001"]
    assert views.item(store, store.run_id("triage"), "p001")["state"] == ItemState.COMPLETED
    assert outcome.status["counts"][ItemState.FAILED] == 1


async def test_a_retry_of_one_stage_takes_only_the_items_failed_there(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    await failed_at_two_stages(tmp_path, sim, store)
    assert control.retry(store, "triage", now=100.0, stage="classify").again == 1
    await runs.execute(store, pipeline(tmp_path, sim.base_url, count=4, stages="classify summarize", max_items=1))
    assert calls_by_stage(sim.ledger.snapshot()["calls"]) == {"classify": ["p002"], "summarize": ["p002"]}
    assert [(f["key"], f["stage"]) for f in views.failures(store, "triage")] == [("p001", "summarize")]


async def test_a_retry_naming_a_stage_the_run_does_not_have_is_refused_naming_its_stages_and_changes_nothing(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    await failed_at_two_stages(tmp_path, sim, store)
    with pytest.raises(UnknownStage, match="run 'triage' has no stage 'extract'; its stages: classify, summarize"):
        control.retry(store, "triage", now=100.0, stage="extract")
    assert len(views.failures(store, "triage")) == 2


async def test_runner_failures_shows_each_items_stage_and_runner_retry_takes_one_stage(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    await failed_at_two_stages(tmp_path, sim, store)
    listed = json.loads(runner_cli("failures", "triage", "--json", cwd=tmp_path).stdout)
    table = runner_cli("failures", "triage", "--kind", "bad_request", cwd=tmp_path, columns=120).stdout
    unknown = runner_cli("retry", "triage", "--stage", "extract", cwd=tmp_path)
    retried = runner_cli("retry", "triage", "--stage", "summarize", cwd=tmp_path)
    assert [(f["key"], f["stage"]) for f in listed] == [("p001", "summarize"), ("p002", "classify")]
    assert "stage" in table.splitlines()[1] and "summarize" in table and "classify" in table
    assert unknown.returncode == 2
    assert "run 'triage' has no stage 'extract'; its stages: classify, summarize" in unknown.stderr
    assert retried.returncode == 0, retried.stderr
    # refused at summarize, answered at classify only: nothing at summarize can be billed twice
    assert retried.stdout.startswith("plan: 1 item · 1 charge-safe (cost unknown) · 0 may be billed again · 1 not "
                                     "retryable as it is (refused as sent: fix the cause first, or it fails the same "
                                     "way)\n1 failed item of run 'triage' pending again")
    assert [(f["key"], f["stage"]) for f in views.failures(store, "triage")] == [("p002", "classify")]


async def test_a_rerun_without_the_stage_an_item_failed_at_sends_it_on_at_the_next_stage_it_needs(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    await runs.execute(store, pipeline(tmp_path, sim.base_url, count=6, stages="classify", max_items=1))
    bug = next(key for key, result in classified(store).items() if result["label"] != "praise")  # type: ignore[index]
    sim.set_faults(refuse(bug))
    await runs.execute(store, pipeline(tmp_path, sim.base_url, count=6, max_items=1))
    assert [(f["key"], f["stage"]) for f in views.failures(store, "triage")] == [(bug, "extract")]
    sim.set_faults(None)
    sim.ledger.reset()
    outcome = await runs.execute(store, pipeline(tmp_path, sim.base_url, count=6, stages="classify summarize",
                                                 max_items=1))
    assert calls_by_stage(sim.ledger.snapshot()["calls"]) == {"summarize": [bug]}
    assert outcome.gone == {"extract": 1} and outcome.exit_code == 0
    assert outcome.status["counts"][ItemState.COMPLETED] == 6


async def test_a_rerun_without_the_last_stage_completes_the_items_failed_at_it(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    await failed_at_two_stages(tmp_path, sim, store)
    outcome = await runs.execute(store, pipeline(tmp_path, sim.base_url, count=4, stages="classify", max_items=1))
    assert sim.ledger.snapshot()["requests"] == 0
    assert outcome.gone == {"summarize": 1}
    assert views.item(store, store.run_id("triage"), "p001")["state"] == ItemState.COMPLETED
    assert [(f["key"], f["stage"]) for f in views.failures(store, "triage")] == [("p002", "classify")]


async def test_a_retry_of_one_stage_that_finds_only_cancelled_items_there_names_them_with_the_command(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    await runs.execute(store, pipeline(tmp_path, sim.base_url, count=2, stages="classify review"))
    assert runner_cli("cancel", "triage", cwd=tmp_path).returncode == 0
    at_review = runner_cli("retry", "triage", "--stage", "review", cwd=tmp_path)
    at_classify = runner_cli("retry", "triage", "--stage", "classify", cwd=tmp_path)
    assert at_review.stdout == ("nothing to retry: run 'triage' has no failed item at stage review\n2 items cancelled "
                                "by a person are retried only when named:\n"
                                "runner retry triage --kind cancelled --stage review\n")
    assert at_classify.stdout == "nothing to retry: run 'triage' has no failed item at stage classify\n"
