"""The ``anthropic-batch`` provider (Message Batches) against the simulator: the whole flow, each line's outcome,
a lost create found again, and a batch the upstream forgot."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from support import SharedClock, StepClock, anthropic_job, posts

from runner import errors, protocol, recovery, runs
from runner.jobs import Job, Prompt, ProviderConfig
from runner.protocol import BatchItems
from runner.model import FailureKind, ItemState
from runner.providers import TaskResult
from runner.providers.anthropic_batch import CUSTOM_ID, AnthropicBatch, _read_line, custom_id, key_of, tag
from runner.sim import Simulator
from runner.store import Store, views

SCHEMA = {"type": "object", "required": ["label"]}


@pytest.fixture
def upstream() -> Iterator[Simulator]:
    with Simulator(batch_seconds=0.0).start() as sim:
        yield sim


def job_of(tmp_path: Path, sim: Simulator, count: int, **limits: Any) -> Job:
    return anthropic_job(tmp_path, sim, posts(count, groups=2), kind="anthropic-batch", schema=SCHEMA, **limits)


def items(store: Store) -> dict[str, tuple[str, int]]:
    return {r["key"]: (r["state"], r["paid_calls"]) for r in views.items(store, store.run_id("test"))}


def billed_once(count: int) -> dict[str, int]:
    return {f"p{i:03d}": 1 for i in range(count)}


async def test_each_batch_is_one_message_batch_its_id_saved_and_its_results_completed(
    tmp_path: Path, upstream: Simulator, store: Store, clock: StepClock
) -> None:
    outcome = await runs.execute(store, job_of(tmp_path, upstream, 30, max_items=10), clock=clock)
    ledger = upstream.ledger.snapshot()
    assert outcome.exit_code == 0 and outcome.status["counts"][ItemState.COMPLETED] == 30
    assert ledger["batches_created"] == 4 and ledger["billed"] == billed_once(30)
    assert all(r["upstream_id"].startswith("msgbatch_") for r in views.batches(store, store.run_id("test")))
    assert set(items(store).values()) == {(ItemState.COMPLETED, 1)}


@pytest.mark.parametrize("fault", [{"fault": "expire"}, {"fault": "errored_lines", "keys": ["p000", "p002"]}])
async def test_expired_and_errored_requests_were_not_billed_and_are_sent_again_charge_safe(
    tmp_path: Path, upstream: Simulator, store: Store, clock: StepClock, fault: dict[str, Any]
) -> None:
    upstream.set_faults({"rules": [{**fault, "times": 1}]})
    job = job_of(tmp_path, upstream, 6, max_items=10, concurrency=1)
    job = replace(job, retry=replace(job.retry, max_backoff=3600.0))  # the expiring batch's 24 h pass in few polls
    outcome = await runs.execute(store, job, clock=SharedClock(upstream))
    assert outcome.status["counts"][ItemState.COMPLETED] == 6
    assert upstream.ledger.snapshot()["billed"] == billed_once(6)
    assert set(items(store).values()) == {(ItemState.COMPLETED, 1)}


async def test_a_create_whose_answer_was_lost_is_found_by_its_custom_ids_not_created_again(
    tmp_path: Path, upstream: Simulator, store: Store, clock: StepClock
) -> None:
    upstream.set_faults({"rules": [{"fault": "create_lost", "times": 1}]})
    outcome = await runs.execute(store, job_of(tmp_path, upstream, 5), clock=clock)
    ledger = upstream.ledger.snapshot()
    assert outcome.status["counts"][ItemState.COMPLETED] == 5
    assert ledger["batches_created"] == 2 and ledger["billed"] == billed_once(5)  # two months, one batch each
    assert ledger["faults"] == {"create_lost": 1}


async def test_a_lost_create_is_never_sent_again_while_a_batch_in_progress_may_be_it(
    tmp_path: Path, store: Store, clock: StepClock
) -> None:
    """Anthropic shows a batch's custom_ids only once it has ended: until then its items are held for a person."""
    with Simulator(batch_seconds=3600).start() as slow:
        slow.set_faults({"rules": [{"fault": "create_lost", "times": 1}]})
        job = job_of(tmp_path, slow, 5, max_items=10, concurrency=1)
        held = await runs.execute(store, job, clock=SharedClock(slow))  # eight looks, about 2 minutes
        created = slow.ledger.snapshot()["batches_created"]
        slow.advance(3600)
        recovery.confirm(store, "test", now=clock.now())
        done = await runs.execute(store, job, clock=SharedClock(slow))
        ledger = slow.ledger.snapshot()
    assert held.exit_code == 4 and "cannot tell yet" in (held.stopped_for or "")
    assert created == 1  # the one lost, not sent again; the other month's waits its turn
    assert done.status["counts"][ItemState.COMPLETED] == 5
    assert ledger["batches_created"] == 2 and ledger["billed"] == billed_once(5)


