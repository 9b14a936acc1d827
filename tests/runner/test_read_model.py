"""The read model without a store: a run's state as a person sees it, the status contract's shape, the log's lines."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runner.model import BreakerState
from runner.rules.breaker import Control
from runner.store import event_log
from runner.store.answers import STATES, Hold, RunState, Standing, time_left, why_no_estimate

NOW = 1_000.0


def standing(
    *, unfinished: int = 1, failed: int = 0, held: int = 0, control: Control = Control(), alive: bool = True,
    silent_for: float | None = None,
) -> Standing:
    counts = {state: 0 for state in STATES} | {"pending": unfinished, "completed": 2, "failed": failed}
    return Standing(
        name="posts", counts=counts, groups={"2026-01": counts}, control=control, held=held, engine_alive=alive,
        duplicate_tasks=0, idle_for=None, engine_silent_for=silent_for,
    )


@pytest.mark.parametrize("run, state", [
    (standing(unfinished=0, held=0, control=Control(paused=True), alive=False), RunState.DONE),
    (standing(unfinished=0, failed=1, alive=False, silent_for=30.0), RunState.DONE_WITH_FAILURES),
    (standing(alive=False, silent_for=30.0, control=Control(breaker=BreakerState.OPEN)), RunState.ENGINE_DIED),
    (standing(held=1), RunState.NEEDS_PERSON),
    (standing(control=Control(breaker=BreakerState.OPEN)), RunState.NEEDS_PERSON),
    (standing(control=Control(paused=True)), RunState.PAUSED),
    (standing(), RunState.RUNNING),
    (standing(alive=False), RunState.STOPPED),
    (standing(unfinished=0, failed=3, alive=False)._replace(cancelled=3, cancelled_whole=True), RunState.CANCELLED),
    (standing(unfinished=0, failed=3, alive=False)._replace(cancelled=3), RunState.DONE_WITH_FAILURES),
    (standing()._replace(cancelled=3, cancelled_whole=True), RunState.RUNNING),
    (standing(unfinished=2)._replace(needs_decision=2), RunState.NEEDS_PERSON),
    (standing(unfinished=3)._replace(needs_decision=2), RunState.RUNNING),
])
def test_a_run_reads_as_done_engine_died_needing_a_person_paused_running_or_stopped_in_that_order(
    run: Standing, state: RunState
) -> None:
    assert run.state is state


DECISIONS_WAITING = [
    ("decisions alone left, no engine", standing(unfinished=2, alive=False), RunState.NEEDS_PERSON, Hold.DECISION),
    ("decisions and one approved item pending, no engine", standing(unfinished=3, alive=False),
     RunState.NEEDS_PERSON, Hold.DECISION),
    ("decisions and one pending, an engine works it", standing(unfinished=3), RunState.RUNNING, None),
    ("decisions and one pending, paused, no engine", standing(unfinished=3, control=Control(paused=True), alive=False),
     RunState.PAUSED, Hold.PAUSE),
    ("decisions and one pending, breaker open", standing(unfinished=3, control=Control(breaker=BreakerState.OPEN)),
     RunState.NEEDS_PERSON, Hold.BREAKER_OPEN),
]


@pytest.mark.parametrize("run, state, hold", [c[1:] for c in DECISIONS_WAITING], ids=[c[0] for c in DECISIONS_WAITING])
def test_a_run_whose_decisions_wait_needs_a_person_unless_an_engine_works_its_other_items(
    run: Standing, state: RunState, hold: Hold | None
) -> None:
    waiting = run._replace(needs_decision=2)
    assert (waiting.state, waiting.held_by) == (state, hold)


def test_the_status_contract_keeps_its_keys_in_their_order_and_prints_as_json() -> None:
    held = Control(breaker=BreakerState.PROBING, reason="1 transport failure", paused=True, steps=2)
    status = standing(held=1, control=held)._replace(paid_calls=7, maybe_paid=3).status()
    assert list(status) == [
        "run", "total", "counts", "groups", "breaker", "needs_confirmation", "engine", "duplicate_tasks",
        "paused", "steps_allowed", "paid_calls", "maybe_paid", "cancelled", "stages", "needs_decision",
        "waiting_for_sub_items", "cost", "expiring", "scheduled", "next_scheduled_at", "queue", "archived", "budget", "reused",
        "workers",
    ]
    assert list(status["counts"]) == list(STATES)
    assert json.loads(json.dumps(status)) == {
        "run": "posts", "total": 3, "counts": status["counts"], "groups": {"2026-01": status["counts"]},
        "breaker": {"state": "probing", "reason": "1 transport failure"}, "needs_confirmation": 1,
        "engine": {"alive": True}, "duplicate_tasks": 0, "paused": True, "steps_allowed": 2, "paid_calls": 7,
        "maybe_paid": 3, "cancelled": 0, "stages": {}, "needs_decision": 0, "waiting_for_sub_items": 0,
        "cost": {"spent": 0.0, "unknown": 0.0, "in_flight": 0.0, "currency": "USD",
                 "tokens": {"input": 0, "cached_input": 0, "output": 0, "reasoning": 0},
                 "charges": {"billed": 0, "not_billed": 0, "unknown": 0}, "reason": None,
                 "estimated_by": "characters / 4"},
        "expiring": [],
        "scheduled": 0, "next_scheduled_at": None, "queue": None, "archived": 0, "budget": None, "reused": 0,
        "workers": [],
    }


def test_the_time_left_counts_the_stages_ahead_of_each_item_at_items_per_minute_through_a_stage() -> None:
    none = {state: 0 for state in STATES}
    stages = {"classify": none | {"pending": 10}, "extract": none | {"pending": 10}, "review": none | {"completed": 2}}
    run = standing(unfinished=20)._replace(stages=stages)
    assert run.stages_ahead == (10 * 3 + 10 * 2) / 20
    assert time_left(run, 60.0) == 20 * 2.5  # 50 passes left at 60 a minute
    assert time_left(standing(unfinished=20), 60.0) == 20.0  # a run of one stage: each item one pass


def test_the_time_left_leaves_out_items_scheduled_for_later() -> None:
    run = standing(unfinished=370)._replace(scheduled=20)
    assert time_left(run, 60.0) == 350.0  # the 350 due now, at 60 a minute
    assert time_left(standing(unfinished=20)._replace(scheduled=20), 60.0) is None
    assert why_no_estimate(standing(unfinished=20)._replace(scheduled=20)) == "they wait for their scheduled time"


def test_status_gives_each_stage_the_items_that_passed_and_skipped_it_beside_its_states() -> None:
    none = {state: 0 for state in STATES}
    run = standing()._replace(stages={"classify": none, "extract": none | {"pending": 1}},
                              passes={"classify": {"passed": 3, "skipped": 0}, "extract": {"passed": 1, "skipped": 1}})
    assert run.status()["stages"] == {"classify": none | {"passed": 3, "skipped": 0, "reused": 0},
                                      "extract": none | {"pending": 1, "passed": 1, "skipped": 1, "reused": 0}}


def event(event_id: int, key: str | None, to_state: str, *, at: float = NOW - 5, items: int = 1, **more: Any) -> dict[str, Any]:
    return {"id": event_id, "at": at, "key": key, "batch_id": more.get("batch_id"), "parent_id": more.get("parent_id"),
            "from_state": more.get("from_state", "running"), "to_state": to_state, "kind": more.get("kind"),
            "message": more.get("message"), "items": items, "stage": more.get("stage"), "to_stage": more.get("to_stage")}


def test_items_that_moved_together_are_one_line_and_commands_are_merged_in_by_time() -> None:
    events = [
        event(4, "p3", "waiting", batch_id=2, kind="rate_limited", message="429"),
        event(3, "p2", "waiting", batch_id=2, kind="rate_limited", message="429"),
        event(2, "p1", "waiting", batch_id=2, kind="rate_limited", message="429"),
        event(1, None, "queued", at=NOW - 20, items=3, batch_id=2, parent_id=1),
    ]
    commands = [{"id": 1, "at": NOW - 10, "command": "retry", "args": '{"kind": "transport", "keys": []}',
                 "outcome": "2 items"}]
    lines = event_log.lines(events, commands, now=NOW, limit=14)
    assert [(line.age, line.what, line.detail, line.tone) for line in lines] == [
        (5.0, "batch 2: p3 +2 running → waiting", "rate_limited: 429", "waiting"),
        (10.0, "retried 2 items", "kind transport: pending again, fresh attempt budgets", "person"),
        (20.0, "batch 2 (split from 1): 3 items running → queued", "", "queued"),
    ]


def test_a_pipeline_log_says_which_items_went_on_to_which_stage_one_line_each_and_which_skipped_one() -> None:
    moved = dict(batch_id=3, from_state="received", stage="classify")
    events = [
        event(4, "p3", "pending", from_state="pending", kind="skipped", message="its when is false: stage skipped",
              stage="extract"),
        event(3, "p3", "pending", **moved, to_stage="summarize"),
        event(2, "p2", "pending", **moved, to_stage="extract"),
        event(1, "p1", "pending", **moved, to_stage="summarize"),
    ]
    assert [(line.what, line.detail) for line in event_log.lines(events, [], now=NOW, limit=14)] == [
        ("p3 pending → pending", "stage extract skipped: its when is false"),
        ("batch 3: p3 +1 received → pending", "on to stage summarize"),
        ("batch 3: p2 received → pending", "on to stage extract"),
    ]


def command(command_id: int, command: str, args: str = "{}", outcome: str = "closed, paused=True") -> dict[str, Any]:
    """A command row as the store logs it (the outcome of pause, resume and step: the control row after it)."""
    return {"id": command_id, "at": NOW - command_id, "command": command, "args": args, "outcome": outcome}


def test_a_persons_commands_read_as_words_with_what_they_do_a_cancel_and_a_decision_among_them() -> None:
    commands = [
        command(1, "pause"), command(2, "resume", outcome="probing, paused=False"), command(3, "step"),
        command(4, "retry", '{"kind": null, "keys": ["p1", "p2", "p3", "p4"]}', "1 items"),
        command(5, "confirm", '["p7", "p8"]', "1 to poll, 0 to look for, 1 sent again"),
        command(6, "cancel", '{"keys": ["p9"]}', "0 failed, 1 when their batch ends"),
        command(7, "cancel", '{"keys": []}', "12 failed, 0 when their batch ends"),
        command(8, "decide", '{"keys": ["p1", "p2"], "approve": true, "data": {}}',
                "1 approved, 0 rejected, 1 kept until they arrive"),
    ]
    assert [(line.what, line.detail) for line in event_log.lines([], commands, now=NOW, limit=14)] == [
        ("paused by a person", "no new batches; those in flight finish"),
        ("resumed by a person", "one batch at a time until one succeeds, then full speed"),
        ("let 1 batch run", "a person's step: then the run stays held"),
        ("retried 1 item", "p1 p2 p3 +1: pending again, fresh attempt budgets"),
        ("confirmed 2 items", "1 to poll, 1 sent again"),
        ("cancelled 1 item", "p9: 0 failed, 1 when their batch ends"),
        ("cancelled 12 items", "12 failed, 0 when their batch ends"),
        ("decided 2 items", "p1 p2: 1 approved, 0 rejected, 1 kept until they arrive"),
    ]


def test_the_log_keeps_its_newest_lines() -> None:
    events = [event(n, None, "completed", at=NOW - n, items=n, batch_id=n) for n in range(1, 6)]
    assert [line.what for line in event_log.lines(events, [], now=NOW, limit=2)] == [
        "batch 1: 1 item running → completed", "batch 2: 2 items running → completed",
    ]
