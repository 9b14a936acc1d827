"""A fan-out's sub-items sent again: a changed stage inside the fan-out re-sends it for the sub-items alone, and a
person's retry of a sub-item after its parent settled; either way the parent waits at its join again, joins again
and goes through the stages after the join again."""

from __future__ import annotations

from pathlib import Path

from fanouts import fan_job, fan_with_recap
from pipelines import calls_by_stage
from support import runner_cli

from runner import control, deciding, export, jobs, runs
from runner.jobs import Job
from runner.model import ItemState
from runner.sim import Simulator
from runner.store import Store

PARENTS = ["p000", "p001", "p002"]
SUBS = sorted(f"{parent}/{n}" for parent in PARENTS for n in range(3))
ONE_FAILS = {"rules": [{"fault": "invalid_items", "keys": ["p001/1"], "times": 1}]}


def with_note(tmp_path: Path, instructions: str) -> Job:
    """The job file as ``fan_job`` wrote it, the stage inside the fan-out (``note``) told ``instructions``."""
    path = tmp_path / "fan.toml"
    path.write_text(path.read_text().replace("Note each chunk.", instructions), encoding="utf-8")
    return jobs.load(path)


def rows(store: Store) -> dict[str, dict[str, object]]:
    return {row["key"]: row for row in export.rows(store, "fan")}


def gathered(store: Store, parent: str) -> list[str | None]:
    """The sub-items a parent's join collected, by key (None: a failed one)."""
    results = rows(store)[parent]["gather"]["results"]  # type: ignore[index]
    return [None if result is None else result["id"] for result in results]


