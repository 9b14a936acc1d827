"""A Batch API batch's requests file: it fits the API's bound from the start, is split by size if it does not,
and is written to disk and sent from there, never held in memory."""

from __future__ import annotations

import asyncio
import io
import json
import tracemalloc
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from support import StepClock, batch_job, make_job, posts
from unwritable import Folder

from runner import batch_api, item_rows, runs
from runner.protocol import BatchItems
from runner.providers import TaskResult
from runner.model import BreakerState, FailureKind, ItemState
from runner.providers.openai_batch import OpenAIBatch
from runner.sim import Simulator
from runner.store import Store, views


@pytest.fixture
def upstream() -> Iterator[Simulator]:
    with Simulator(batch_seconds=0.0).start() as sim:
        yield sim


def requests_files(sim: Simulator) -> list[bytes]:
    """The requests file of every batch the simulator was asked to create."""
    page = sim.batches.page(0.0, limit=100)
    assert page is not None
    files = [sim.batches.file(batch["input_file_id"]) for batch in page[0]]
    return [file.content for file in files if file is not None]


class Wrapped:
    """A provider wrapping the Batch API's (as one that logs or meters would): it passes every call on."""

    def __init__(self, inner: OpenAIBatch) -> None:
        self.inner = inner

    async def upload(self, ref: str, items: BatchItems) -> Any:
        return await self.inner.upload(ref, items)

    async def create(self, ref: str, uploaded: Any) -> str:
        return await self.inner.create(ref, uploaded)

    async def find(self, ref: str) -> list[str]:
        return await self.inner.find(ref)

    async def cancel(self, task_id: str) -> bool:
        return await self.inner.cancel(task_id)

    async def poll(self, task_id: str) -> TaskResult | None:
        return await self.inner.poll(task_id)

    def sizing(self) -> batch_api.RequestsFile | None:
        return self.inner.sizing()


@pytest.mark.parametrize("wrapped", [False, True], ids=["its own provider", "a provider wrapping it"])
async def test_a_batch_s_requests_file_fits_from_the_start_its_prompt_counted_on_every_line(
    tmp_path: Path, upstream: Simulator, store: Store, clock: StepClock, monkeypatch: pytest.MonkeyPatch, wrapped: bool
) -> None:
    """A prompt of 4,000 characters on 200 lines: the file is ~0.9 MB, the bound 300 kB; the items' text is 11 kB.
    A provider that wraps the Batch API's keeps its sizing (the engine names no provider)."""
    monkeypatch.setattr(batch_api, "FILE_BYTES", 300_000)
    job = batch_job(tmp_path, upstream, posts(200), max_items=50_000, max_chars=50_000_000)
    job = replace(job, prompt=replace(job.prompt, instructions="Label each post carefully. " * 150))
    async with httpx.AsyncClient() as client:
        inner = OpenAIBatch(job.provider, job.prompt, job.output_schema, client=client, api_key=None, spool=tmp_path)
        outcome = await runs.execute(store, job, clock=clock, provider=Wrapped(inner) if wrapped else None)
    ledger = upstream.ledger.snapshot()
    sizes = [len(content) for content in requests_files(upstream)]
    formed = views.batches(store, store.run_id("test"))
    assert outcome.exit_code == 0 and outcome.status["counts"][ItemState.COMPLETED] == 200
    assert all(size <= 300_000 for size in sizes) and 3 <= len(sizes) <= 6
    assert len(formed) == ledger["files_uploaded"] == ledger["batches_created"] == len(sizes)  # none refused or split
    assert sorted(ledger["billed"].values()) == [1] * 200


