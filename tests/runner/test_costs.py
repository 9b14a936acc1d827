"""A run's cost from its ledger at its saved job's prices: spent, unknown and in flight, each unknown (never 0)
when its price or usage is."""

from __future__ import annotations

import json

import pytest

from runner import costs
from runner.store.ledger import StageLedger
from runner.usage import Usage

PRICED = {"kind": "openai-chat", "model": "mine", "price": {"input": 1.0, "output": 2.0, "per": 1}}


def job(*stages: tuple[str, dict[str, object]]) -> str:
    return json.dumps({"provider": PRICED, "stages": [{"name": n, "provider": p} for n, p in stages]})


def test_the_stages_costs_come_in_the_job_s_stage_order_then_the_stages_it_no_longer_names() -> None:
    rows = [StageLedger(name, billed=1, usage=Usage(10, 0, 5), tokened=1, cost=20.0)
            for name in ("final", "gone", "note", "split")]
    cost = costs.of_run(rows, job(("split", PRICED), ("note", PRICED), ("final", PRICED)))
    assert list(cost.stages) == ["split", "note", "final", "gone"]


def test_a_saved_job_s_terms_are_parsed_once_per_job_text_and_none_can_change_them() -> None:
    text = job(("split", PRICED))
    saved = costs.terms(text)
    assert costs.terms(text) is saved and saved["split"].price["input"] == 1.0
    with pytest.raises(TypeError):
        saved["split"].price["input"] = 0.0  # type: ignore[index]
    with pytest.raises(TypeError):
        saved["other"] = saved["split"]  # type: ignore[index]


def test_spent_is_the_known_cost_and_unknown_calls_and_batches_in_flight_are_at_their_estimate() -> None:
    row = StageLedger("one", billed=4, unknown=2, unknown_chars=40, usage=Usage(100, 0, 50), tokened=4, cost=200.0,
                      running_items=1, running_chars=8)
    cost = costs.of_run([row], job(("one", PRICED)))
    # 50 output tokens over 4 items: 12.5 an item
    assert (cost.spent, cost.unknown, cost.in_flight) == (200.0, 10 * 1.0 + 2 * 12.5 * 2.0, 2 * 1.0 + 12.5 * 2.0)
    assert cost.reasons == () and cost.as_json()["charges"] == {"billed": 4, "not_billed": 0, "unknown": 2}


def test_a_stage_without_a_price_makes_the_run_s_cost_unknown_and_says_why() -> None:
    rows = [StageLedger("one", billed=1, usage=Usage(10, 0, 5), tokened=1, cost=20.0),
            StageLedger("two", billed=1, usage=Usage(10, 0, 5), tokened=1, uncosted=1)]
    cost = costs.of_run(rows, job(("one", PRICED), ("two", {**PRICED, "model": "theirs", "price": {}})))
    assert cost.spent is None and cost.reasons == ("no price for theirs ([provider] price)",)
    assert cost.stages["one"].spent == 20.0 and cost.tokens == Usage(20, 0, 10)
    assert costs.line(cost) == "cost unknown: no price for theirs ([provider] price) · tokens 20 in / 10 out"


def test_billed_calls_with_no_usage_leave_the_cost_unknown_though_the_model_has_a_price() -> None:
    cost = costs.of_run([StageLedger("one", billed=3, uncosted=3)], job(("one", PRICED)))
    assert cost.spent is None and cost.reasons == ("3 billed item-calls reported no usage",)


def test_billed_calls_answered_before_the_job_had_a_price_are_said_so_not_said_to_lack_usage() -> None:
    row = StageLedger("one", billed=5, usage=Usage(100, 0, 40), tokened=4, uncosted=5)  # 4 with usage, 1 without
    cost = costs.of_run([row], job(("one", PRICED)))
    assert cost.spent is None
    assert cost.reasons == ("1 billed item-calls reported no usage",
                            "4 billed item-calls answered before the job had a price")


@pytest.mark.parametrize("saved", ["{}", "not json"])
def test_a_run_whose_job_is_not_saved_has_an_unknown_cost(saved: str) -> None:
    cost = costs.of_run([StageLedger("openai-chat", billed=2, uncosted=2)], saved)
    assert cost.spent is None and cost.reasons == ("no price for a run whose job is not saved ([provider] price)",)


@pytest.mark.parametrize("cost, shown", [
    (costs.Cost(), "cost: $0.0000 spent · tokens 0 in / 0 out"),
    (costs.Cost(spent=1.5, tokens=Usage(1_000, 200, 50)), "cost: $1.5000 spent · tokens 1,000 in (200 cached) / 50 out"),
    (costs.Cost(spent=1.0, unknown=0.25, unknown_calls=3, in_flight=0.5),
     "cost: $1.0000 spent · $0.2500 may have been billed (calls of 3 items whose answer was lost) · "
     "$0.5000 in flight · tokens 0 in / 0 out · estimates: tokens as characters / 4"),
    (costs.Cost(spent=0.0, unknown=None, in_flight=None, unknown_calls=2, reasons=("no price for m ([provider] price)",)),
     "cost unknown: no price for m ([provider] price) · calls of 2 items whose answer was lost, may have been "
     "billed · calls in flight · tokens 0 in / 0 out · estimates: tokens as characters / 4"),
])
def test_the_cost_line_has_no_nested_parentheses_and_shows_cached_input_only_when_some_was(
    cost: costs.Cost, shown: str
) -> None:
    assert costs.line(cost) == shown
    assert "((" not in shown and "))" not in shown
