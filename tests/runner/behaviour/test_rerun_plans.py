"""Every re-run shows its plan first: the items charge-safe and those that may be billed again, each priced."""

from __future__ import annotations

import dataclasses
import re
import sqlite3
from pathlib import Path

import pytest
from support import StepClock, make_job, posts, runner_cli

from runner import lease, runs
from runner.sim import Simulator
from runner.store import Store, rerun_plans
from test_cli_confirm import answered

#: A price that makes every estimate more than 0: USD per thousand tokens.
PRICE = {"input": 1.0, "output": 2.0, "per": 1000}
PLAN = re.compile(r"plan: (\d+) items? · (\d+) charge-safe(?: \(est\. \$([\d.]+)\))? · "
                  r"(\d+) may be billed again(?: \(est\. \$([\d.]+)\))?")


def held_run(tmp_path: Path, *, kind: str, task_id: str | None) -> None:
    """The run ``test`` of five posts whose first three a dead engine sent (its task's id saved as ``task_id``):
    held for a person."""
    job = make_job(tmp_path, "http://127.0.0.1:9/v1", posts(5))
    job = dataclasses.replace(job, provider=dataclasses.replace(job.provider, kind=kind, price=PRICE))
    with Store(tmp_path / "runs.db") as store:
        run_id = runs.prepare(store, job, now=1.0)
        lease.acquire(store, "test", token="dead", now=1.0)
        batch = store.claim_batch(run_id, max_items=3, max_chars=10**6, now=2.0, owner="dead")
        assert batch is not None
        store.start_batch(batch.id, lease=("test", "dead"), max_attempts=3, now=3.0)
        if task_id is not None:
            store.save_task_id(batch.id, task_id)
        lease.release(store, "test", token="dead")
        store.recover(run_id, now=5.0)


def dump(tmp_path: Path) -> list[str]:
    with sqlite3.connect(tmp_path / "runs.db") as conn:
        return list(conn.iterdump())


def shown(stdout: str) -> tuple[int, int, int]:
    """The plan's items, charge-safe and may-repeat counts, checking each part with items is priced above 0."""
    found = PLAN.search(stdout)
    assert found is not None, stdout
    total, safe, safe_cost, again, again_cost = found.groups()
    for count, cost in ((safe, safe_cost), (again, again_cost)):
        assert (cost is not None and float(cost) > 0) if int(count) else cost is None, stdout
    return int(total), int(safe), int(again)


def test_a_call_whose_answer_was_lost_held_for_confirmation_is_planned_as_may_be_billed_again(tmp_path: Path) -> None:
    held_run(tmp_path, kind="openai-chat", task_id=None)
    refused = runner_cli("confirm", "test", "--all", cwd=tmp_path)
    assert refused.returncode == 1
    assert shown(refused.stdout) == (3, 0, 3)


def test_a_held_batch_whose_task_id_was_saved_is_planned_as_charge_safe(tmp_path: Path) -> None:
    held_run(tmp_path, kind="openai-batch", task_id="batch_1")
    with Store(tmp_path / "runs.db") as store:
        assert (rerun_plans.confirm_plan(store, "test").charge_safe.items,
                rerun_plans.confirm_plan(store, "test").may_repeat.items) == (3, 0)
    confirmed = runner_cli("confirm", "test", "--all", "--yes", cwd=tmp_path)
    assert confirmed.returncode == 0, confirmed.stderr
    assert shown(confirmed.stdout) == (3, 3, 0)


@pytest.mark.parametrize("verb", [["confirm", "test", "--all"], ["retry", "test", "--kind", "cancelled"]])
def test_a_person_who_answers_no_to_the_plan_changes_nothing(tmp_path: Path, verb: list[str]) -> None:
    held_run(tmp_path, kind="openai-chat", task_id=None)
    if verb[0] == "retry":  # the held items cancelled: failed, their calls' answers lost
        assert runner_cli("cancel", "test", cwd=tmp_path).returncode == 0
    before = dump(tmp_path)
    declined = answered("n", *verb, cwd=tmp_path)
    assert declined.returncode == 1
    assert shown(declined.stdout)[2] == 3
    assert dump(tmp_path) == before


def test_retry_yes_sends_items_that_may_be_billed_again_without_asking(tmp_path: Path) -> None:
    held_run(tmp_path, kind="openai-chat", task_id=None)
    assert runner_cli("cancel", "test", cwd=tmp_path).returncode == 0
    unasked = runner_cli("retry", "test", "--kind", "cancelled", cwd=tmp_path)
    agreed = runner_cli("retry", "test", "--kind", "cancelled", "--yes", cwd=tmp_path)
    assert unasked.returncode == 1
    assert unasked.stderr == ("error: runner retry asks before it sends items that may be billed again; nothing was "
                              "changed; in a script add --yes: runner retry test --kind cancelled --yes\n")
    assert agreed.returncode == 0, agreed.stderr
    assert shown(agreed.stdout) == (5, 2, 3)  # the two never sent are charge-safe
    assert "5 failed items of run 'test' pending again" in agreed.stdout


@pytest.mark.parametrize(("fault", "safe", "again"), [
    ("billed_then_dropped", 0, 2),  # billed, its answer lost: sending it again may bill it twice
    ("http_400", 2, 0),  # refused before running: never billed
])
async def test_a_retry_of_a_call_billed_and_lost_may_be_billed_again_and_of_a_refused_one_is_charge_safe(
    tmp_path: Path, sim: Simulator, store: Store, clock: StepClock, fault: str, safe: int, again: int
) -> None:
    sim.set_faults({"rules": [{"fault": fault}]})
    job = make_job(tmp_path, sim.base_url, posts(2), max_items=1, max_attempts=1, request_retries=0)
    job = dataclasses.replace(job, provider=dataclasses.replace(job.provider, price=PRICE))
    assert (await runs.execute(store, job, clock=clock)).status["counts"]["failed"] == 2
    retried = runner_cli("retry", "test", cwd=tmp_path)  # a script: it asks only when some may be billed again
    assert shown(retried.stdout) == (2, safe, again)
    assert retried.returncode == (1 if again else 0), retried.stderr
