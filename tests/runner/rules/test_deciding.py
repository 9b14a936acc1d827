"""What a person's decision does to one item: a table of cases over where the item stands."""

from __future__ import annotations

import pytest

from runner.job_stages import When
from runner.model import Skip
from runner.rules.deciding import At, Plan, plan
from runner.rules.stages import Next


class S:
    def __init__(self, name: str, kind: str = "openai-chat", when: When | None = None, fan_out: str = "") -> None:
        self.name, self.kind, self.when, self.fan_out = name, kind, when, fan_out


APPROVED = When("review.ok", equals=True, has_equals=True)
PIPELINE = [S("classify"), S("review", "decide"), S("publish", when=APPROVED), S("summarize")]


def at(stage: str, state: str, hold: str = "none", kind: str | None = None) -> At:
    return At("p1", stage, state, hold, kind, {"id": "p1"}, {"classify": {"label": "bug"}})


CASES: list[tuple[str, At, bool, dict[str, object], Plan]] = [
    ("waiting there: approve goes to the next stage whose when holds", at("review", "waiting", "decide"), True,
     {"ok": True}, Plan("review", applied=True, goes=Next("publish"))),
    ("waiting there: the data decides the when of the stages after", at("review", "waiting", "decide"), True,
     {"ok": False}, Plan("review", applied=True, goes=Next("summarize", (Skip("publish"),)))),
    ("waiting there: reject", at("review", "waiting", "decide"), False, {}, Plan("review", applied=True)),
    ("before it, in flight: kept", at("classify", "running"), True, {}, Plan("review")),
    ("before it, waiting for a time: kept", at("classify", "waiting"), False, {}, Plan("review")),
    ("past it: refused", at("summarize", "pending"), True, {},
     Plan(None, why="it is at stage 'summarize', past the last decide stage")),
    ("completed: refused", at("summarize", "completed"), True, {},
     Plan(None, why="it is completed: past its decide stage")),
    ("failed before it: refused", at("classify", "failed", kind="auth"), True, {},
     Plan(None, why="it failed at stage 'classify' (auth), not at a decide stage")),
    ("rejected there: refused, with the retry", at("review", "failed", kind="rejected"), True, {},
     Plan(None, why="it was rejected at stage 'review': a retry of kind rejected sends it back to wait there")),
    ("at a stage the job no longer has: refused", at("gone", "pending"), True, {},
     Plan(None, why="it is at stage 'gone', which the job no longer has")),
]


@pytest.mark.parametrize("item, approve, data, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_decision_is_applied_where_the_item_waits_kept_before_and_refused_past_the_stage(
    item: At, approve: bool, data: dict[str, object], expected: Plan
) -> None:
    assert plan(PIPELINE, item, approve=approve, data=data) == expected


def test_approving_at_the_last_stage_completes_the_item() -> None:
    done = plan([S("classify"), S("review", "decide")], at("review", "waiting", "decide"), approve=True, data={})
    assert done == Plan("review", applied=True, goes=Next(None))


def test_a_run_without_a_decide_stage_refuses_every_decision() -> None:
    assert plan([S("classify")], at("classify", "pending"), approve=True, data={}).why == "the run has no decide stage"


FANNED = [S("split", fan_out="chunks"), S("note"), S("check", "decide"), S("gather", "join"), S("review", "decide")]


@pytest.mark.parametrize("state", ["pending", "completed", "failed"])
def test_a_sub_item_is_refused_a_decision_for_a_decide_stage_past_its_join(state: str) -> None:
    sub = at("note", state, kind="auth" if state == "failed" else None)._replace(sub_item=True)
    refused = plan([*FANNED[:2], *FANNED[3:]], sub, approve=False, data={})
    assert refused.why == "it is a sub-item: it stops at its join, and decide stage 'review' after it is its parent's"


def test_a_sub_item_before_a_decide_stage_inside_its_fan_out_keeps_the_decision_for_it() -> None:
    assert plan(FANNED, at("note", "pending")._replace(sub_item=True), approve=False, data={}) == Plan("check")


def test_a_parent_keeps_a_decision_for_the_decide_stage_after_its_join_not_its_sub_items_one() -> None:
    assert plan(FANNED, at("split", "pending"), approve=True, data={}) == Plan("review")
    refused = plan(FANNED[:4], at("split", "pending"), approve=True, data={})
    assert refused.why == "decide stage 'check' is its sub-items' (after its fan-out): decide those"
