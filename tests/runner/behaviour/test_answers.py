"""Every answer that came back is saved before anything reads it, whatever its shape, and read as models write."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from scenes import every_row
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


def billed(sim: Simulator) -> dict[str, int]:
    return dict(sim.ledger.snapshot()["billed"])


@pytest.mark.parametrize("fault", ["content_parts", "fenced"])
async def test_an_answer_as_models_write_it_completes_with_one_call(
    tmp_path: Path, upstream: Simulator, store: Store, clock: StepClock, fault: str
) -> None:
    outcome = await run_under_fault(upstream, store, tmp_path, clock, {"fault": fault}, 6)
    assert outcome.status["counts"][ItemState.COMPLETED] == 6
    assert billed(upstream) == {f"p{i:03d}": 1 for i in range(6)}


async def test_the_raw_answer_is_saved_with_the_batch_as_it_came_back(
    tmp_path: Path, upstream: Simulator, store: Store, clock: StepClock
) -> None:
    upstream.set_faults({"rules": [{"fault": "content_parts"}]})
    await runs.execute(store, make_job(tmp_path, upstream.base_url, posts(2)), clock=clock)
    (batch,) = views.batches(store, store.run_id("test"))
    parts = json.loads(batch["answer"])
    assert isinstance(parts, list) and {part["type"] for part in parts} == {"text"}


async def test_two_disagreeing_results_for_one_id_reattempt_that_item_and_its_history_says_why(
    tmp_path: Path, upstream: Simulator, store: Store, clock: StepClock
) -> None:
    outcome = await run_under_fault(
        upstream, store, tmp_path, clock, {"fault": "duplicate_ids", "keys": ["p001"], "times": 1}, 4,
    )
    assert outcome.status["counts"][ItemState.COMPLETED] == 4
    assert billed(upstream) == {"p000": 1, "p001": 2, "p002": 1, "p003": 1}
    item = views.item(store, store.run_id("test"), "p001")
    assert item is not None
    why = [h["message"] for h in views.item_history(store, item["id"]) if h["kind"] == FailureKind.ITEM_INVALID]
    assert why == ['the answer gave 2 results for id "p001" that disagree']


async def test_an_error_while_judging_an_answer_leaves_it_saved_and_its_traceback_in_the_history(
    tmp_path: Path, upstream: Simulator, store: Store, clock: StepClock, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(result: dict[str, Any]) -> str | None:
        raise TypeError("a check that breaks")

    job = replace(make_job(tmp_path, upstream.base_url, posts(3)), check=broken)
    with caplog.at_level(logging.ERROR, logger="runner"):
        outcome = await runs.execute(store, job, clock=clock)
    assert outcome.exit_code == 4
    assert "TypeError" in (outcome.stopped_for or "") and "history" in (outcome.stopped_for or "")
    assert outcome.status["counts"][ItemState.RECEIVED] == 3
    notes = [event for event in views.history(store, store.run_id("test")) if event["kind"] == "engine_error"]
    assert len(notes) == 1 and "Traceback" in notes[0]["message"] and "a check that breaks" in notes[0]["message"]
    assert any("unexpected error in batch" in record.message for record in caplog.records)
    fixed = await runs.execute(store, replace(job, check=None), clock=clock)
    assert fixed.status["counts"][ItemState.COMPLETED] == 3
    assert billed(upstream) == {f"p{i:03d}": 1 for i in range(3)}


async def test_a_spend_limit_stops_the_run_as_billing_whatever_its_status(
    tmp_path: Path, upstream: Simulator, store: Store, clock: StepClock
) -> None:
    outcome = await run_under_fault(
        upstream, store, tmp_path, clock, {"fault": "budget_exceeded"}, 20, max_items=5, concurrency=1,
    )
    assert outcome.exit_code == 4
    assert outcome.status["breaker"]["state"] == BreakerState.OPEN
    assert outcome.status["breaker"]["reason"].startswith("billing: ")
    assert outcome.status["counts"][ItemState.PENDING] == 15
    assert len(upstream.ledger.snapshot()["calls"]) == 1


async def test_an_upstream_message_holding_the_key_is_saved_and_shown_with_the_key_redacted(
    tmp_path: Path, upstream: Simulator, store: Store, clock: StepClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-test-0123456789abcdefSECRET"
    monkeypatch.setenv("RUNNER_TEST_KEY", secret)
    upstream.set_faults({"rules": [{"fault": "echo_key"}]})
    job = make_job(tmp_path, upstream.base_url, posts(3))
    job = replace(job, provider=replace(job.provider, api_key_env="RUNNER_TEST_KEY"))
    outcome = await runs.execute(store, job, clock=clock)
    saved = json.dumps([outcome.stopped_for, outcome.status, every_row(store)])
    assert secret not in saved and secret[-6:] not in saved
    assert "Incorrect API key" in (outcome.status["breaker"]["reason"] or "")
