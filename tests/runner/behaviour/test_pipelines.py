"""A job of several stages: each result saved under its stage, ``when`` skipping, fingerprints per stage."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from pipelines import calls_by_stage, pipeline
from scenes import counts_kept, counts_of_items, states_of_items, states_told_by_events
from support import make_job, posts, write_jsonl

from runner import export, item_rows, jobs, runs
from runner.errors import JobError
from runner.model import ItemState
from runner.sim import Simulator
from runner.store import Store, schema, views

KEYS = [f"p{i:03d}" for i in range(12)]


def results(store: Store, stage: str) -> dict[str, dict[str, object]]:
    rows = store.rows("SELECT key, result FROM results JOIN items ON items.id = item_id WHERE results.stage = ?", [stage])
    return {row["key"]: json.loads(row["result"]) for row in rows}


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


def test_a_decide_stage_is_refused_until_decisions_exist(tmp_path: Path, store: Store) -> None:
    write_jsonl(tmp_path / "posts.jsonl", posts(2))
    (tmp_path / "job.toml").write_text(
        'name = "d"\ninput = "posts.jsonl"\n[[stage]]\nname = "classify"\n[[stage]]\nname = "review"\n'
        'kind = "decide"\n', encoding="utf-8")
    job = jobs.load(tmp_path / "job.toml")
    with pytest.raises(JobError, match="'review' is of kind 'decide'"):
        import asyncio

        asyncio.run(runs.execute(store, job))


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


def v11_store(path: Path, job: jobs.Job, *, completed: int) -> None:
    """A store as runner wrote it at schema 11: the job's run, its first ``completed`` items completed, the
    others pending, with the counts and events its triggers kept (an old job's JSON has no stages)."""
    conn = sqlite3.connect(path, isolation_level=None)
    for statements in schema.MIGRATIONS[:11]:
        for statement in statements:
            conn.execute(statement)
    conn.execute("PRAGMA user_version = 11")
    saved = {k: v for k, v in json.loads(job.to_json()).items() if k not in ("stages", "staged")}
    conn.execute("INSERT INTO runs (name, job, created_at, updated_at) VALUES (?, ?, 1, 1)",
                 (job.name, json.dumps(saved)))
    rows = list(item_rows.items(job))
    conn.execute("INSERT INTO events (run_id, at, to_state, items) VALUES (1, 1, 'pending', ?)", (len(rows),))
    for n, row in enumerate(rows, 1):
        conn.execute("INSERT INTO items (id, run_id, key, grp, seq, chars, fingerprint, updated_at) "
                     "VALUES (?, 1, ?, ?, ?, ?, ?, 1)", (n, row.key, row.group, row.seq, row.chars, row.fingerprint))
        conn.execute("INSERT INTO inputs (item_id, input) VALUES (?, ?)", (n, row.input))
    conn.execute("INSERT INTO batches (run_id, grp, state, size, chars, created_at) VALUES (1, ?, 'done', ?, 0, 1)",
                 (rows[0].group, completed))
    path = ("pending", "queued", "running", "received", "completed")
    for from_state, to_state in zip(path, path[1:]):  # a batch's path, logged (and counted) once per move
        conn.execute("UPDATE items SET state = ?, batch_id = 1, output = '{\"label\": \"old\"}' WHERE id <= ?",
                     (to_state, completed))
        conn.execute("INSERT INTO events (run_id, batch_id, at, from_state, to_state, items) "
                     "VALUES (1, 1, 1, ?, ?, ?)", (from_state, to_state, completed))
    conn.close()


async def test_an_old_single_stage_store_migrates_its_items_to_its_one_stage_and_runs_on(
    tmp_path: Path, sim: Simulator
) -> None:
    job = make_job(tmp_path, sim.base_url, posts(10))
    db = tmp_path / "old.db"
    v11_store(db, job, completed=4)
    with Store(db) as store:
        assert states_of_items(store) == {(1, "openai-chat", "completed"): 4, (1, "openai-chat", "pending"): 6}
        assert counts_kept(store) == counts_of_items(store)
        assert store.rows("SELECT stage, count(*) AS n FROM results GROUP BY stage") == [
            {"stage": "openai-chat", "n": 4}]
        outcome = await runs.execute(store, job)
        assert sorted(sim.ledger.snapshot()["billed"]) == [f"p{i:03d}" for i in range(4, 10)]
        assert outcome.status["stages"] == {"openai-chat": outcome.status["counts"]}
        assert outcome.status["counts"]["completed"] == 10
        assert counts_kept(store) == counts_of_items(store)
        assert states_told_by_events(store) == states_of_items(store)
        assert views.results(store, store.run_id("test"))[0]["result"] == '{"label": "old"}'

