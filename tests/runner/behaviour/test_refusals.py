"""Calls the upstream refused before running anything (a 400, a 429): split, bounded apart, never paid for."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from support import StepClock, make_job, posts, run_under_fault

from runner import runs
from runner.store import views
from runner.sim import Simulator
from runner.model import BreakerState, FailureKind, ItemState
from runner.store import Store


@pytest.fixture
def upstream() -> Iterator[Simulator]:
    with Simulator().start() as simulator:
        yield simulator


def calls(sim: Simulator) -> list[list[str]]:
    return [call["ids"] for call in sim.ledger.snapshot()["calls"]]


async def test_a_refused_batch_is_split_until_the_item_the_upstream_refuses_fails_alone(
    tmp_path: Path, upstream: Simulator, store: Store, clock: StepClock
) -> None:
    outcome = await run_under_fault(
        upstream, store, tmp_path, clock, {"fault": "context_length", "keys": ["p007"]}, 22,
        max_items=22, concurrency=1,
    )
    failures = views.failures(store, "test")
    assert [(f["key"], f["kind"], f["retryable"]) for f in failures] == [("p007", FailureKind.BAD_REQUEST, False)]
    assert "context_length_exceeded" in failures[0]["message"]
    assert outcome.status["counts"][ItemState.COMPLETED] == 21
    assert [len(ids) for ids in calls(upstream)][:3] == [22, 11, 11]
    billed = upstream.ledger.snapshot()["billed"]
    assert "p007" not in billed and set(billed.values()) == {1}
    assert outcome.status["breaker"]["state"] == BreakerState.CLOSED


async def test_two_items_each_too_long_fail_alone_and_do_not_stop_the_run(
    tmp_path: Path, upstream: Simulator, store: Store, clock: StepClock
) -> None:
    outcome = await run_under_fault(
        upstream, store, tmp_path, clock, {"fault": "context_length", "keys": ["p007", "p008"]}, 22,
        max_items=22, concurrency=1,
    )
    assert outcome.exit_code == 3
    assert sorted(f["key"] for f in views.failures(store, "test")) == ["p007", "p008"]
    assert outcome.status["counts"][ItemState.COMPLETED] == 20


async def test_a_refusal_that_repeats_on_every_call_stops_the_run_after_two_batches_in_a_row(
    tmp_path: Path, upstream: Simulator, store: Store, clock: StepClock
) -> None:
    outcome = await run_under_fault(
        upstream, store, tmp_path, clock, {"fault": "http_400"}, 100, max_items=10, concurrency=1,
    )
    assert outcome.exit_code == 4
    assert outcome.status["breaker"]["state"] == BreakerState.OPEN
    assert outcome.status["breaker"]["reason"].startswith("bad_request: 400 ")
    assert outcome.status["breaker"]["reason"].endswith("(refused so twice in a row)")
    assert outcome.status["counts"][ItemState.FAILED] == 2
    assert outcome.status["counts"][ItemState.COMPLETED] == 0
    assert len(calls(upstream)) < 20 and upstream.ledger.snapshot()["billed"] == {}


async def test_an_unknown_model_stops_the_run_at_its_first_refusal(
    tmp_path: Path, upstream: Simulator, store: Store, clock: StepClock
) -> None:
    outcome = await run_under_fault(
        upstream, store, tmp_path, clock, {"fault": "invalid_model"}, 100, max_items=10, concurrency=1,
    )
    assert outcome.exit_code == 4
    assert outcome.status["breaker"]["reason"].startswith("not_found: ")
    assert "Invalid model name" in outcome.status["breaker"]["reason"]
    assert len(calls(upstream)) == 1 and outcome.status["counts"][ItemState.PENDING] == 90


async def test_a_rate_limit_without_a_hint_backs_off_exponentially_and_costs_no_attempt(
    tmp_path: Path, upstream: Simulator, store: Store, clock: StepClock
) -> None:
    upstream.set_faults({"rules": [{"fault": "http_429", "header": "none", "times": 6}]})
    job = make_job(tmp_path, upstream.base_url, posts(5), max_attempts=2)
    start = clock.time
    outcome = await runs.execute(store, job, clock=clock)
    assert outcome.status["counts"][ItemState.COMPLETED] == 5
    item = views.items(store, store.run_id("test"))[0]
    assert (item["key"], item["attempts"], item["refused"], item["paid_calls"]) == ("p000", 7, 6, 1)
    waited = clock.time - start
    assert 0.5 * sum(2**n for n in range(6)) <= waited <= 6 * job.retry.max_backoff


async def test_refusals_in_a_row_have_their_own_bound_and_the_message_counts_refused_and_paid(
    tmp_path: Path, upstream: Simulator, store: Store, clock: StepClock
) -> None:
    upstream.set_faults({"rules": [{"fault": "http_429", "header": "none"}]})
    job = make_job(tmp_path, upstream.base_url, posts(3), max_attempts=2)
    job = replace(job, retry=replace(job.retry, max_refusals=4))
    outcome = await runs.execute(store, job, clock=clock)
    failures = views.failures(store, "test")
    assert outcome.exit_code == 3
    assert {(f["kind"], f["attempts"]) for f in failures} == {(FailureKind.RATE_LIMITED, 4)}
    assert failures[0]["message"].endswith(
        "(gave up after 4 refusals in a row, nothing billed for them; attempts: 4, refused: 4, paid calls: 0)")
    assert upstream.ledger.snapshot()["billed"] == {}
