"""The ledger against the simulator: every call's usage saved, each item's charges billed, not billed or unknown
by failure class, the billed count the simulator's own, and a cost unknown when it is not known."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from scenes import batch_usages, charges, item_shares, items_of_unknown_cost
from support import SharedClock, StepClock, anthropic_job, batch_job, make_job, posts

from runner import runs
from runner.jobs import Job
from runner.sim import Simulator
from runner.store import Store, views

PRICE = {"input": 1.0, "output": 2.0, "per": 1_000_000}


@pytest.fixture
def upstream() -> Iterator[Simulator]:
    with Simulator(batch_seconds=0.0).start() as sim:
        yield sim


def priced(job: Job, price: dict[str, float] | None = None) -> Job:
    return job.with_provider(price=dict(PRICE if price is None else price))


def sim_billed(sim: Simulator) -> int:
    return sum(sim.ledger.snapshot()["billed"].values())


def assert_usage_saved_and_shared(store: Store, cost: dict[str, Any]) -> None:
    """The batches' usage adds up to the run's tokens, and the items' shares to no more than it."""
    usages = batch_usages(store)
    assert usages and all(u["input"] > 0 and u["output"] > 0 for u in usages)
    assert cost["tokens"]["input"] == sum(u["input"] for u in usages)
    assert cost["tokens"]["output"] == sum(u["output"] for u in usages)
    tokens_in, tokens_out = item_shares(store)
    assert 0 < tokens_in <= cost["tokens"]["input"] and 0 < tokens_out <= cost["tokens"]["output"]
    expected = (cost["tokens"]["input"] * PRICE["input"] + cost["tokens"]["output"] * PRICE["output"]) / 1e6
    assert cost["spent"] == pytest.approx(expected * (0.5 if cost.get("batch") else 1))


@pytest.mark.parametrize("kind", ["openai-chat", "openai-batch", "anthropic-messages", "anthropic-batch"])
async def test_usage_is_saved_from_chat_answers_and_batch_lines_and_each_item_gets_its_share(
    tmp_path: Path, upstream: Simulator, store: Store, clock: StepClock, kind: str
) -> None:
    job = {"openai-chat": lambda: make_job(tmp_path, upstream.base_url, posts(12), max_items=5),
           "openai-batch": lambda: batch_job(tmp_path, upstream, posts(12), max_items=5),
           }.get(kind, lambda: anthropic_job(tmp_path, upstream, posts(12), kind=kind, max_items=5))()
    outcome = await runs.execute(store, priced(job), clock=clock)
    assert outcome.exit_code == 0
    cost = outcome.status["cost"]
    assert cost["charges"] == {"billed": 12, "not_billed": 0, "unknown": 0} and cost["reason"] is None
    assert sim_billed(upstream) == 12
    assert_usage_saved_and_shared(store, {**cost, "batch": kind.endswith("batch")})


@pytest.mark.parametrize(("rule", "billed", "unknown", "not_billed"), [
    # refused before running: nothing billed, sent again
    ({"fault": "http_429", "times": 1, "retry_after": 1}, 4, 0, 4),
    ({"fault": "http_400", "times": 1}, 4, 0, 4),  # a bad request: split to find the item, each part then passes
    # a drop after sending: the upstream may have run it (it did not): unknown
    ({"fault": "drop", "times": 1}, 4, 4, 0),
    # billed, then the answer lost: unknown, though the simulator billed it
    ({"fault": "billed_then_dropped", "times": 1}, 4, 4, 0),
    # refused for good: not billed, the run stops
    ({"fault": "http_401"}, 0, 0, 4),
])
async def test_each_failure_class_is_charged_as_billed_not_billed_or_unknown(
    tmp_path: Path, upstream: Simulator, store: Store, clock: StepClock, rule: dict[str, Any], billed: int,
    unknown: int, not_billed: int,
) -> None:
    upstream.set_faults({"rules": [rule]})
    job = priced(make_job(tmp_path, upstream.base_url, posts(4), max_items=4, concurrency=1))
    outcome = await runs.execute(store, job, clock=clock)
    cost = outcome.status["cost"]
    assert cost["charges"] == {"billed": billed, "unknown": unknown, "not_billed": not_billed}
    # the billed count is the simulator's, but for the answers it billed that never came back
    lost = 4 if rule["fault"] == "billed_then_dropped" else 0
    assert sim_billed(upstream) == billed + lost
    assert sum(c[0] for c in charges(store).values()) == billed


