"""A ``decide`` stage: items wait there for a person, who approves (with data) or rejects them, before or after."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pipelines import calls_by_stage, pipeline
from scenes import location_of
from support import StepClock, posts, runner_cli, write_jsonl

from runner import deciding, export, jobs, runs
from runner.errors import RunError
from runner.model import FailureKind, ItemState
from runner.sim import Simulator
from runner.store import Store, views

KEYS = [f"p{i:03d}" for i in range(6)]
REVIEWED = "classify review summarize"


async def reviewed(tmp_path: Path, sim: Simulator, store: Store, *, stages: str = REVIEWED) -> runs.Outcome:
    return await runs.execute(store, pipeline(tmp_path, sim.base_url, count=6, stages=stages))


def state(store: Store, key: str) -> tuple[str, str, str]:
    row = views.item(store, store.run_id("triage"), key)
    assert row is not None
    return row["stage"], row["state"], row["hold"]


async def test_items_reaching_a_decide_stage_wait_with_hold_decide_and_are_not_sent(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    outcome = await reviewed(tmp_path, sim, store)
    assert calls_by_stage(sim.ledger.snapshot()["calls"]) == {"classify": KEYS}
    assert {state(store, key) for key in KEYS} == {("review", ItemState.WAITING, "decide")}
    assert outcome.status["needs_decision"] == 6 and outcome.status["counts"][ItemState.WAITING] == 6
    assert outcome.status["stages"]["review"][ItemState.WAITING] == 6


async def test_the_run_exits_4_when_only_decisions_are_left(tmp_path: Path, sim: Simulator, store: Store) -> None:
    outcome = await reviewed(tmp_path, sim, store)
    assert outcome.exit_code == 4
    assert outcome.stopped_for == "6 items wait for a person's decision"


async def test_approve_moves_on_with_data_saved_under_the_stage(tmp_path: Path, sim: Simulator, store: Store) -> None:
    await reviewed(tmp_path, sim, store)
    done = deciding.decide(store, "triage", ["p001"], approve=True, data={"ok": True}, now=2e9)
    assert done == (1, 0, 0)
    assert state(store, "p001") == ("summarize", ItemState.PENDING, "none")
    sim.ledger.reset()
    await reviewed(tmp_path, sim, store)
    assert calls_by_stage(sim.ledger.snapshot()["calls"]) == {"summarize": ["p001"]}
    (row,) = [row for row in export.rows(store, "triage") if row["key"] == "p001"]
    assert row["review"] == {"approved": True, "ok": True} and "summary" in row["summarize"]


async def test_approve_at_the_last_stage_completes_the_item_with_its_data(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    await reviewed(tmp_path, sim, store, stages="classify review")
    deciding.decide(store, "triage", [], approve=True, data={"note": "fine"}, now=2e9)
    standing = views.standing(store, "triage", now=2e9)
    assert standing.counts[ItemState.COMPLETED] == 6 and standing.needs_decision == 0
    assert views.item(store, store.run_id("triage"), "p003")["output"] == '{"note": "fine"}'


async def test_reject_fails_with_rejected_and_a_retry_sends_it_back_to_the_decide_stage_saying_so(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    await reviewed(tmp_path, sim, store)
    assert deciding.decide(store, "triage", ["p002"], approve=False, now=2e9) == (0, 1, 0)
    (failed,) = views.failures(store, "triage")
    assert (failed["key"], failed["kind"], failed["retryable"]) == ("p002", FailureKind.REJECTED, True)
    sim.ledger.reset()
    retried = runner_cli("retry", "triage", "--stage", "review", cwd=tmp_path)
    assert retried.returncode == 0, retried.stderr
    assert retried.stdout.splitlines()[1].startswith("1 failed item of run 'triage' waiting again for a person's decision")
    assert state(store, "p002") == ("review", ItemState.WAITING, "decide")
    assert sim.ledger.snapshot()["requests"] == 0


async def test_a_decision_before_arrival_is_kept_and_applied_on_arrival(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    job = pipeline(tmp_path, sim.base_url, count=6, stages=REVIEWED)
    runs.prepare(store, job, now=1e9)
    assert deciding.decide(store, "triage", ["p004"], approve=True, data={"early": 1}, now=1e9) == (0, 0, 1)
    assert deciding.decide(store, "triage", ["p005"], approve=False, now=1e9) == (0, 0, 1)
    await runs.execute(store, job)
    assert calls_by_stage(sim.ledger.snapshot()["calls"]) == {"classify": KEYS, "summarize": ["p004"]}
    assert state(store, "p004") == ("summarize", ItemState.COMPLETED, "none")
    assert state(store, "p005")[1:] == (ItemState.FAILED, "none")
    assert views.standing(store, "triage", now=2e9).needs_decision == 4


async def test_all_waiting_approves_every_item_waiting(tmp_path: Path, sim: Simulator, store: Store) -> None:
    await reviewed(tmp_path, sim, store)
    assert deciding.decide(store, "triage", [], approve=True, now=2e9) == (6, 0, 0)
    outcome = await reviewed(tmp_path, sim, store)
    assert outcome.exit_code == 0 and outcome.status["counts"][ItemState.COMPLETED] == 6


async def test_deciding_an_item_past_its_decide_stage_is_refused_and_changes_nothing(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    await reviewed(tmp_path, sim, store, stages="classify review")
    deciding.decide(store, "triage", ["p000"], approve=True, now=2e9)
    with pytest.raises(RunError, match="'p000': it is completed: past its decide stage: nothing was changed"):
        deciding.decide(store, "triage", ["p001", "p000"], approve=True, now=2e9)
    assert state(store, "p001") == ("review", ItemState.WAITING, "decide")


def test_runner_run_stops_at_the_decisions_with_the_commands_and_runner_decide_takes_them(
    tmp_path: Path, sim: Simulator
) -> None:
    pipeline(tmp_path, sim.base_url, count=6, stages=REVIEWED)
    stopped = runner_cli("run", "pipeline.toml", cwd=tmp_path)
    assert stopped.returncode == 4, stopped.stderr
    assert "stopped: 6 items wait for a person's decision" in stopped.stderr
    assert "runner decide triage --all-waiting --approve" in stopped.stderr
    decided = runner_cli("decide", "triage", "p000", "--approve", "--data", '{"ok": true}', cwd=tmp_path)
    assert decided.returncode == 0, decided.stderr
    assert "1 item of run 'triage' approved" in decided.stdout
    status = json.loads(runner_cli("status", "triage", "--json", cwd=tmp_path).stdout)
    assert status["needs_decision"] == 5 and status["stages"]["summarize"]["pending"] == 1
    shown = runner_cli("status", "triage", cwd=tmp_path, columns=120).stdout
    assert "5 items waiting for a decision (not for a time)" in shown
    assert shown.endswith("runner decide triage --all-waiting --approve\n")
    both = runner_cli("decide", "triage", "p001", "--approve", "--reject", cwd=tmp_path)
    assert both.returncode == 2 and "give one of --approve or --reject" in both.stderr
    not_object = runner_cli("decide", "triage", "p001", "--approve", "--data", "[1]", cwd=tmp_path)
    assert not_object.returncode == 2 and "a JSON object" in not_object.stderr
    unknown = runner_cli("decide", "triage", "nope", "--reject", cwd=tmp_path)
    assert unknown.returncode == 1 and "has no item 'nope'" in unknown.stderr
    past = runner_cli("decide", "triage", "p000", "--reject", cwd=tmp_path)
    assert past.returncode == 1 and "it is at stage 'summarize', past the last decide stage" in past.stderr
    everything = runner_cli("decide", "triage", "--all-waiting", "--reject", cwd=tmp_path)
    assert everything.returncode == 0 and "5 items of run 'triage' rejected" in everything.stdout
    assert "runner retry triage --kind rejected" in everything.stdout


async def test_a_decide_stage_first_holds_every_item_for_a_person_before_any_call(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    outcome = await reviewed(tmp_path, sim, store, stages="review summarize")
    assert outcome.exit_code == 4 and outcome.status["needs_decision"] == 6
    assert sim.ledger.snapshot()["requests"] == 0
    deciding.decide(store, "triage", ["p000", "p001"], approve=True, now=2e9)
    await reviewed(tmp_path, sim, store, stages="review summarize")
    assert calls_by_stage(sim.ledger.snapshot()["calls"]) == {"summarize": ["p000", "p001"]}


async def test_a_cancel_fails_the_items_waiting_for_a_decision_at_once(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    from runner import control

    await reviewed(tmp_path, sim, store)
    assert control.cancel(store, "triage", now=2e9, keys=["p000"]) == (1, 0)
    assert state(store, "p000") == ("review", ItemState.FAILED, "none")
    assert control.retry(store, "triage", now=2e9, kind=FailureKind.CANCELLED).again == 1
    assert state(store, "p000") == ("review", ItemState.WAITING, "decide")


class DecidingClock(StepClock):
    """A clock at whose first idle wait with every item waiting for a decision a person approves them all, from
    another connection (as the shell, the TUI or a notebook does)."""

    def __init__(self, db: Path) -> None:
        super().__init__()
        self.db, self.decided = db, False

    async def sleep(self, seconds: float) -> None:
        if not self.decided:
            with Store(self.db) as other:
                if views.standing(other, "triage", now=self.time).needs_decision == 6:
                    self.decided = bool(deciding.decide(other, "triage", [], approve=True, now=self.time).approved)
        await super().sleep(seconds)


async def test_an_engine_waiting_for_a_person_goes_on_with_the_items_a_person_approves(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    clock = DecidingClock(location_of(store))
    outcome = await runs.execute(store, pipeline(tmp_path, sim.base_url, count=6, stages=REVIEWED), clock=clock,
                                 wait_for_person=True)
    assert clock.decided and outcome.exit_code == 0
    assert calls_by_stage(sim.ledger.snapshot()["calls"]) == {"classify": KEYS, "summarize": KEYS}


async def test_an_item_whose_input_changes_while_it_waits_for_a_decision_starts_again_at_the_first_stage(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    await reviewed(tmp_path, sim, store)
    changed = posts(6)
    changed[0]["body"] = "Another text"
    write_jsonl(tmp_path / "posts.jsonl", changed)
    sim.ledger.reset()
    await runs.execute(store, jobs.load(tmp_path / "pipeline.toml"))
    assert calls_by_stage(sim.ledger.snapshot()["calls"]) == {"classify": ["p000"]}
    assert state(store, "p000") == ("review", ItemState.WAITING, "decide")


async def test_data_that_is_not_a_mapping_is_refused_with_a_run_error_saying_so(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    await reviewed(tmp_path, sim, store)
    with pytest.raises(RunError, match="data must be a mapping"):
        deciding.decide(store, "triage", ["p001"], approve=True, data="abc", now=2e9)  # type: ignore[arg-type]
    assert state(store, "p001") == ("review", ItemState.WAITING, "decide")


async def test_a_decision_kept_for_a_decide_stage_its_when_skips_is_dropped_and_logged_and_the_item_goes_on(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    pipeline(tmp_path, sim.base_url, count=6, stages=REVIEWED)
    job_file = tmp_path / "pipeline.toml"
    job_file.write_text(job_file.read_text().replace(
        'kind = "decide"\n', 'kind = "decide"\nwhen = { field = "classify.label", equals = "bug" }\n'))
    job = jobs.load(job_file)
    runs.prepare(store, job, now=1e9)
    told = runner_cli("decide", "triage", *KEYS, "--reject", cwd=tmp_path)
    assert told.returncode == 0, told.stderr
    assert "kept; applied if the item reaches stage review (its when may skip it" in told.stdout
    await runs.execute(store, job)
    labels = {row["key"]: export_label(row) for row in export.rows(store, "triage")}
    skipped = {key for key, label in labels.items() if label != "bug"}
    assert skipped and skipped != set(KEYS)
    for key in KEYS:
        assert state(store, key)[1] == (ItemState.COMPLETED if key in skipped else ItemState.FAILED)
    run_id = store.run_id("triage")
    dropped = {key for key in KEYS if any(
        (event["kind"], event["stage"]) == ("decision_dropped", "review")
        for event in views.item_history(store, views.item(store, run_id, key)["id"]))}
    assert dropped == skipped
    log = "\n".join(line.detail for line in views.run_view(store, "triage", now=2e9).log)
    assert "the decision kept for it was dropped" in log


def export_label(row: dict[str, object]) -> object:
    classify = row["classify"]
    return classify.get("label") if isinstance(classify, dict) else None
