"""The failure table of the brief, one test per row, against the simulator's faults over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import StepClock, make_job, posts

from runner import errors, progress, runs
from runner.providers.handler import PythonHandler
from runner.sim import Simulator
from runner.states import BreakerState, FailureKind, ItemState
from runner.store import Store


@pytest.fixture
def faulty() -> Iterator[Simulator]:
    """A simulator whose fault plan each test sets."""
    with Simulator().start() as simulator:
        yield simulator


def item_states(store: Store) -> dict[str, tuple[str, int, int]]:
    return {r["key"]: (r["state"], r["attempts"], r["paid_calls"]) for r in store.db.query(
        "SELECT key, state, attempts, paid_calls FROM items")}


def call_sizes(sim: Simulator) -> list[int]:
    return [len(call["ids"]) for call in sim.ledger.snapshot()["calls"]]


@pytest.mark.parametrize("fault, maybe_paid", [
    ({"fault": "http_500"}, 0), ({"fault": "http_503"}, 0), ({"fault": "drop"}, 2),
    ({"fault": "timeout", "seconds": 2}, 2),
])
async def test_short_network_trouble_is_retried_inside_the_attempt_and_a_lost_answer_is_told(
    tmp_path: Path, faulty: Simulator, store: Store, clock: StepClock, fault: dict[str, Any], maybe_paid: int
) -> None:
    faulty.set_faults({"rules": [{**fault, "times": 2}]})
    job = make_job(tmp_path, faulty.base_url, posts(5), request_retries=2, timeout=0.3)
    outcome = await runs.execute(store, job, clock=clock)
    assert outcome.status["counts"][ItemState.COMPLETED] == 5
    assert set(item_states(store).values()) == {(ItemState.COMPLETED, 1, 1)}
    assert [r["retries"] for r in store.db.query("SELECT retries FROM batches")] == [2]
    assert {r["maybe_paid"] for r in store.db.query("SELECT maybe_paid FROM items")} == {maybe_paid}
    assert outcome.status["breaker"]["state"] == BreakerState.CLOSED


async def test_a_final_transport_failure_sends_the_items_to_wait_for_a_later_attempt(
    tmp_path: Path, faulty: Simulator, store: Store, clock: StepClock
) -> None:
    faulty.set_faults({"rules": [{"fault": "http_500", "times": 3}]})
    job = make_job(tmp_path, faulty.base_url, posts(5), request_retries=2)
    outcome = await runs.execute(store, job, clock=clock)
    assert set(item_states(store).values()) == {(ItemState.COMPLETED, 2, 1)}
    history = [h["to_state"] for h in progress.item_history(store, 1)]
    assert history == ["queued", "running", "waiting", "queued", "running", "received", "completed"]
    assert outcome.status["breaker"]["state"] == BreakerState.CLOSED


@pytest.mark.parametrize("wait", [{"retry_after": 30}, {"retry_after_ms": 30_000}, {"retry_after": 30, "http_date": True}])
async def test_rate_limited_items_wait_until_the_time_the_upstream_gave(
    tmp_path: Path, faulty: Simulator, store: Store, clock: StepClock, wait: dict[str, int]
) -> None:
    faulty.set_faults({"rules": [{"fault": "http_429", "times": 1, **wait}]})
    outcome = await runs.execute(store, make_job(tmp_path, faulty.base_url, posts(5)), clock=clock)
    times = {h["to_state"]: h["at"] for h in progress.item_history(store, 1)}
    assert outcome.status["counts"][ItemState.COMPLETED] == 5
    assert times["received"] - times["waiting"] >= 30
    assert [r["kind"] for r in store.db.query("SELECT kind FROM events WHERE to_state = 'waiting'")] == [
        FailureKind.RATE_LIMITED] * 5


async def test_after_a_rate_limit_no_batch_starts_before_the_time_given(
    tmp_path: Path, faulty: Simulator, store: Store, clock: StepClock
) -> None:
    faulty.set_faults({"rules": [{"fault": "http_429", "times": 1, "retry_after": 30}]})
    job = make_job(tmp_path, faulty.base_url, posts(40, groups=4), max_items=5, concurrency=2)
    await runs.execute(store, job, clock=clock)
    (limited,) = store.db.execute("SELECT min(at) FROM events WHERE to_state = 'waiting'").fetchone()
    starts = list(store.db.execute("SELECT at, items FROM events WHERE to_state = 'running'"))
    assert not [at for at, _ in starts if limited < at < limited + 30]
    assert sum(items for _, items in starts) == 45  # 40 items, 5 of them twice


@pytest.mark.parametrize("fault", ["malformed", "wrong_ids"])
async def test_a_wholly_invalid_answer_splits_the_batch_in_two_once_then_goes_item_by_item(
    tmp_path: Path, faulty: Simulator, store: Store, clock: StepClock, fault: str
) -> None:
    faulty.set_faults({"rules": [{"fault": fault, "times": 3}]})
    job = make_job(tmp_path, faulty.base_url, posts(10), max_items=10, concurrency=1)
    outcome = await runs.execute(store, job, clock=clock)
    assert call_sizes(faulty) == [10, 5, 5] + [1] * 10
    assert outcome.status["counts"][ItemState.COMPLETED] == 10
    assert set(item_states(store).values()) == {(ItemState.COMPLETED, 3, 3)}


@pytest.mark.parametrize("fault", ["invalid_items", "missing_ids"])
async def test_only_the_invalid_items_are_sent_again(
    tmp_path: Path, faulty: Simulator, store: Store, clock: StepClock, fault: str
) -> None:
    faulty.set_faults({"rules": [{"fault": fault, "keys": ["p003"], "times": 1}]})
    job = make_job(tmp_path, faulty.base_url, posts(10), max_items=10, concurrency=1, schema={
        "type": "object", "required": ["label"]})
    outcome = await runs.execute(store, job, clock=clock)
    assert [call["ids"] for call in faulty.ledger.snapshot()["calls"]][1:] == [["p003"]]
    assert outcome.status["counts"][ItemState.COMPLETED] == 10
    assert item_states(store)["p003"] == (ItemState.COMPLETED, 2, 2)


async def test_an_item_that_never_validates_fails_after_its_attempts_with_its_paid_calls(
    tmp_path: Path, faulty: Simulator, store: Store, clock: StepClock
) -> None:
    faulty.set_faults({"rules": [{"fault": "invalid_items", "keys": ["p002"]}]})
    job = make_job(tmp_path, faulty.base_url, posts(6), max_attempts=3, schema={"type": "object", "required": ["label"]})
    outcome = await runs.execute(store, job, clock=clock)
    assert outcome.exit_code == 3
    [failure] = progress.failures(store, "test")
    assert (failure["key"], failure["kind"], failure["attempts"]) == ("p002", FailureKind.ITEM_INVALID, 3)
    assert failure["message"].endswith("(gave up; attempts: 3, paid calls: 3)")
    assert faulty.ledger.snapshot()["billed"]["p002"] == 3


@pytest.mark.parametrize("fault, kind, exit_code", [
    ("http_401", FailureKind.AUTH, 1),
    ("http_402", FailureKind.BILLING, 4),
    ("insufficient_quota", FailureKind.BILLING, 4),
    ("http_403", FailureKind.PERMISSION, 4),
])
async def test_credentials_balance_and_permission_fail_the_items_and_stop_the_run(
    tmp_path: Path, faulty: Simulator, store: Store, fault: str, kind: FailureKind, exit_code: int
) -> None:
    faulty.set_faults({"rules": [{"fault": fault}]})
    job = make_job(tmp_path, faulty.base_url, posts(20, groups=4), max_items=5, concurrency=1)
    outcome = await runs.execute(store, job)
    assert faulty.ledger.snapshot()["requests"] == 1
    assert outcome.exit_code == exit_code
    failures = progress.failures(store, "test")
    assert {(f["kind"], f["retryable"], f["attempts"]) for f in failures} == {(kind, True, 1)}
    assert len(failures) == 5 and outcome.status["counts"][ItemState.PENDING] == 15
    assert outcome.status["breaker"]["state"] == BreakerState.OPEN
    assert outcome.status["breaker"]["reason"].startswith(f"{kind.value}: ")


async def test_a_refused_request_fails_its_items_and_the_run_goes_on(
    tmp_path: Path, faulty: Simulator, store: Store
) -> None:
    faulty.set_faults({"rules": [{"fault": "http_400", "keys": ["p000"]}]})
    job = make_job(tmp_path, faulty.base_url, posts(20, groups=4), max_items=5, concurrency=1)
    outcome = await runs.execute(store, job)
    failures = progress.failures(store, "test")
    assert {(f["kind"], f["retryable"]) for f in failures} == {(FailureKind.BAD_REQUEST, False)}
    assert len(failures) == 5 and outcome.status["counts"][ItemState.COMPLETED] == 15


@pytest.mark.parametrize("raised, kind, state", [
    (errors.RateLimited("slow down", retry_after=60), FailureKind.RATE_LIMITED, ItemState.COMPLETED),
    (errors.TransportError("connection reset"), FailureKind.TRANSPORT, ItemState.COMPLETED),
    (errors.BillingError("no credit left"), FailureKind.BILLING, ItemState.FAILED),
    (ValueError("my bug"), FailureKind.BAD_REQUEST, ItemState.FAILED),
])
async def test_a_python_handler_classifies_its_own_failures(
    tmp_path: Path, store: Store, clock: StepClock, raised: Exception, kind: FailureKind, state: ItemState
) -> None:
    calls: list[list[str]] = []

    async def handler(payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
        calls.append([p["id"] for p in payloads])
        if len(calls) == 1:
            raise raised
        return [{"id": p["id"], "label": "question"} for p in payloads]

    job = make_job(tmp_path, "http://127.0.0.1:9/v1", posts(5), request_retries=0)
    await runs.execute(store, job, provider=PythonHandler(handler), clock=clock)
    first = store.db.execute("SELECT kind FROM events WHERE from_state = 'running' ORDER BY id LIMIT 1").fetchone()
    assert first == (kind,)
    assert set(item_states(store)) == {f"p{i:03d}" for i in range(5)}
    assert {s for s, _, _ in item_states(store).values()} == {state}
