"""The engine: forms batches, holds the slots, and moves items through their states.

The order of one batch, each step one transaction in the store:

1. ``claim_batch``: items of one group become ``queued`` in a new batch.
2. ``start_batch``: ``running``, attempts + 1, committed *before* the call.
3. the upstream call (the slot is held from here to the end).
4. ``record_answer``: the output is committed as ``received``.
5. validation, then ``settle_batch``: ``completed`` with the result, or
   re-attempted later, or ``failed`` with its reason; the slot is released.

Progress and the end of the run are read from the store, never from the
in-memory queue. Time comes from an injected clock.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import socket
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Protocol

from . import protocol
from .errors import UpstreamError
from .jobs import Job
from .providers import Answer, Provider
from .states import FailureKind, ItemState
from .store import Batch, Settlement, StartedItem, Store
from .validation import ResultCheck

HEARTBEAT_SECONDS = 2.0
POLL_SECONDS = 0.5


class Clock(Protocol):
    """Where the engine gets the time and waits; tests pass one they control."""

    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """Wall-clock time and real sleeping."""

    def now(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


@dataclass(frozen=True)
class Outcome:
    """How a run ended: ``done`` (nothing left to do) or ``stopped`` (a person is needed)."""

    status: dict[str, Any]
    stopped_for: str | None

    @property
    def exit_code(self) -> int:
        """The CLI contract: 0 all completed, 3 failed items, 4 stopped for a person."""
        if self.stopped_for is not None:
            return 4
        return 3 if self.status["counts"][ItemState.FAILED] else 0


class Engine:
    """Runs one job's run over a store until nothing is left that it may do alone."""

    def __init__(
        self,
        store: Store,
        job: Job,
        provider: Provider,
        *,
        clock: Clock | None = None,
    ) -> None:
        self.store = store
        self.job = job
        self.provider = provider
        self.clock = clock or SystemClock()
        self.run_id = store.run_id(job.name)
        self.check = ResultCheck(job.output_schema, job.check)
        self.token = secrets.token_hex(8)
        self.stopped_for: str | None = None
        self._last_beat = 0.0

    async def run(self) -> Outcome:
        """Take the run's lease, recover what a dead engine left, and work until done or stopped."""
        now = self.clock.now()
        self.store.acquire_lease(
            self.run_id, token=self.token, pid=os.getpid(), host=socket.gethostname(), now=now
        )
        self._last_beat = now
        try:
            self.store.recover(self.run_id, now=now)
            self._validate_received()
            await self._work()
        finally:
            now = self.clock.now()
            self.store.release_queued(self.run_id, now=now)
            self.store.release_lease(self.run_id, token=self.token)
        return Outcome(self.store.status(self.job.name, now=self.clock.now()), self.stopped_for)

    async def _work(self) -> None:
        slots = self.job.batch.concurrency
        formed: deque[Batch] = deque()
        in_flight: set[asyncio.Task[None]] = set()
        try:
            while True:
                self._beat()
                if self.stopped_for is None:
                    self._form(formed, lookahead=slots)
                    while formed and len(in_flight) < slots:
                        in_flight.add(asyncio.create_task(self._process(formed.popleft())))
                if in_flight:
                    done, in_flight = await asyncio.wait(
                        in_flight, timeout=POLL_SECONDS, return_when=asyncio.FIRST_COMPLETED
                    )
                    for task in done:
                        task.result()
                    continue
                if self.stopped_for is not None or self.store.unfinished(self.run_id) == 0:
                    return
                due = self.store.next_due(self.run_id)
                if due is None:
                    self.stopped_for = "items need a person's confirmation"
                    return
                await self.clock.sleep(min(max(due - self.clock.now(), 0.0), POLL_SECONDS))
        finally:
            for task in in_flight:
                task.cancel()
            await asyncio.gather(*in_flight, return_exceptions=True)

    def _form(self, formed: deque[Batch], *, lookahead: int) -> None:
        """Keep up to ``lookahead`` batches queued for the next free slots."""
        limits = self.job.batch
        while len(formed) < lookahead:
            batch = self.store.claim_batch(
                self.run_id, max_items=limits.max_items, max_chars=limits.max_chars, now=self.clock.now()
            )
            if batch is None:
                return
            formed.append(batch)

    def _beat(self) -> None:
        now = self.clock.now()
        if now - self._last_beat >= HEARTBEAT_SECONDS:
            self.store.heartbeat(self.run_id, token=self.token, now=now)
            self._last_beat = now

    async def _process(self, batch: Batch) -> None:
        """One batch from start to settle; it holds its slot for all of it."""
        items = self.store.start_batch(batch.id, now=self.clock.now())
        try:
            answer = await self.provider.call([json.loads(item.input) for item in items])
        except UpstreamError as exc:
            self._settle_failed_call(batch, items, exc)
            return
        parsed = protocol.parse_results(answer.content, (item.key for item in items))
        outputs = {
            item.id: protocol.encode(parsed.results[item.key]) for item in items if item.key in parsed.results
        }
        self.store.record_answer(batch.id, outputs, now=self.clock.now())
        self._settle(batch.id, items, outputs, self._whole_answer_problem(parsed, answer))

    @staticmethod
    def _whole_answer_problem(parsed: protocol.ParsedBatch, answer: Answer) -> str | None:
        if parsed.problem is None or not answer.finish_reason or answer.finish_reason == "stop":
            return parsed.problem
        return f"{parsed.problem} (finish_reason: {answer.finish_reason})"

    def _settle(
        self, batch_id: int, items: list[StartedItem], outputs: dict[int, str], problem: str | None
    ) -> None:
        """Validate the received outputs, then complete, re-attempt or fail each item."""
        settlement = Settlement(not_before=self._retry_time(None))
        for item in items:
            if item.id in outputs:
                self._judge(item.id, outputs[item.id], settlement)
            elif problem is not None:
                settlement.retry[item.id] = (FailureKind.BATCH_INVALID, problem)
            else:
                settlement.retry[item.id] = (FailureKind.ITEM_INVALID, "the answer has no result for this id")
        self.store.settle_batch(
            batch_id, settlement, max_attempts=self.job.retry.max_attempts, now=self.clock.now()
        )

    def _judge(self, item_id: int, output: str, settlement: Settlement) -> None:
        problem = self.check.problem(json.loads(output))
        if problem is None:
            settlement.completed[item_id] = output
        else:
            settlement.retry[item_id] = (FailureKind.ITEM_INVALID, problem)

    def _settle_failed_call(self, batch: Batch, items: list[StartedItem], exc: UpstreamError) -> None:
        settlement = Settlement(not_before=self._retry_time(exc.retry_after))
        for item in items:
            if exc.retryable:
                settlement.retry[item.id] = (exc.kind, exc.message)
            else:
                settlement.failed[item.id] = (exc.kind, exc.message, True)
        if not exc.retryable:
            self.stopped_for = f"{exc.kind.value}: {exc.message}"
        self.store.settle_batch(
            batch.id, settlement, max_attempts=self.job.retry.max_attempts, now=self.clock.now()
        )

    def _retry_time(self, retry_after: float | None) -> float:
        return self.clock.now() + (retry_after if retry_after is not None else self.job.retry.backoff)

    def _validate_received(self) -> None:
        """Complete locally what a dead engine received but did not validate: no upstream call."""
        by_batch: dict[int, Settlement] = {}
        for row in self.store.received_items(self.run_id):
            settlement = by_batch.setdefault(row["batch_id"], Settlement(not_before=self._retry_time(None)))
            self._judge(row["id"], row["output"], settlement)
        for batch_id, settlement in by_batch.items():
            self.store.settle_batch(
                batch_id, settlement, max_attempts=self.job.retry.max_attempts, now=self.clock.now()
            )
