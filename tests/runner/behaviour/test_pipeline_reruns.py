"""A pipeline run again with its stages changed: every item whose results no longer stand goes to the first stage
it must go through again, whatever its state, and only that stage's calls (and those after it) are made again."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pipelines import calls_by_stage, pipeline
from support import posts, write_jsonl

from runner import control, export, jobs, runs
from runner.model import ItemState
from runner.sim import Simulator
from runner.store import Store

KEYS = [f"p{i:03d}" for i in range(12)]
DEAD = "http://127.0.0.1:9/v1"


def results(store: Store, stage: str) -> dict[str, dict[str, object]]:
    return {row["key"]: row[stage] for row in export.rows(store, "triage") if stage in row}


def two_stage(tmp_path: Path, base_url: str, summarize_url: str, *, stages: str = "classify summarize",
              classify: str = "Classify each post.", attempts: int = 3) -> jobs.Job:
    """classify then summarize, each its own model, summarize calling ``summarize_url``; no request retried."""
    write_jsonl(tmp_path / "posts.jsonl", posts(12))
    text = (
        'name = "triage"\ninput = "posts.jsonl"\nkey = "id"\n[batch]\nmax_items = 4\nconcurrency = 1\n'
        f'[provider]\nbase_url = "{base_url}"\nmodel = "sim"\ntimeout = 5.0\n'
        f'[retry]\nrequest_retries = 0\nmax_attempts = {attempts}\n'
        f'[[stage]]\nname = "classify"\n[stage.provider]\nmodel = "m-classify"\n'
        f'[stage.prompt]\ninstructions = "{classify}"\n'
    )
    if "summarize" in stages:
        text += (f'[[stage]]\nname = "summarize"\n[stage.provider]\nmodel = "m-summarize"\n'
                 f'base_url = "{summarize_url}"\n')
    (tmp_path / "pipeline.toml").write_text(text, encoding="utf-8")
    return jobs.load(tmp_path / "pipeline.toml")


@pytest.mark.parametrize("before, after, added", [
    ("classify summarize", "classify extract summarize", "extract"), ("summarize", "classify summarize", "classify"),
], ids=["in the middle", "at the start"])
async def test_a_stage_added_is_sent_to_the_completed_items_it_takes_and_the_stages_after_it(
    tmp_path: Path, sim: Simulator, store: Store, before: str, after: str, added: str
) -> None:
    await runs.execute(store, pipeline(tmp_path, sim.base_url, stages=before))
    sim.ledger.reset()
    outcome = await runs.execute(store, pipeline(tmp_path, sim.base_url, stages=after))
    taken = KEYS if added == "classify" else sorted(
        key for key, result in results(store, "classify").items() if result["label"] != "praise")
    assert calls_by_stage(sim.ledger.snapshot()["calls"]) == {added: taken, "summarize": taken}
    assert sorted(results(store, added)) == taken
    assert outcome.rewound == {added: len(taken)}
    assert outcome.status["counts"][ItemState.COMPLETED] == 12


async def test_a_when_widened_sends_the_newly_eligible_items_alone(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    await runs.execute(store, pipeline(tmp_path, sim.base_url))
    before = sorted(results(store, "extract"))
    sim.ledger.reset()
    pipeline(tmp_path, sim.base_url)
    path = tmp_path / "pipeline.toml"
    path.write_text(path.read_text().replace('in = ["bug", "complaint"]', 'in = ["bug", "complaint", "praise"]'))
    outcome = await runs.execute(store, jobs.load(path))
    newly = sorted(set(KEYS) - set(before))
    assert calls_by_stage(sim.ledger.snapshot()["calls"]) == {"extract": newly, "summarize": newly}
    assert sorted(results(store, "extract")) == KEYS
    assert outcome.rewound == {"extract": len(newly)}


async def test_items_waiting_between_stages_go_back_to_an_earlier_stage_that_changed(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    first = await runs.execute(store, two_stage(tmp_path, sim.base_url, DEAD))
    waiting = first.status["stages"]["summarize"][ItemState.WAITING]
    assert waiting
    control.resume(store, "triage", now=0.0)
    sim.ledger.reset()
    second = await runs.execute(store, two_stage(tmp_path, sim.base_url, sim.base_url, classify="Classify, v2."))
    assert second.rewound == {"classify": waiting}
    assert calls_by_stage(sim.ledger.snapshot()["calls"]) == {"classify": KEYS, "summarize": KEYS}
    sim.ledger.reset()
    third = await runs.execute(store, two_stage(tmp_path, sim.base_url, sim.base_url, classify="Classify, v2."))
    assert sim.ledger.snapshot()["requests"] == 0
    assert third.rewound == {}


async def test_items_failed_after_an_earlier_stage_changed_stay_failed_at_that_stage_its_result_forgotten(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    first = await runs.execute(store, two_stage(tmp_path, sim.base_url, DEAD, attempts=1))
    failed = first.status["stages"]["summarize"][ItemState.FAILED]
    assert failed
    control.resume(store, "triage", now=0.0)
    second = await runs.execute(store, two_stage(tmp_path, sim.base_url, sim.base_url, classify="Classify, v2."))
    assert second.status["stages"]["classify"][ItemState.FAILED] == failed
    assert second.status["counts"][ItemState.FAILED] == failed
    assert len(results(store, "classify")) == 12 - failed


async def test_items_waiting_at_a_removed_last_stage_complete(tmp_path: Path, sim: Simulator, store: Store) -> None:
    first = await runs.execute(store, two_stage(tmp_path, sim.base_url, DEAD))
    assert first.status["stages"]["summarize"][ItemState.WAITING]
    control.resume(store, "triage", now=0.0)
    sim.ledger.reset()
    outcome = await asyncio.wait_for(runs.execute(store, two_stage(tmp_path, sim.base_url, "", stages="classify")), 20)
    assert outcome.exit_code == 0 and outcome.stopped_for is None
    assert outcome.status["counts"][ItemState.COMPLETED] == 12
    assert "summarize" not in calls_by_stage(sim.ledger.snapshot()["calls"])
    assert outcome.rewound == {}


async def test_items_waiting_at_a_removed_middle_stage_go_on_to_the_next_stage(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    job = two_stage(tmp_path, sim.base_url, DEAD)
    path = tmp_path / "pipeline.toml"
    path.write_text(path.read_text() + '[[stage]]\nname = "tail"\n[stage.provider]\nmodel = "m-tail"\n')
    first = await runs.execute(store, jobs.load(path))
    waiting = first.status["stages"]["summarize"][ItemState.WAITING]
    assert waiting and job.stages[-1].name == "summarize"
    control.resume(store, "triage", now=0.0)
    path.write_text(path.read_text().replace(f'[[stage]]\nname = "summarize"\n[stage.provider]\nmodel = "m-summarize"\n'
                                             f'base_url = "{DEAD}"\n', ""))
    sim.ledger.reset()
    outcome = await asyncio.wait_for(runs.execute(store, jobs.load(path)), 20)
    assert outcome.exit_code == 0 and outcome.status["counts"][ItemState.COMPLETED] == 12
    assert sorted(results(store, "tail")) == KEYS
    assert outcome.rewound == {}


async def test_a_stage_named_with_a_quote_is_refused_so_its_staleness_is_never_unchecked(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "posts.jsonl", posts(3))
    (tmp_path / "q.toml").write_text(
        'name = "triage"\ninput = "posts.jsonl"\n[[stage]]\nname = \'say "hi"\'\n[[stage]]\nname = "two"\n',
        encoding="utf-8")
    try:
        jobs.load(tmp_path / "q.toml")
    except jobs.JobError as exc:
        assert "without '.' or '\"'" in str(exc)
    else:
        raise AssertionError("a stage name with a quote was taken")


def one_stage_then_two(tmp_path: Path, base_url: str, classify_prompt: str = "") -> tuple[jobs.Job, jobs.Job]:
    """A job of one stage, and the same job given [[stage]] tables: classify (as the job was, unless it is given
    ``classify_prompt``), then summarize."""
    write_jsonl(tmp_path / "posts.jsonl", posts(12))
    head = (f'name = "triage"\ninput = "posts.jsonl"\nkey = "id"\n[provider]\nbase_url = "{base_url}"\n'
            'model = "sim"\n[prompt]\ninstructions = "Classify each post."\n')
    (tmp_path / "one.toml").write_text(head, encoding="utf-8")
    classify = f'[stage.prompt]\ninstructions = "{classify_prompt}"\n' if classify_prompt else ""
    (tmp_path / "two.toml").write_text(head + f'[[stage]]\nname = "classify"\n{classify}[[stage]]\nname = "summarize"\n'
                                       '[stage.prompt]\ninstructions = "Summarize."\n', encoding="utf-8")
    return jobs.load(tmp_path / "one.toml"), jobs.load(tmp_path / "two.toml")


async def test_a_one_stage_run_given_stages_keeps_its_results_as_the_first_stage_s(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    one, two = one_stage_then_two(tmp_path, sim.base_url)
    await runs.execute(store, one)
    outputs = {row["key"]: {k: v for k, v in row.items() if k not in export.OWN}
               for row in export.rows(store, "triage")}
    sim.ledger.reset()
    outcome = await runs.execute(store, two)
    assert outcome.status["counts"][ItemState.FAILED] == 0
    assert outcome.status["counts"][ItemState.COMPLETED] == 12
    assert sim.ledger.snapshot()["requests"] == 1  # summarize alone: its 12 items in one call
    assert outcome.rewound == {"summarize": 12}
    assert {key: {f: v for f, v in result.items() if f != "id"} for key, result in results(store, "classify").items()
            } == {key: {f: v for f, v in output.items() if f != "id"} for key, output in outputs.items()}


async def test_a_one_stage_run_given_stages_whose_first_asks_otherwise_is_sent_again_never_failed(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    one, two = one_stage_then_two(tmp_path, sim.base_url, classify_prompt="Classify, v2.")
    await runs.execute(store, one)
    outcome = await runs.execute(store, two)
    assert outcome.status["counts"][ItemState.FAILED] == 0
    assert outcome.status["counts"][ItemState.COMPLETED] == 12
    assert outcome.rewound == {"classify": 12}


async def test_a_one_stage_run_given_one_stage_of_another_name_counts_its_items_there(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    one, _ = one_stage_then_two(tmp_path, sim.base_url)
    await runs.execute(store, one)
    (tmp_path / "same.toml").write_text((tmp_path / "one.toml").read_text() + '[[stage]]\nname = "classify"\n')
    sim.ledger.reset()
    outcome = await runs.execute(store, jobs.load(tmp_path / "same.toml"))
    assert sim.ledger.snapshot()["requests"] == 0
    assert {stage: counts[ItemState.COMPLETED] for stage, counts in outcome.status["stages"].items()} == {
        "classify": 12}
