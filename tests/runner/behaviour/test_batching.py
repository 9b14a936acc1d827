"""Batches: per group, within max_items and max_chars, at most `concurrency` in flight."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from support import SAMPLE, make_job, posts

from runner import jobs, runs
from runner.store import views
from runner.jobs import BatchLimits
from runner.protocol import item_chars
from runner.sim import Simulator
from runner.model import FailureKind, ItemState
from runner.store import Store


async def test_the_sample_job_respects_every_batch_limit(tmp_path: Path, sim: Simulator, store: Store) -> None:
    job = jobs.load(SAMPLE / "job.toml")
    job = replace(
        job,
        batch=BatchLimits(max_items=20, max_chars=9_000, concurrency=2),
        provider=replace(job.provider, base_url=sim.base_url),
    )
    outcome = await runs.execute(store, job)
    ledger = sim.ledger.snapshot()
    group_of = {r["key"]: r["group"] for r in views.items(store, store.run_id(job.name))}
    assert outcome.status["counts"][ItemState.COMPLETED] == outcome.status["total"] == 2400
    assert ledger["max_in_flight"] <= 2
    assert ledger["max_items_per_request"] == 20
    assert 8_000 < ledger["max_chars_per_request"] <= 9_000
    assert all(len({group_of[key] for key in call["ids"]}) == 1 for call in ledger["calls"])
    assert set(ledger["billed"].values()) == {1} and len(ledger["billed"]) == 2400


async def test_batches_follow_input_order_within_a_group(tmp_path: Path, sim: Simulator, store: Store) -> None:
    job = make_job(tmp_path, sim.base_url, posts(30, groups=2), max_items=5, concurrency=1)
    await runs.execute(store, job)
    calls = [call["ids"] for call in sim.ledger.snapshot()["calls"]]
    assert calls[0] == ["p000", "p002", "p004", "p006", "p008"]
    assert [key for call in calls for key in call] == sorted(
        (f"p{i:03d}" for i in range(30)), key=lambda k: (int(k[1:]) % 2, k)
    )


async def test_an_item_over_max_chars_fails_without_a_call(tmp_path: Path, sim: Simulator, store: Store) -> None:
    records = posts(3)
    records[1]["body"] = "x" * 500
    job = make_job(tmp_path, sim.base_url, records, max_chars=300)
    outcome = await runs.execute(store, job)
    assert outcome.status["counts"][ItemState.COMPLETED] == 2
    assert views.failures(store, "test") == [
        {"key": "p001", "group": "2026-01", "kind": FailureKind.BAD_REQUEST, "attempts": 0, "retryable": False,
         "message": f"item is {item_chars({'id': 'p001', **records[1]})} characters, over batch.max_chars (300)",
         "paid_calls": 0, "maybe_paid": 0, "not_billed": 0, "cost": 0.0, "stage": "openai-chat"}
    ]
    assert "p001" not in sim.ledger.snapshot()["billed"]
