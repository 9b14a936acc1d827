"""Fan-out and join: one sub-item per chunk, counted down to the parent's join, with its guards."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fanouts import fan_job
from pipelines import CLASSIFY
from support import posts, write_jsonl

from runner import control, deciding, export, jobs, runs
from runner.engine.outcome import Outcome
from runner.model import ItemState
from runner.sim import Simulator
from runner.store import Store, views

PARENTS = ["p000", "p001", "p002"]
SUBS = [f"{parent}/{n}" for parent in PARENTS for n in range(3)]


def rows(store: Store) -> dict[str, dict[str, Any]]:
    return {row["key"]: row for row in export.rows(store, "fan")}


async def test_a_fan_out_makes_one_sub_item_per_chunk_with_stable_keys_and_joins_their_results_in_order(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    outcome = await runs.execute(store, fan_job(tmp_path, sim.base_url, after=True))
    assert outcome.exit_code == 0
    exported = rows(store)
    assert sorted(exported) == sorted(PARENTS + SUBS)
    assert {key: exported[key]["parent"] for key in SUBS} == {key: key.split("/")[0] for key in SUBS}
    assert [exported[f"p001/{n}"]["input"]["_chunk"] for n in range(3)] == exported["p001"]["split"]["chunks"]
    gathered = exported["p001"]["gather"]
    assert [result["id"] for result in gathered["results"]] == ["p001/0", "p001/1", "p001/2"]
    assert gathered["failed"] == []
    assert (exported["p001"]["state"], exported["p001"]["stage"]) == ("completed", "after")
    assert outcome.status["counts"][ItemState.COMPLETED] == 12 and outcome.status["waiting_for_sub_items"] == 0


async def test_a_stage_up_to_a_fan_out_is_passed_once_by_each_parent_and_a_stage_inside_it_by_each_sub_item(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    fan_job(tmp_path, sim.base_url, chunks=2, after=True)
    path, split = tmp_path / "fan.toml", '[[stage]]\nname = "split"\n'
    path.write_text(path.read_text().replace(split, CLASSIFY + split, 1))
    outcome = await runs.execute(store, jobs.load(path))
    assert {stage: row["passed"] for stage, row in outcome.status["stages"].items()} == {
        "classify": 3, "split": 3, "note": 6, "gather": 3, "after": 3}


async def test_a_sub_item_is_sent_its_chunk_and_keeps_its_parents_results_without_the_list(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    await runs.execute(store, fan_job(tmp_path, sim.base_url, count=1))
    sent = [call for call in sim.ledger.snapshot()["calls"] if call["model"] == "m-note"]
    assert sorted(key for call in sent for key in call["ids"]) == ["p000/0", "p000/1", "p000/2"]
    sub = rows(store)["p000/1"]
    assert set(sub["input"]) >= {"_chunk", "body"}
    assert "chunks" not in sub["split"]


async def test_a_rerun_adds_no_duplicate_sub_items_and_makes_no_call(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    job = fan_job(tmp_path, sim.base_url)
    await runs.execute(store, job)
    sim.ledger.reset()
    outcome = await runs.execute(store, job)
    assert sim.ledger.snapshot()["requests"] == 0
    assert sorted(rows(store)) == sorted(PARENTS + SUBS)
    assert outcome.status["total"] == 12


async def test_a_failed_sub_item_fails_its_parent_as_sub_item_failed_without_allow_failures(
    tmp_path: Path, store: Store
) -> None:
    with Simulator(faults={"rules": [{"fault": "invalid_items", "keys": ["p001/1"]}]}).start() as sim:
        outcome = await runs.execute(store, fan_job(tmp_path, sim.base_url, after=True, max_attempts=1))
    assert outcome.exit_code == 3
    exported = rows(store)
    assert (exported["p001"]["state"], exported["p001"]["kind"]) == ("failed", "sub_item_failed")
    assert "p001/1" in exported["p001"]["message"] and "allow_failures" in exported["p001"]["message"]
    assert exported["p001/1"]["state"] == "failed"
    assert [exported[key]["state"] for key in ("p000", "p002")] == ["completed", "completed"]


async def test_allow_failures_completes_the_parent_with_its_failed_sub_items_listed(
    tmp_path: Path, store: Store
) -> None:
    with Simulator(faults={"rules": [{"fault": "invalid_items", "keys": ["p001/1"]}]}).start() as sim:
        job = fan_job(tmp_path, sim.base_url, after=True, max_attempts=1, join="allow_failures = true\n")
        await runs.execute(store, job)
    parent = rows(store)["p001"]
    assert parent["state"] == "completed"
    gathered = parent["gather"]
    assert [None if result is None else result["id"] for result in gathered["results"]] == ["p001/0", None, "p001/2"]
    assert [(failed["key"], failed["kind"]) for failed in gathered["failed"]] == [("p001/1", "item_invalid")]


async def test_a_fan_out_over_max_fan_out_fails_the_item_as_item_invalid(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    outcome = await runs.execute(store, fan_job(tmp_path, sim.base_url, count=1, split="max_fan_out = 2\n"))
    parent = rows(store)["p000"]
    assert (parent["state"], parent["kind"]) == ("failed", "item_invalid")
    assert "3 sub-items, over max_fan_out (2)" in parent["message"]
    assert outcome.status["total"] == 1


async def test_a_state_over_max_state_bytes_fails_the_item_as_item_invalid(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    await runs.execute(store, fan_job(tmp_path, sim.base_url, count=1, split="max_state_bytes = 50\n"))
    parent = rows(store)["p000"]
    assert (parent["state"], parent["kind"]) == ("failed", "item_invalid")
    assert "over max_state_bytes (50)" in parent["message"]


async def test_a_fan_out_of_an_empty_list_goes_straight_through_the_join(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    job = fan_job(tmp_path, sim.base_url, count=1, chunks=0, after=True)
    outcome = await runs.execute(store, job)
    parent = rows(store)["p000"]
    assert (parent["state"], parent["gather"]) == ("completed", {"results": [], "failed": []})
    assert outcome.status["total"] == 1 and outcome.exit_code == 0


async def fan_out_for_bugs(tmp_path: Path, base_url: str, store: Store) -> Outcome:
    """Six posts classified, then split for bugs alone: the others skip the fan-out, its stages and its join."""
    fan_job(tmp_path, base_url, count=6, after=True)
    path, split = tmp_path / "fan.toml", '[[stage]]\nname = "split"\n'
    path.write_text(path.read_text().replace(
        split, f'{CLASSIFY}{split}when = {{ field = "classify.label", equals = "bug" }}\n', 1))
    return await runs.execute(store, jobs.load(path))


async def test_an_item_whose_when_skips_a_fan_out_skips_its_stages_and_join_and_goes_on_after_them(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    outcome = await fan_out_for_bugs(tmp_path, sim.base_url, store)
    exported = rows(store)
    labels = {key: row["classify"]["label"] for key, row in exported.items() if "/" not in key}
    bugs = {key for key, label in labels.items() if label == "bug"}
    assert bugs and bugs != set(labels)
    noted = {key.split("/")[0] for call in sim.ledger.snapshot()["calls"] if call["model"] == "m-note"
             for key in call["ids"]}
    assert noted == bugs
    assert {(exported[key]["state"], exported[key]["stage"], "summary" in exported[key]["after"]) for key in labels} == {
        ("completed", "after", True)}
    assert outcome.exit_code == 0


async def test_the_stages_skipped_with_a_fan_out_say_so_in_the_items_history_not_that_their_own_when_is_false(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    await fan_out_for_bugs(tmp_path, sim.base_url, store)
    praise = next(key for key, row in rows(store).items() if "/" not in key and row["classify"]["label"] != "bug")
    history = views.item_view(store, "fan", praise, now=0.0).history
    assert [line.stage_note for line in history if line.kind == "skipped"] == [
        "stage split skipped: its when is false",
        "stage note skipped with the fan-out 'split', whose when is false",
        "stage gather skipped with the fan-out 'split', whose when is false",
    ]


async def test_a_parent_whose_input_changed_loses_its_sub_items_and_a_retry_fans_it_out_again(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    await runs.execute(store, fan_job(tmp_path, sim.base_url))
    changed = posts(3)
    changed[1]["body"] = "an edited post"
    job = fan_job(tmp_path, sim.base_url)
    write_jsonl(tmp_path / "posts.jsonl", changed)
    await runs.execute(store, job)
    exported = rows(store)
    assert (exported["p001"]["state"], exported["p001"]["kind"]) == ("failed", "input_changed")
    assert not [key for key in exported if key.startswith("p001/")]
    run_id = store.run_id("fan")
    assert views.item(store, run_id, "p000/0")["state"] == "completed"
    sim.ledger.reset()
    control.retry(store, "fan", keys=["p001"], now=0.0)
    outcome = await runs.execute(store, job, read_input=False)
    assert outcome.exit_code == 0
    assert sorted(key for key in rows(store) if key.startswith("p001/")) == ["p001/0", "p001/1", "p001/2"]
    assert sorted(key for call in sim.ledger.snapshot()["calls"] for key in call["ids"]) == [
        "p001", "p001/0", "p001/1", "p001/2"]


async def test_a_persons_retry_of_a_failed_sub_item_and_its_parent_joins_the_parent_once_it_completes(
    tmp_path: Path, store: Store
) -> None:
    with Simulator(faults={"rules": [{"fault": "invalid_items", "keys": ["p001/1"], "times": 1}]}).start() as sim:
        job = fan_job(tmp_path, sim.base_url, after=True, max_attempts=1)
        await runs.execute(store, job)
        assert control.retry(store, "fan", now=0.0).again == 2
        outcome = await runs.execute(store, job, read_input=False)
    assert outcome.exit_code == 0
    parent = rows(store)["p001"]
    assert (parent["state"], parent["stage"]) == ("completed", "after")
    assert [result["id"] for result in parent["gather"]["results"]] == ["p001/0", "p001/1", "p001/2"]


async def test_a_parent_joined_before_a_decide_stage_waits_there_for_a_person_then_goes_on(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    job = fan_job(tmp_path, sim.base_url, review=True, after=True)
    outcome = await runs.execute(store, job)
    assert (outcome.exit_code, outcome.status["needs_decision"], outcome.status["waiting_for_sub_items"]) == (4, 3, 0)
    assert {rows(store)[parent]["stage"] for parent in PARENTS} == {"review"}
    deciding.decide(store, "fan", [], approve=True, data={"ok": True}, now=2e9)
    outcome = await runs.execute(store, job)
    assert outcome.exit_code == 0 and outcome.status["counts"][ItemState.COMPLETED] == 12
    assert {(rows(store)[parent]["stage"], rows(store)[parent]["review"]["ok"]) for parent in PARENTS} == {
        ("after", True)}


async def test_a_decision_for_a_sub_item_whose_decide_stage_lies_past_its_join_is_refused_exit_1(
    tmp_path: Path, store: Store
) -> None:
    from support import runner_cli

    with Simulator(faults={"rules": [{"fault": "http_500", "keys": SUBS}]}).start() as failing:
        job = fan_job(tmp_path, failing.base_url, review=True)
        await runs.execute(store, job)
    before = rows(store)
    assert before["p001/0"]["stage"] == "note" and before["p001/0"]["state"] != ItemState.COMPLETED
    refused = runner_cli("decide", "fan", "p001/0", "--reject", cwd=tmp_path)
    assert refused.returncode == 1, refused.stdout
    assert "it is a sub-item: it stops at its join, and decide stage 'review' after it is its parent's" in (
        refused.stderr)
    assert rows(store) == before