async def test_a_retry_after_a_possibly_billed_drop_is_shown_as_an_unknown_charge(
    tmp_path: Path, upstream: Simulator, store: Store, clock: StepClock
) -> None:
    upstream.set_faults({"rules": [{"fault": "billed_then_dropped", "times": 1}]})
    job = priced(make_job(tmp_path, upstream.base_url, posts(3), max_items=3, concurrency=1))
    outcome = await runs.execute(store, job, clock=clock)
    assert outcome.exit_code == 0
    assert charges(store) == {f"p{i:03d}": (1, 1, 0) for i in range(3)}
    cost = outcome.status["cost"]
    assert cost["charges"]["unknown"] == 3 and cost["unknown"] is not None and cost["unknown"] > 0
    failed = views.item(store, store.run_id("test"), "p000")
    assert failed is not None and (failed["paid_calls"], failed["maybe_paid"]) == (1, 1)


async def test_an_unknown_price_is_shown_as_unknown_never_zero(
    tmp_path: Path, upstream: Simulator, store: Store, clock: StepClock
) -> None:
    job = make_job(tmp_path, upstream.base_url, posts(3))  # model "sim-model": in no table, no price given
    outcome = await runs.execute(store, job, clock=clock)
    cost = outcome.status["cost"]
    assert cost["spent"] is None and "no price for sim-model" in cost["reason"]
    assert cost["tokens"]["input"] > 0 and cost["charges"]["billed"] == 3
    assert items_of_unknown_cost(store) == 3


async def test_a_built_in_price_is_used_for_a_known_model(
    tmp_path: Path, upstream: Simulator, store: Store, clock: StepClock
) -> None:
    job = make_job(tmp_path, upstream.base_url, posts(3)).with_provider(model="gpt-4o-mini")
    outcome = await runs.execute(store, job, clock=clock)
    cost = outcome.status["cost"]
    tokens = cost["tokens"]
    assert cost["spent"] == pytest.approx((tokens["input"] * 0.15 + tokens["output"] * 0.60) / 1e6)


@pytest.mark.parametrize(("kind", "rule", "not_billed"), [
    # the lines an expired Batch API batch never ran: the second half of six
    ("openai-batch", {"fault": "expire"}, 3),
    # Anthropic's errored and expired lines are not billed
    ("anthropic-batch", {"fault": "errored_lines", "keys": ["p000", "p002"]}, 2),
    ("anthropic-batch", {"fault": "expire"}, 3),
])
async def test_batch_lines_never_run_are_not_billed_and_the_billed_count_is_the_simulators(
    tmp_path: Path, upstream: Simulator, store: Store, kind: str, rule: dict[str, Any], not_billed: int
) -> None:
    upstream.set_faults({"rules": [{**rule, "times": 1}]})
    job = (batch_job(tmp_path, upstream, posts(6), concurrency=1) if kind == "openai-batch"
           else anthropic_job(tmp_path, upstream, posts(6), kind=kind, concurrency=1))
    job = replace(job, retry=replace(job.retry, max_backoff=3600.0))  # the expiring batch's 24 h pass in few polls
    outcome = await runs.execute(store, priced(job), clock=SharedClock(upstream))
    cost = outcome.status["cost"]
    assert cost["charges"] == {"billed": 6, "unknown": 0, "not_billed": not_billed}
    assert sim_billed(upstream) == 6
