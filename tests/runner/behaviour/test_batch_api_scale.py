"""The Batch API with every batch in flight: 10,000 items, 400 upstream batches at once, against the simulator."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from support import make_job, posts

from runner import runs
from runner.model import BreakerState, ItemState
from runner.sim import Simulator
from runner.store import Store

ITEMS, PER_BATCH = 10_000, 25


@pytest.fixture
def upstream() -> Iterator[Simulator]:
    with Simulator(batch_seconds=1.0).start() as sim:
        yield sim


@pytest.mark.slow
async def test_ten_thousand_items_with_every_batch_in_flight_complete_each_billed_once(
    tmp_path: Path, upstream: Simulator, store: Store
) -> None:
    batches = ITEMS // PER_BATCH
    job = make_job(tmp_path, upstream.base_url, posts(ITEMS), max_items=PER_BATCH, max_chars=1_000_000,
                   concurrency=batches)
    job = replace(job, provider=replace(job.provider, kind="openai-batch"))
    outcome = await runs.execute(store, job)
    ledger = upstream.ledger.snapshot()
    assert outcome.exit_code == 0, outcome.stopped_for
    assert outcome.status["counts"][ItemState.COMPLETED] == ITEMS
    assert outcome.status["breaker"]["state"] == BreakerState.CLOSED
    assert ledger["batches_created"] == batches
    assert sorted(ledger["billed"].values()) == [1] * ITEMS
