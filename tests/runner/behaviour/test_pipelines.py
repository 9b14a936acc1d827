"""A job of several stages: each result saved under its stage, ``when`` skipping, fingerprints per stage."""

from __future__ import annotations

import click

from pathlib import Path

from pipelines import calls_by_stage, pipeline
from support import posts, write_jsonl

from runner import export, runs, tables
from runner.model import ItemState
from runner.sim import Simulator
from runner.store import Store, views

KEYS = [f"p{i:03d}" for i in range(12)]


def results(store: Store, stage: str) -> dict[str, dict[str, object]]:
    """Each item's saved result of ``stage`` (the key left out), as the export reads them."""
    return {row["key"]: row[stage] for row in export.rows(store, "triage") if stage in row}


def bugs_and_complaints(store: Store) -> list[str]:
    return sorted(key for key, result in results(store, "classify").items() if result["label"] != "praise")


async def test_each_stage_saves_its_result_and_the_item_completes_past_the_last(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    outcome = await runs.execute(store, pipeline(tmp_path, sim.base_url))
    assert outcome.exit_code == 0
    assert outcome.status["counts"][ItemState.COMPLETED] == 12
    sent = calls_by_stage(sim.ledger.snapshot()["calls"])
    assert sent == {"classify": KEYS, "extract": bugs_and_complaints(store), "summarize": KEYS}
    assert sorted(results(store, "summarize")) == KEYS


async def test_a_stage_whose_when_is_false_is_skipped_saves_no_result_and_is_shown_skipped(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    await runs.execute(store, pipeline(tmp_path, sim.base_url))
    skipped = sorted(set(KEYS) - set(bugs_and_complaints(store)))
    assert skipped and sorted(results(store, "extract")) == bugs_and_complaints(store)
    run_id = store.run_id("triage")
    history = views.item_history(store, views.item(store, run_id, skipped[0])["id"])
    assert [(line["stage"], line["kind"]) for line in history if line["kind"] == "skipped"] == [("extract", "skipped")]


async def test_changing_the_last_stage_prompt_sends_only_its_calls_again(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    await runs.execute(store, pipeline(tmp_path, sim.base_url))
    kept = results(store, "classify")
    sim.ledger.reset()
    outcome = await runs.execute(store, pipeline(tmp_path, sim.base_url, summarize="Summarize in one line."))
    assert calls_by_stage(sim.ledger.snapshot()["calls"]) == {"summarize": KEYS}
    assert outcome.rewound == {"summarize": 12}
    assert results(store, "classify") == kept
    assert outcome.status["counts"][ItemState.COMPLETED] == 12


async def test_a_stage_added_at_the_end_sends_only_its_calls(tmp_path: Path, sim: Simulator, store: Store) -> None:
    await runs.execute(store, pipeline(tmp_path, sim.base_url, stages="classify extract"))
    sim.ledger.reset()
    outcome = await runs.execute(store, pipeline(tmp_path, sim.base_url))
    assert calls_by_stage(sim.ledger.snapshot()["calls"]) == {"summarize": KEYS}
    assert outcome.rewound == {"summarize": 12}
    assert outcome.status["counts"][ItemState.COMPLETED] == 12


async def test_a_finished_pipeline_run_again_makes_no_call(tmp_path: Path, sim: Simulator, store: Store) -> None:
    job = pipeline(tmp_path, sim.base_url)
    await runs.execute(store, job)
    sim.ledger.reset()
    outcome = await runs.execute(store, job)
    assert sim.ledger.snapshot()["requests"] == 0
    assert outcome.rewound == {}


async def test_an_input_changed_starts_the_item_over_at_the_first_stage(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    await runs.execute(store, pipeline(tmp_path, sim.base_url))
    changed = posts(12)
    changed[3]["body"] = "an edited post"
    job = pipeline(tmp_path, sim.base_url)
    write_jsonl(tmp_path / "posts.jsonl", changed)
    outcome = await runs.execute(store, job)
    item = views.item(store, store.run_id("triage"), "p003")
    assert (item["state"], item["stage"]) == ("failed", "classify")
    assert "p003" not in results(store, "classify") | results(store, "summarize")
    assert outcome.status["counts"][ItemState.FAILED] == 1


async def test_status_counts_items_per_stage_and_completed_means_past_the_last(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    await runs.execute(store, pipeline(tmp_path, sim.base_url, stages="classify extract"))
    outcome = await runs.execute(store, pipeline(tmp_path, sim.base_url), read_input=False)
    status = views.status(store, "triage", now=0.0)
    assert list(status["stages"]) == ["classify", "extract", "summarize"]
    assert status["stages"]["summarize"]["completed"] == status["counts"]["completed"] == 12
    assert outcome.exit_code == 0


async def test_an_export_writes_one_column_group_per_stage(tmp_path: Path, sim: Simulator, store: Store) -> None:
    await runs.execute(store, pipeline(tmp_path, sim.base_url))
    rows = {row["key"]: row for row in export.rows(store, "triage")}
    bug = bugs_and_complaints(store)[0]
    assert set(rows[bug]) >= {"stage", "classify", "extract", "summarize", "input"}
    assert set(rows[bug]["classify"]) == {"label"}
    praise = next(key for key in KEYS if key not in bugs_and_complaints(store))
    assert "extract" not in rows[praise]
    assert "classify.label" in export.flat(rows[bug])



async def test_runner_status_shows_a_row_per_stage_with_what_passed_it_and_skipped_it_once_nothing_is_there(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    await runs.execute(store, pipeline(tmp_path, sim.base_url, stages="classify extract"))
    lines = [click.unstyle(line).split() for line in tables.status_table(views.standing(store, "triage", now=0.0))]
    extracted = len(bugs_and_complaints(store))
    assert lines[lines.index(["by", "stage"]) + 1:] == [
        ["stage", "at", "it", "now", "passed", "skipped"], ["─" * 38],
        ["classify", str(12 - extracted), "completed", "12"],  # those that skip the last stage end at the one before
        ["extract", str(extracted), "completed", str(extracted), str(12 - extracted)]]


async def test_a_stage_may_call_while_the_next_submits_a_batch_api_task(tmp_path: Path, store: Store) -> None:
    with Simulator(batch_seconds=0.05).start() as sim:
        job = pipeline(tmp_path, sim.base_url, stages="classify summarize", summarize_kind="openai-batch")
        outcome = await runs.execute(store, job)
        ledger = sim.ledger.snapshot()
    assert outcome.exit_code == 0 and outcome.status["counts"][ItemState.COMPLETED] == 12
    assert ledger["batches_created"] >= 1
    assert sorted(results(store, "summarize")) == KEYS


async def test_switching_a_stage_to_the_batch_api_keeps_its_results(tmp_path: Path, store: Store) -> None:
    with Simulator(batch_seconds=0.05).start() as sim:
        await runs.execute(store, pipeline(tmp_path, sim.base_url, stages="classify summarize"))
        sim.ledger.reset()
        outcome = await runs.execute(store, pipeline(tmp_path, sim.base_url, stages="classify summarize",
                                                     summarize_kind="openai-batch"))
        ledger = sim.ledger.snapshot()
    assert outcome.rewound == {}
    assert ledger["requests"] == 0 and not ledger["billed"]


async def test_an_export_writes_the_stage_groups_in_stage_order_and_a_decision_as_approved_true_or_false(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    from runner import deciding, jobs

    stages = "classify extract review summarize"
    pipeline(tmp_path, sim.base_url, stages=stages)
    job_file = tmp_path / "pipeline.toml"  # praise alone is extracted: p000 (a bug, seen first) skips extract
    job_file.write_text(job_file.read_text().replace('in = ["bug", "complaint"]', 'in = ["praise"]'))
    job = jobs.load(job_file)
    await runs.execute(store, job)
    assert "p000" in bugs_and_complaints(store) and "p000" not in results(store, "extract")
    assert results(store, "extract")
    deciding.decide(store, "triage", ["p001"], approve=False, now=2e9)
    deciding.decide(store, "triage", [], approve=True, now=2e9)
    await runs.execute(store, job)
    out = tmp_path / "triage.csv"
    export.write(store, "triage", str(out), fmt="csv")
    header = out.read_text(encoding="utf-8").splitlines()[0].split(",")
    groups = [column.partition(".")[0] for column in header if column.partition(".")[0] in stages.split()]
    assert list(dict.fromkeys(groups)) == stages.split()
    assert "review.approved" in header and "review" not in header
    rows = {row["key"]: row for row in export.rows(store, "triage")}
    assert [group for group in rows["p000"] if group in stages.split()] == ["classify", "review", "summarize"]
    assert rows["p000"]["review"] == {"approved": True} and rows["p001"]["review"] == {"approved": False}