async def test_a_batch_the_upstream_no_longer_knows_fails_its_items_and_nothing_is_sent_again(
    tmp_path: Path, upstream: Simulator, store: Store, clock: StepClock
) -> None:
    upstream.set_faults({"rules": [{"fault": "batch_unknown", "times": 1}]})
    await runs.execute(store, job_of(tmp_path, upstream, 4, max_items=10, concurrency=1), clock=clock)
    failed = views.failures(store, "test")
    assert {(f["kind"], f["retryable"]) for f in failed} == {(FailureKind.NOT_FOUND, 1)} and len(failed) == 2
    assert upstream.ledger.snapshot()["batches_created"] == 2


@pytest.mark.parametrize("key", ["p001", "2024-03:post-0017", "a_b", "é ü", "x" * 51])
def test_a_custom_id_carries_the_batch_reference_and_gives_its_key_back(key: str) -> None:
    made = custom_id(tag("posts:1a2b:7"), key)
    assert CUSTOM_ID.fullmatch(made) and made.startswith(tag("posts:1a2b:7") + "-") and key_of(made) == key


def test_a_key_too_long_for_a_custom_id_is_refused_before_anything_is_sent() -> None:
    assert not CUSTOM_ID.fullmatch(custom_id(tag("r"), "x" * 52))


def test_each_line_is_an_answer_or_an_error_that_cost_nothing() -> None:
    def line(key: str, result: dict[str, Any]) -> dict[str, Any]:
        return {"custom_id": custom_id(tag("r"), key), "result": result}
    message = {"content": [{"type": "tool_use", "name": "batch_results", "input": {"results": []}}],
               "stop_reason": "tool_use"}
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    invalid = {"type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens: too large"}}
    result = TaskResult()
    for key, outcome in [("a", {"type": "succeeded", "message": message}),
                         ("b", {"type": "errored", "error": overloaded}), ("c", {"type": "errored", "error": invalid}),
                         ("d", {"type": "canceled"}), ("e", {"type": "expired"})]:
        _read_line(line(key, outcome), result, None)
    assert result.answers["a"].content == '{"results":[]}'
    assert {key: type(e) for key, e in result.errors.items()} == {
        "b": errors.TransportError, "c": errors.BadRequest, "d": errors.TransportError, "e": errors.TransportError}
    assert all(e.refused for e in result.errors.values())  # only succeeded requests are billed


async def test_a_message_batch_is_sized_by_each_request_whole_and_one_too_large_is_split_unsent() -> None:
    async with httpx.AsyncClient() as client:
        provider = AnthropicBatch(ProviderConfig(kind="anthropic-batch"), Prompt(), SCHEMA, client=client, api_key=None)
        payloads = [{"id": f"2026-0{i}:p{i}", "body": "é" * 40 * i} for i in range(1, 6)]
        body = provider.body("posts:ab12:3", BatchItems.of(payloads))
        sizing = provider.sizing()
    budget = sum(sizing.bytes_for(protocol.item_chars(p), len(p["id"])) for p in payloads)
    assert len(body) <= budget and [r["custom_id"][13:] for r in json.loads(body)["requests"]] == [
        f"2026-0{i}_3ap{i}" for i in range(1, 6)]
    refusal = sizing.refusal(256_000_001)
    assert refusal is not None and refusal.parts == 2 and "over the Message Batches API's 256,000,000" in refusal.message


async def test_a_batch_in_progress_is_told_apart_only_by_the_engine_that_kept_it() -> None:
    """After a restart, the saved batch is kept (``kept``): looking for others no longer waits for it to end."""
    with Simulator(batch_seconds=3600).start() as sim:
        config = ProviderConfig(kind="anthropic-batch", base_url=sim.base_url.removesuffix("/v1"))
        async with httpx.AsyncClient() as client:
            made = AnthropicBatch(config, Prompt(), None, client=client, api_key=None)
            batch = await made.create("posts:ab12:1", await made.upload("posts:ab12:1", BatchItems.of([{"id": "p1"}])))
            restarted = AnthropicBatch(config, Prompt(), None, client=client, api_key=None)
            with pytest.raises(errors.TaskUnreachable, match="cannot tell yet"):
                await restarted.find("posts:ab12:1")
            restarted.kept("posts:ab12:1", batch)
            assert await restarted.find("posts:ab12:1") == [batch] == await made.find("posts:ab12:1")
            assert await restarted.find("posts:ab12:2") == []  # another batch's: the one in progress is not it