async def test_a_changed_stage_inside_a_fan_out_is_sent_again_for_the_sub_items_only_and_their_parents_join_again(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    await runs.execute(store, fan_job(tmp_path, sim.base_url, after=True))
    sim.ledger.reset()
    outcome = await runs.execute(store, with_note(tmp_path, "Note each chunk, v2."))
    assert outcome.exit_code == 0 and outcome.inside == {"note": (len(SUBS), len(PARENTS))}
    assert outcome.rewound == {} and outcome.gone == {}
    assert calls_by_stage(sim.ledger.snapshot()["calls"]) == {"note": SUBS, "after": PARENTS}
    exported = rows(store)
    assert sorted(exported) == sorted(PARENTS + SUBS)
    assert {(exported[parent]["state"], exported[parent]["stage"]) for parent in PARENTS} == {("completed", "after")}
    assert outcome.status["counts"][ItemState.COMPLETED] == len(PARENTS + SUBS)
    assert outcome.status["waiting_for_sub_items"] == 0


async def test_a_parent_approved_after_its_join_waits_for_a_person_again_once_its_sub_items_are_sent_again(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    await runs.execute(store, fan_job(tmp_path, sim.base_url, review=True, after=True))
    deciding.decide(store, "fan", [], approve=True, data={"ok": True}, now=2e9)
    assert (await runs.execute(store, fan_job(tmp_path, sim.base_url, review=True, after=True))).exit_code == 0
    sim.ledger.reset()
    outcome = await runs.execute(store, with_note(tmp_path, "Note each chunk, v2."))
    assert (outcome.exit_code, outcome.status["needs_decision"]) == (4, len(PARENTS))
    assert calls_by_stage(sim.ledger.snapshot()["calls"]) == {"note": SUBS}
    exported = rows(store)
    assert {(exported[parent]["state"], exported[parent]["stage"]) for parent in PARENTS} == {("waiting", "review")}
    assert all({"review", "after"}.isdisjoint(exported[parent]) for parent in PARENTS)  # made from the old join


async def test_a_stage_added_inside_a_fan_out_is_sent_for_the_sub_items_alone_and_their_parents_join_again(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    await runs.execute(store, fan_job(tmp_path, sim.base_url))
    sim.ledger.reset()
    outcome = await runs.execute(store, fan_with_recap(tmp_path, sim.base_url))
    assert outcome.exit_code == 0 and outcome.inside == {"recap": (len(SUBS), len(PARENTS))}
    assert calls_by_stage(sim.ledger.snapshot()["calls"]) == {"recap": SUBS}
    results = rows(store)["p001"]["gather"]["results"]  # type: ignore[index]
    assert [sorted(result) for result in results] == [["id", "recap"]] * 3


async def test_a_rerun_after_a_stage_inside_a_fan_out_changed_sends_nothing_more(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    await runs.execute(store, fan_job(tmp_path, sim.base_url))
    job = with_note(tmp_path, "Note each chunk, v2.")
    await runs.execute(store, job)
    sim.ledger.reset()
    outcome = await runs.execute(store, job)
    assert sim.ledger.snapshot()["requests"] == 0 and outcome.inside == {}


async def test_a_rerun_says_which_sub_items_it_sends_again_from_a_changed_stage_inside_a_fan_out(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    await runs.execute(store, fan_job(tmp_path, sim.base_url))
    with_note(tmp_path, "Note each chunk, v2.")
    again = runner_cli("run", "fan.toml", cwd=tmp_path, columns=400)
    assert again.returncode == 0, again.stderr
    assert ("stage note inside a fan-out changed (or was added): 9 sub-items sent again from it, the results of "
            "the stages before it kept; their 3 parents wait at the join again, then go through the stages after "
            "it again") in again.stderr


async def test_a_changed_fan_out_stage_makes_its_sub_items_again_and_none_of_the_old_ones_lingers(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    await runs.execute(store, fan_job(tmp_path, sim.base_url))
    sim.ledger.reset()
    outcome = await runs.execute(store, fan_job(tmp_path, sim.base_url, chunks=2))
    assert outcome.exit_code == 0 and outcome.rewound == {"split": len(PARENTS)}
    fewer = sorted(f"{parent}/{n}" for parent in PARENTS for n in range(2))
    assert calls_by_stage(sim.ledger.snapshot()["calls"]) == {"split": PARENTS, "note": fewer}
    assert sorted(rows(store)) == sorted(PARENTS + fewer) and outcome.status["total"] == len(PARENTS + fewer)
    assert gathered(store, "p001") == ["p001/0", "p001/1"]


async def test_a_failed_sub_item_retried_alone_after_its_parent_failed_brings_the_parent_back_to_complete(
    tmp_path: Path, store: Store
) -> None:
    with Simulator(faults=ONE_FAILS).start() as sim:
        job = fan_job(tmp_path, sim.base_url, after=True, max_attempts=1)
        await runs.execute(store, job)
        assert (rows(store)["p001"]["state"], rows(store)["p001"]["kind"]) == ("failed", "sub_item_failed")
        assert control.retry(store, "fan", keys=["p001/1"], now=0.0).again == 1
        assert (rows(store)["p001"]["state"], rows(store)["p001"]["stage"]) == ("waiting", "gather")
        sim.ledger.reset()
        outcome = await runs.execute(store, job, read_input=False)
        sent = calls_by_stage(sim.ledger.snapshot()["calls"])
    assert outcome.exit_code == 0 and sent == {"note": ["p001/1"], "after": ["p001"]}
    assert (rows(store)["p001"]["state"], rows(store)["p001"]["stage"]) == ("completed", "after")
    assert gathered(store, "p001") == ["p001/0", "p001/1", "p001/2"]


async def test_a_failed_sub_item_retried_after_its_parent_completed_without_it_rejoins_and_the_stages_after_run_again(
    tmp_path: Path, store: Store
) -> None:
    with Simulator(faults=ONE_FAILS).start() as sim:
        job = fan_job(tmp_path, sim.base_url, after=True, max_attempts=1, join="allow_failures = true\n")
        await runs.execute(store, job)
        assert gathered(store, "p001") == ["p001/0", None, "p001/2"]
        control.retry(store, "fan", keys=["p001/1"], now=0.0)
        sim.ledger.reset()
        outcome = await runs.execute(store, job, read_input=False)
        sent = calls_by_stage(sim.ledger.snapshot()["calls"])
    assert outcome.exit_code == 0 and sent == {"note": ["p001/1"], "after": ["p001"]}
    assert gathered(store, "p001") == ["p001/0", "p001/1", "p001/2"]
    assert rows(store)["p001"]["gather"]["failed"] == []  # type: ignore[index]
