"""Revalidation's sorting, a table of cases: each saved output checked again against the output schema now."""

from __future__ import annotations

from typing import Any

import pytest

from runner.rules.revalidating import Plan, Saved, StagePlan, sort, stage_plan


def check(result: Any) -> str | None:
    """Valid when the result has a label."""
    return None if "label" in result else "no label"


@pytest.mark.parametrize("saved, case", [
    (Saved(1, "a", rejected={"id": "a", "label": "x"}), "complete"),
    (Saved(1, "a", rejected={"id": "a"}), "still_invalid"),
    (Saved(1, "a", result={"id": "a", "label": "x"}), "restamp"),
    (Saved(1, "a", result={"id": "a", "label": "x"}, in_flight=True), "restamp"),
    (Saved(1, "a", result={"id": "a"}), "again"),
    (Saved(1, "a", result={"id": "a"}, in_flight=True), "in_flight"),
    (Saved(1, "a"), "nothing"),
], ids=["failed now valid completes", "failed still invalid stays", "valid result re-stamped",
        "valid result in flight re-stamped", "result now invalid sent again", "result now invalid in flight left",
        "nothing saved"])
def test_each_saved_output_falls_in_one_case(saved: Saved, case: str) -> None:
    out = sort([saved], check)
    found = {"complete": out.complete == [1], "restamp": out.restamp == [1], "again": out.again == {1: "no label"},
             "still_invalid": out.still_invalid == 1, "in_flight": out.in_flight == 1}
    assert [name for name, hit in found.items() if hit] == ([] if case == "nothing" else [case])


def test_the_plan_counts_what_completes_or_is_kept_as_charge_safe_and_what_is_sent_again_as_may_repeat() -> None:
    out = sort([Saved(1, "a", rejected={"label": "x"}), Saved(2, "b", result={"label": "y"}),
                Saved(3, "c", result={}), Saved(4, "d", result={})], check)
    plan = Plan((stage_plan("classify", out), StagePlan("summarize", restamped=5)))
    assert (plan.charge_safe, plan.may_repeat, plan.changes) == (7, 2, True)
    assert not Plan((StagePlan("classify", still_invalid=3),)).changes
