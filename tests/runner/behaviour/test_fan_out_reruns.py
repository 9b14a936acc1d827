"""A fan-out's job run again with its stages changed: sub-items left at a stage gone go on (or complete) so their
parent joins, and a parent sent back to its fan-out retires its old sub-items at once, never working them again."""

from __future__ import annotations

import asyncio
from pathlib import Path

from fanouts import fan_with_recap
from pipelines import calls_by_stage

from runner import control, export, runs
from runner.engine.outcome import Outcome
from runner.model import ItemState
from runner.sim import Simulator
from runner.store import Store

PARENTS = ["p000", "p001", "p002"]
SUBS = sorted(f"{parent}/{n}" for parent in PARENTS for n in range(3))
async def stuck_at(store: Store, tmp_path: Path, sim: Simulator, dead: str) -> None:
    """Run until every sub-item is left unsettled at stage ``dead``, which calls nowhere (its breaker opens); the
    run resumed for the next."""
    first = await runs.execute(store, fan_with_recap(tmp_path, sim.base_url, dead=dead))
    at_dead = first.status["stages"][dead]
    assert at_dead[ItemState.WAITING] and at_dead[ItemState.PENDING] + at_dead[ItemState.WAITING] == len(SUBS)
    assert first.status["waiting_for_sub_items"] == len(PARENTS)
    control.resume(store, "fan", now=0.0)
    sim.ledger.reset()


def joined(store: Store) -> dict[str, list[object]]:
    """Each parent's joined results; every parent completed."""
    parents = [row for row in export.rows(store, "fan") if "parent" not in row]
    assert {row["state"] for row in parents} == {"completed"}
    return {row["key"]: row["gather"]["results"] for row in parents}


async def test_sub_items_at_a_removed_stage_go_on_to_the_next_and_their_parents_join(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    await stuck_at(store, tmp_path, sim, "note")
    outcome: Outcome = await asyncio.wait_for(
        runs.execute(store, fan_with_recap(tmp_path, sim.base_url, drop="note")), 20)
    assert outcome.exit_code == 0 and outcome.status["waiting_for_sub_items"] == 0
    assert calls_by_stage(sim.ledger.snapshot()["calls"]) == {"recap": SUBS}
    assert outcome.gone == {"note": len(SUBS)}
    assert {parent: len(results) for parent, results in joined(store).items()} == {parent: 3 for parent in PARENTS}
    assert all("recap" in result for results in joined(store).values() for result in results)


async def test_sub_items_at_a_removed_stage_whose_stages_are_done_complete_and_their_parents_join_their_results(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    await stuck_at(store, tmp_path, sim, "recap")
    outcome = await asyncio.wait_for(runs.execute(store, fan_with_recap(tmp_path, sim.base_url, drop="recap")), 20)
    assert outcome.exit_code == 0 and sim.ledger.snapshot()["requests"] == 0
    assert outcome.status["counts"][ItemState.COMPLETED] == len(PARENTS + SUBS)
    assert all("note" in result for results in joined(store).values() for result in results)


async def test_a_parent_sent_back_before_its_fan_out_retires_its_old_sub_items_at_once_none_worked_again(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    await stuck_at(store, tmp_path, sim, "note")
    outcome = await runs.execute(store, fan_with_recap(tmp_path, sim.base_url, split="Split each post, v2."))
    assert outcome.exit_code == 0 and outcome.rewound == {"split": len(PARENTS)}
    assert calls_by_stage(sim.ledger.snapshot()["calls"]) == {"split": PARENTS, "note": SUBS, "recap": SUBS}
    assert sorted(row["key"] for row in export.rows(store, "fan") if "parent" in row) == SUBS
    assert len(joined(store)) == len(PARENTS)