async def test_a_requests_file_still_too_large_is_split_by_size_into_the_parts_it_needs_never_into_single_items(
    tmp_path: Path, upstream: Simulator, store: Store, clock: StepClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch formed blind to its file's size (the sizing off): 40 items over 3.3 times the bound are 4 parts."""
    job = batch_job(tmp_path, upstream, posts(40), max_items=40, max_chars=100_000)
    provider = OpenAIBatch(job.provider, job.prompt, None, client=httpx.AsyncClient(), api_key=None)
    whole = provider.write_requests(BatchItems([row.input for row in item_rows.items(job)]), io.BytesIO())
    monkeypatch.setattr(batch_api, "FILE_BYTES", whole * 3 // 10)
    monkeypatch.setattr(batch_api.RequestsFile, "bytes_for", lambda self, chars, key_chars: 0)
    outcome = await runs.execute(store, job, clock=clock)
    ledger = upstream.ledger.snapshot()
    assert outcome.exit_code == 0 and outcome.status["counts"][ItemState.COMPLETED] == 40
    assert ledger["files_uploaded"] == 4 and ledger["batches_created"] == 4  # the whole never went, nor 40 singles
    assert all(len(content) <= whole * 3 // 10 for content in requests_files(upstream))
    assert sorted(ledger["billed"].values()) == [1] * 40


class Upstream(httpx.AsyncBaseTransport):
    """A Batch API that takes an upload chunk by chunk, counting its bytes, keeping none; at the batch's first
    poll it notes the memory the process holds (tracemalloc) while the batch waits, and fails the batch."""

    def __init__(self) -> None:
        self.received = 0
        self.waiting: int | None = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/v1/files":
            assert isinstance(request.stream, httpx.AsyncByteStream)
            async for chunk in request.stream:
                self.received += len(chunk)
            return httpx.Response(200, json={"id": "file-1"})
        if request.method == "POST":
            return httpx.Response(200, json={"id": "batch-1", "created_at": 1})
        if path == "/v1/batches":
            return httpx.Response(200, json={"data": [], "has_more": False})
        if self.waiting is None:
            self.waiting = tracemalloc.get_traced_memory()[0]
        return httpx.Response(200, json={"status": "failed", "errors": {"data": [{"message": "measured"}]}})


async def test_a_requests_file_is_written_to_disk_and_sent_from_there_and_a_waiting_batch_keeps_no_items(
    tmp_path: Path, store: Store, clock: StepClock
) -> None:
    """2,000 posts make a file of about 2.8 MB, through the engine's slot: the run allocates a small part of it at
    its peak the items' texts as the store gave them, never the file, and while the batch waits upstream only their keys
    and counts (before: the texts, the payloads decoded and their array, kept for the whole wait)."""
    upstream = Upstream()
    job = make_job(tmp_path, "http://127.0.0.1:9/v1", posts(2_000, body="A post long enough to count. " * 30),
                   max_items=2_000, max_chars=10_000_000, concurrency=1)
    job = replace(job, provider=replace(job.provider, kind="openai-batch"))
    async with httpx.AsyncClient(transport=upstream) as client:
        provider = OpenAIBatch(job.provider, job.prompt, None, client=client, api_key=None, spool=tmp_path)
        size = provider.write_requests(BatchItems([row.input for row in item_rows.items(job)]), io.BytesIO())
        runs.prepare(store, job, now=clock.now())
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            outcome = await runs.execute(store, job, clock=clock, provider=provider)
            peak = tracemalloc.get_traced_memory()[1] - before
        finally:
            tracemalloc.stop()
    assert outcome.status["counts"][ItemState.FAILED] == 2_000
    assert size > 2_500_000 and size < upstream.received < size + 1_000  # the whole file went, with its form
    # Keys and counts, no text (the texts alone are 0.7 of the file); a fresh process's first run also makes its
    # caches (about a third of the file for 2,000 items): half the file tells the two apart with room on each side.
    assert upstream.waiting is not None and upstream.waiting - before < size // 2, upstream.waiting - before
    assert peak < size * 3 // 2, peak  # the texts as read from the store (0.7 of the file): never the file in memory


async def test_an_item_whose_line_alone_outgrows_the_requests_file_fails_with_no_call(
    tmp_path: Path, upstream: Simulator, store: Store, clock: StepClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = batch_job(tmp_path, upstream, posts(3))
    monkeypatch.setattr(batch_api, "FILE_BYTES", 300)  # less than the prompt's own line
    outcome = await runs.execute(store, job, clock=clock)
    failures = views.failures(store, "test")
    assert outcome.status["counts"][ItemState.FAILED] == 3 and upstream.ledger.snapshot()["files_uploaded"] == 0
    assert {f["kind"] for f in failures} == {FailureKind.BAD_REQUEST}
    assert "more than a requests file may hold" in failures[0]["message"]


@pytest.mark.parametrize("trouble", ["read_only", "fill"])
async def test_a_requests_file_the_store_s_folder_cannot_take_stops_the_run_with_the_breaker_open_for_the_store(
    tmp_path: Path, unwritable: Folder, upstream: Simulator, store: Store, clock: StepClock, trouble: str
) -> None:
    """A full or read-only folder is the store's trouble, named, not "a bug in runner"; nothing is sent."""
    job = batch_job(tmp_path, upstream, posts(40, body="A post long enough to fill a small disk. " * 20),
                    max_items=40, max_chars=1_000_000)
    getattr(unwritable, trouble)()
    async with httpx.AsyncClient() as client:
        provider = OpenAIBatch(job.provider, job.prompt, None, client=client, api_key=None, spool=unwritable.path)
        outcome = await runs.execute(store, job, clock=clock, provider=provider)
    reason = outcome.status["breaker"]["reason"]
    assert outcome.exit_code == 4 and outcome.stop_kind == FailureKind.STORE
    assert outcome.status["breaker"]["state"] == BreakerState.OPEN
    assert reason.startswith(f"store: cannot write the requests file in {unwritable.path}: "), reason
    assert "bug" not in reason and upstream.ledger.snapshot()["files_uploaded"] == 0


class Gated(httpx.AsyncBaseTransport):
    """An upstream that holds every upload until let go, counting how many it holds at once."""

    def __init__(self) -> None:
        self.holding = self.most = 0
        self.go = asyncio.Event()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.holding += 1
        self.most = max(self.most, self.holding)
        await self.go.wait()
        self.holding -= 1
        return httpx.Response(200, json={"id": "file-1"})


async def test_at_most_two_requests_files_are_written_and_sent_at_once_whatever_the_slots(tmp_path: Path) -> None:
    upstream = Gated()
    job = make_job(tmp_path, "http://127.0.0.1:9/v1", posts(20))
    payloads = BatchItems([row.input for row in item_rows.items(job)])
    async with httpx.AsyncClient(transport=upstream) as client:
        provider = OpenAIBatch(job.provider, job.prompt, None, client=client, api_key=None, spool=tmp_path)
        uploads = [asyncio.create_task(provider.upload(f"test:{n}", payloads)) for n in range(8)]
        while upstream.holding < 2:
            await asyncio.sleep(0)
        for _ in range(100):  # every other upload had its turn to start
            await asyncio.sleep(0)
        upstream.go.set()
        assert await asyncio.gather(*uploads) == ["file-1"] * 8
    assert upstream.most == 2


async def test_a_key_is_budgeted_twice_on_its_line_so_long_keys_of_four_byte_characters_fit_from_the_start(
    tmp_path: Path, upstream: Simulator, store: Store, clock: StepClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keys of 200 emoji, in the item and again as the line's custom_id: each batch's file fits, none refused."""
    records = [{"id": "\U0001F600" * 200 + f"{n:02d}", "month": "m", "body": "short"} for n in range(40)]
    job = batch_job(tmp_path, upstream, records, max_items=50_000, max_chars=50_000_000)
    provider = OpenAIBatch(job.provider, job.prompt, None, client=httpx.AsyncClient(), api_key=None)
    whole = provider.write_requests(BatchItems([row.input for row in item_rows.items(job)]), io.BytesIO())
    monkeypatch.setattr(batch_api, "FILE_BYTES", whole // 4)
    outcome = await runs.execute(store, job, clock=clock)
    ledger = upstream.ledger.snapshot()
    formed = views.batches(store, store.run_id("test"))
    assert outcome.exit_code == 0 and outcome.status["counts"][ItemState.COMPLETED] == 40
    assert all(len(content) <= whole // 4 for content in requests_files(upstream))
    assert len(formed) == ledger["batches_created"] == ledger["files_uploaded"]  # none formed too large
