"""The engine: forms batches, holds the slots, and moves items through their states.

The order of one batch, each store step one committed transaction:

1. ``claim_batch``: items of one group become ``queued`` in a new batch, to
   wait for a slot.
2. ``start_batch``: ``running``, attempts + 1, committed *before* the call.
3. the upstream call, with bounded request retries for transport trouble
   (the slot is held from here to the end).
4. ``record_answer``: the output is committed as ``received``.
5. validation, then ``settle_batch``: ``completed`` with the result, or
   re-attempted later, split, or ``failed`` with its reason, together with
   the breaker's new state; the slot is released.

A slot writes steps 5, 2 and 1 together (:func:`begin_batch`): the batch it
just finished is saved in the transaction that starts its next one (when the
controls let one start now), which forms the batch after it. The slot is held
until that commit, and the next call goes out only after it.

The store's steps run on the event loop, each a short transaction, so no
other step of the engine runs while one is being written: what a slot reads
of the run (stopped, breaker, controls) just before it starts a batch still
holds when it does. While another process holds the store's write lock, the
steps wait their turn in order without holding up the loop, and a start
reads the run again after its wait (:mod:`runner.busy`).
(A writer thread with its own connection was measured slower on 2 cores: the
commits rarely met, and each waited for the GIL.)

How many batches may start is the breaker's and a person's business
(:mod:`runner.breaker`, :mod:`runner.control`), read from the store on every
turn. Progress and the end of the run are read from the store, never from the
in-memory queue. Time comes from an injected clock.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import random
import secrets
import traceback
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from . import breaker, busy, lease, progress, protocol
from .breaker import Control
from .clock import Clock, SystemClock
from .errors import BadRequest, StoreBusy, StoreError, TaskUnreachable, TransportError, UpstreamError
from .jobs import BatchLimits, ItemRow, Job
from .providers import Answer, Provider, TaskProvider, TaskResult
from .states import FailureKind, ItemState
from .store import Batch, Settlement, StartedItem, Store
from .tasks import TaskDriver
from .validation import ResultCheck

MISSING_LINE = (
    "the finished task has no line for this item: it may have run and been billed; "
    "runner retry sends it again, which may charge twice"
)
HEARTBEAT_SECONDS = 2.0
log = logging.getLogger(__name__)
POLL_SECONDS = 0.5


@dataclass(frozen=True)
class Outcome:
    """How a run ended: done, or stopped because a person is needed (and why)."""

    status: dict[str, Any]
    stopped_for: str | None
    stop_kind: FailureKind | None = None

    @property
    def exit_code(self) -> int:
        """The CLI contract: 0 all completed, 3 failed items, 4 stopped for a person, 1 refused key."""
        reason = self.status["breaker"]["reason"] or ""
        if self.stop_kind is FailureKind.AUTH or (self.stopped_for and reason.startswith("auth:")):
            return 1
        if self.stopped_for is not None:
            return 4
        return 3 if self.status["counts"][ItemState.FAILED] else 0


class Engine:
    """Runs one job's run over a store until nothing is left that it may do alone.

    With ``wait_for_person`` it stays while the run is paused or its breaker
    open, obeying resume and step; without, it returns (the CLI's exit 4).
    """

    def __init__(
        self,
        store: Store,
        job: Job,
        provider: Provider | TaskProvider,
        *,
        clock: Clock | None = None,
        wait_for_person: bool = False,
        rng: random.Random | None = None,
    ) -> None:
        self.store = store
        self.job = job
        self.clock = clock or SystemClock()
        self.provider = provider
        # One of the two is set when the run starts: the provider either calls, or submits and polls.
        self.tasks: TaskDriver | None = None
        self.caller: Provider | None = None
        self.wait_for_person = wait_for_person
        self.rng = rng or random.Random()
        self.run_id = 0
        self.check = ResultCheck(job.output_schema, job.check)
        self.token = secrets.token_hex(8)
        self.stopped_for: str | None = None
        self.stop_kind: FailureKind | None = None
        self._last_beat = 0.0
        self._formed: deque[Batch] = deque()
        #: The slots at work: each a task running batches one after another.
        self._in_flight: set[asyncio.Task[None]] = set()
        #: Slots at work (each counts itself before its first start) and not yet ended.
        self._holding = 0
        self._resumed: set[int] = set()
        #: After a rate limit, no batch starts before this time (the upstream asked us to wait).
        self._quiet_until = 0.0
        #: The slots' store steps, in order, waiting their turn while another process holds the store.
        self._steps = busy.StoreSteps(now=self.clock.now, sleep=self.clock.sleep)
        #: The last turn could not form the batches it wanted: another process held the store.
        self._forming_held_up = False
        #: Why the run stopped on a store failure, while its open breaker could not be saved yet.
        self._breaker_unsaved: str | None = None
        #: Calls the upstream refused in a row for its rate limit, for the back-off when it gives no time.
        self._rate_limited = 0
        #: The reason of the last batch the upstream refused as a bad request, until an answer comes.
        self._last_refusal: str | None = None

    async def run(self, items: Iterable[ItemRow] | None = None) -> Outcome:
        """Take the run's lease, add ``items`` if given, recover what a dead engine left, and work.

        Returns when nothing is left that the engine may do alone; bad input
        raises before any item changes.
        """
        name = self.job.name
        lease.acquire(self.store, name, token=self.token, now=self.clock.now())
        self._last_beat = self.clock.now()
        try:
            if items is not None:
                self.store.prepare_run(self.job, items, now=self.clock.now())
            self.run_id = self.store.run_id(name)
            self.store.recover(self.run_id, now=self.clock.now())
            self._validate_received()
            if isinstance(self.provider, TaskProvider):
                self.tasks = TaskDriver(
                    self.store, self.provider, retry=self.job.retry, clock=self.clock,
                    run_reference=self.store.reference(self.run_id), steps=self._steps,
                    lands_within=self.job.provider.timeout + self.job.provider.create_margin,
                )
            else:
                self.caller = self.provider
            with self.store.waiting_at_most(busy.WAIT_SECONDS):
                await self._work()
        finally:
            await self._tidy(name)
        return Outcome(progress.status(self.store, name, now=self.clock.now()), self.stopped_for, self.stop_kind)

    async def _tidy(self, name: str) -> None:
        """Save the open breaker a store failure could not, give back unsent batches and the lease.

        Each waits for a busy store as any step does; a store that failed may refuse all of it.
        """
        try:
            unsaved = self._breaker_unsaved
            if unsaved is not None:
                await self._steps.run(lambda: self.store.open_breaker(self.run_id, unsaved))
                self.stopped_for, self._breaker_unsaved = unsaved, None
            if self.run_id:
                await self._steps.run(
                    lambda: self.store.release_queued(self.run_id, lease=(name, self.token), now=self.clock.now())
                )
            await self._steps.run(lambda: lease.release(self.store, name, token=self.token))
        except StoreError:
            if self.stop_kind is not FailureKind.STORE:
                raise

    def request_stop(self, reason: str) -> None:
        """Start no more batches; those in flight finish, then ``run`` returns."""
        if self.stopped_for is None:
            self.stopped_for = reason

    async def _work(self) -> None:
        try:
            while True:
                control = self._turn()
                if self._in_flight:
                    done, self._in_flight = await asyncio.wait(
                        self._in_flight, timeout=POLL_SECONDS, return_when=asyncio.FIRST_COMPLETED
                    )
                    for task in done:
                        task.result()
                    continue
                if control is None or not await self._idle_or_stop(control):
                    return
        finally:
            for task in self._in_flight:
                task.cancel()
            await asyncio.gather(*self._in_flight, return_exceptions=True)

    def _turn(self) -> Control | None:
        """Beat, read the controls, form and start what may start; None once the store failed."""
        if self.stop_kind is FailureKind.STORE:
            return None
        try:
            self._beat()
            control = self.store.control(self.run_id)
            held_up = False
            if self._may_start():
                self._take_resumable()
                free = control.slots(self.job.batch.concurrency) - len(self._in_flight)
                held_up = len(self._formed) < free and not self._form(lookahead=free)
                self._start(control)
            self._forming_held_up = held_up
            return control
        except StoreError as exc:
            self._store_failed(exc)
            return None

    def _may_start(self) -> bool:
        """Nothing stopped the run, and no rate limit holds new starts back."""
        return self.stopped_for is None and self.clock.now() >= self._quiet_until

    def _start(self, control: Control) -> None:
        """Give formed batches to new slots, as many as the breaker and a person allow now.

        Each slot begins on a later step of the loop, and checks again then
        (``_may_go_on``): other slots' outcomes may have changed the run meanwhile.
        """
        slots = control.slots(self.job.batch.concurrency)
        while self._formed and len(self._in_flight) < slots:
            step = control.held
            self._in_flight.add(asyncio.create_task(self._process(self._formed.popleft(), step=step)))
            if step:
                return

    async def _idle_or_stop(self, control: Control) -> bool:
        try:
            return await self._idle(control)
        except StoreError as exc:
            self._store_failed(exc)
            return False

    async def _idle(self, control: Control) -> bool:
        """Nothing in flight: wait for what the store says is still to come, or stop."""
        if self.stopped_for is not None:
            return False
        if progress.unfinished(self.store, self.run_id) == 0:
            return False
        if control.held:
            if not self.wait_for_person:
                self.stopped_for = _held_reason(control)
                return False
            await self.clock.sleep(POLL_SECONDS)
            return True
        due = progress.next_due(self.store, self.run_id)
        if due is None and not self._formed and self._forming_held_up:  # wait for the store, then start it
            formed = await self._steps.run(self._claim)
            self._formed.extend([formed] if formed is not None else [])
            self._forming_held_up = False
            return True
        if due is None and not self._formed:
            self.stopped_for = "items need a person's confirmation"
            return False
        due = max(due or 0.0, self._quiet_until)
        await self.clock.sleep(min(max(due - self.clock.now(), 0.0), POLL_SECONDS))
        return True

    def _take_resumable(self) -> None:
        """Put the batches a person confirmed first in line."""
        for confirmed in self.store.resumable(self.run_id):
            if confirmed.id not in self._resumed:
                self._resumed.add(confirmed.id)
                self._formed.appendleft(confirmed)

    def _form(self, *, lookahead: int) -> bool:
        """Keep up to ``lookahead`` batches queued for the next free slots; False if the store was busy."""
        while len(self._formed) < lookahead:
            try:
                batch = self._claim()
            except StoreBusy:
                return False
            if batch is None:
                return True
            self._formed.append(batch)
        return True

    def _claim(self) -> Batch | None:
        limits = self.job.batch
        return self.store.claim_batch(
            self.run_id, max_items=limits.max_items, max_chars=limits.max_chars, now=self.clock.now()
        )

    def _beat(self) -> None:
        """Renew the lease every few seconds; a busy store puts it off to a later turn."""
        now = self.clock.now()
        if now - self._last_beat >= HEARTBEAT_SECONDS:
            try:
                held = lease.beat(self.store, self.job.name, token=self.token, now=now)
            except StoreBusy:
                return
            if not held:
                self.request_stop("another engine took this run over (this one's heartbeat was late)")
            self._last_beat = now

    async def _process(self, batch: Batch, *, step: bool) -> None:
        """One slot: a batch from start to settle, holding the slot for all of it, then maybe the next.

        A batch that succeeded is saved in the same transaction that starts the
        slot's next batch, when the controls let one start now: between two
        calls the slot waits for two commits (the answer, then save and start),
        not three.
        """
        settled: tuple[Batch, Settlement] | None = None
        self._holding += 1
        try:
            while True:
                settlement = await self._one(batch, step=step, settled=settled)
                if settlement is None:
                    return
                settled = (batch, settlement)
                if not self._formed:  # (batches a person confirmed are put first in line by every turn)
                    await self._settle(*settled)
                    return
                batch, step = self._formed.popleft(), False
        except StoreError as exc:
            self._store_failed(exc)
        except Exception as exc:  # a bug must not cancel the other batches in flight
            self._engine_failed(batch, exc)
        finally:
            self._holding -= 1

    def _may_go_on(self, *, step: bool) -> bool:
        """Whether a slot (counted in ``_holding``) may start a batch: the run and its controls as they are now.

        Read just before each start (and again after a wait for a busy store):
        since the turn that gave the slot its first batch, or since the slot's
        last call, another slot's outcome may have stopped the run (a refused
        key), opened the breaker or left it probing (one slot), and a person
        may have paused it. ``step`` spends a step a person allowed.
        """
        if not self._may_start():
            return False
        control = self.store.control(self.run_id)
        if control.held and not step:
            return False
        return self._holding <= control.slots(self.job.batch.concurrency)

    async def _one(
        self, batch: Batch, *, step: bool, settled: tuple[Batch, Settlement] | None
    ) -> Settlement | None:
        """Start a batch (saving the slot's previous one), call, record and validate it.

        Returns the settlement of a successful call, for the caller to save; a
        failed call, and any outcome of a submitted task, is saved here, and None
        returned. None too when the run or its controls no longer let the batch
        start: it goes back in line, and the previous one is saved.
        """
        begun = await self._steps.run(
            lambda: begin_batch(
                self.store, self.run_id, batch, settled=settled, lease=(self.job.name, self.token),
                limits=self.job.batch, max_attempts=self.job.retry.max_attempts,
                max_refusals=self.job.retry.max_refusals, now=self.clock.now(), step=step,
                intent=self.tasks is None, claim=len(self._formed) < self.job.batch.concurrency,
            ),
            still=lambda: self._may_go_on(step=step),
        )
        if begun is None:  # the run or its controls say no more now: the batch waits in line
            self._formed.appendleft(batch)
            if settled is not None:
                await self._settle(*settled)
            return None
        items, formed = begun
        self._formed.extend(formed)
        if not items:
            self.request_stop("another engine took this run over (this one's heartbeat was late)")
            await self._settle(batch, Settlement())
            return None
        payloads = [json.loads(item.input) for item in items]
        if self.tasks is not None:
            await self._process_task(self.tasks, batch, items, payloads)
            return None
        assert self.caller is not None
        try:
            answer = await self._call(self.caller, batch, payloads)
        except UpstreamError as exc:
            await self._settle_failed_call(batch, items, exc)
            return None
        parsed, results, outputs = self._read(batch, answer, items)
        await self._steps.run(lambda: self.store.record_answer(batch.id, outputs, raw=answer.raw, now=self.clock.now()))
        return self._judge_answer(batch, items, results, parsed)

    async def _process_task(
        self, tasks: TaskDriver, batch: Batch, items: list[StartedItem], payloads: list[dict[str, Any]]
    ) -> None:
        """Submit (or, confirmed after a crash, poll again) and settle item by item."""
        try:
            if batch.resume:
                result = await tasks.resume(batch.id)
            else:
                result = await tasks.submit_and_wait(batch.id, payloads)
        except TaskUnreachable as exc:
            await self._steps.run(lambda: self.store.hold(batch.id, now=self.clock.now()))
            self.request_stop(f"{exc.message}; its items are held (runner confirm polls it again)")
            return
        except UpstreamError as exc:
            await self._settle_failed_call(batch, items, exc)
            return
        if result is not None and result.failure is not None:
            await self._settle_failed_call(batch, items, result.failure)
            return
        if result is None:  # nothing reached the upstream: no sickness to count, nothing to pay twice
            message = "the batch was never created upstream: it is sent again, which cannot charge twice"
            never = Settlement(not_before=self.clock.now())
            never.retry = {item.id: (FailureKind.TRANSPORT, message) for item in items}
            await self._settle(batch, never)
            return
        await self._settle_task(batch, items, result)

    async def _settle_task(self, batch: Batch, items: list[StartedItem], result: TaskResult) -> None:
        """A finished task: its answered lines were billed; each item completes, waits or fails on its own."""
        answered = [item for item in items if item.key in result.answers]
        results: dict[int, dict[str, Any]] = {}
        outputs: dict[int, str] = {}
        for item in answered:
            _, found, encoded = self._read(batch, result.answers[item.key], [item])
            results.update(found)
            outputs.update(encoded)
        raw = protocol.encode({item.key: result.answers[item.key].raw for item in answered})
        await self._steps.run(lambda: self.store.record_answer(
            batch.id, outputs, raw=raw, answered=[item.id for item in answered], now=self.clock.now()))
        settlement = Settlement(not_before=self._retry_time(None), breaker=breaker.after_success)
        for item in items:
            error = result.errors.get(item.key)
            if item.id in outputs:
                self._judge(item.id, results[item.id], settlement)
            elif error is not None and error.kind in (FailureKind.TRANSPORT, FailureKind.RATE_LIMITED):
                settlement.retry[item.id] = (error.kind, error.message)
                if error.refused:
                    settlement.refused.add(item.id)
            elif error is not None:
                settlement.failed[item.id] = (error.kind, error.message, error.retryable)
            elif item.key in result.answers:
                settlement.retry[item.id] = (FailureKind.ITEM_INVALID, "the answer has no usable result for this id")
            else:
                settlement.failed[item.id] = (FailureKind.NOT_FOUND, MISSING_LINE, True)
                settlement.maybe_paid.add(item.id)
        await self._settle(batch, settlement)

    async def _call(self, caller: Provider, batch: Batch, payloads: list[dict[str, Any]]) -> Answer:
        """The upstream call, with bounded request retries (with jitter) for transport trouble."""
        limits = self.job.retry
        for retry in range(limits.request_retries + 1):
            try:
                return await caller.call(payloads)
            except TransportError as exc:
                if exc.maybe_billed:
                    await self._steps.run(lambda: self.store.count_maybe_paid(batch.id))
                wait = exc.retry_after
                if retry == limits.request_retries or (wait is not None and wait > limits.max_backoff):
                    raise
                await self._steps.run(lambda: self.store.count_request_retry(batch.id))
                delay = min(limits.backoff * 2**retry, limits.max_backoff) * (0.5 + self.rng.random())
                await self.clock.sleep(wait if wait is not None else delay)
        raise AssertionError("unreachable")

    def _read(
        self, batch: Batch, answer: Answer, items: list[StartedItem]
    ) -> tuple[protocol.ParsedBatch, dict[int, dict[str, Any]], dict[int, str]]:
        """The answer split by item: what was wrong, each item's result, and each result as saved.

        Never raises: an answer this engine cannot read (a bug, whatever its
        shape) is an unusable answer, judged as one, and saved all the same.
        """
        try:
            parsed = protocol.parse_results(answer.content, (item.key for item in items))
            problem = answer.problem or _whole_answer_problem(parsed, answer)
            results = {item.id: parsed.results[item.key] for item in items if item.key in parsed.results}
            outputs = {item_id: protocol.encode(result) for item_id, result in results.items()}
        except Exception as exc:
            log.exception("batch %s: the answer could not be read", batch.id)
            problem = f"the answer could not be read ({type(exc).__name__}: {exc})"
            return protocol.ParsedBatch({}, problem), {}, {}
        return dataclasses.replace(parsed, problem=problem), results, outputs

    def _judge_answer(
        self,
        batch: Batch,
        items: list[StartedItem],
        results: dict[int, dict[str, Any]],
        parsed: protocol.ParsedBatch,
    ) -> Settlement:
        """Validate the received results: how each item completes, is re-attempted, split or failed."""
        self._rate_limited, self._last_refusal = 0, None
        settlement = Settlement(not_before=self._retry_time(None), breaker=breaker.after_success)
        if parsed.problem is not None:
            self._split_or_retry(batch, items, parsed.problem, settlement)
        for item in items:
            if item.id in results:
                self._judge(item.id, results[item.id], settlement)
            elif parsed.problem is None:
                why = parsed.contradictions.get(item.key, "the answer has no result for this id")
                settlement.retry[item.id] = (FailureKind.ITEM_INVALID, why)
        return settlement

    def _split_or_retry(self, batch: Batch, items: list[StartedItem], problem: str, settlement: Settlement) -> None:
        """A wholly invalid answer: split into halves once, then single items, then plain re-attempts."""
        alive = [item.id for item in items if item.attempts_left > 0]
        for item in items:
            if item.attempts_left <= 0 or not _splits(batch, items):
                settlement.retry[item.id] = (FailureKind.BATCH_INVALID, problem)
        if _splits(batch, items) and alive:
            settlement.split = _split(batch, alive)

    def _judge(self, item_id: int, result: Any, settlement: Settlement) -> None:
        """Complete an item whose ``result`` (its saved output, decoded) is valid; re-attempt it otherwise."""
        problem = self.check.problem(result)
        if problem is None:
            settlement.completed.append(item_id)
        else:
            settlement.retry[item_id] = (FailureKind.ITEM_INVALID, problem)

    async def _settle_failed_call(self, batch: Batch, items: list[StartedItem], exc: UpstreamError) -> None:
        """No usable answer: wait and re-attempt, or fail and stop the run, by the failure's kind."""
        settlement = Settlement(not_before=self._retry_time(exc.retry_after))
        if exc.kind is FailureKind.TRANSPORT:
            settlement.breaker = lambda control: breaker.after_transport_failure(control, exc.message)
        elif exc.kind is FailureKind.RATE_LIMITED:
            settlement.not_before = self._after_rate_limit(exc.retry_after)
            settlement.refused = {item.id for item in items}
            self._quiet_until = max(self._quiet_until, settlement.not_before)
        elif isinstance(exc, BadRequest) and not exc.stops_run:
            await self._settle(batch, self._refused_request(batch, items, exc, settlement))
            return
        elif exc.stops_run:
            reason = f"{exc.kind.value}: {exc.message}"
            settlement.breaker = lambda control: breaker.opened(control, reason)
            self.stopped_for, self.stop_kind = reason, exc.kind
        for item in items:
            if exc.kind in (FailureKind.TRANSPORT, FailureKind.RATE_LIMITED):
                settlement.retry[item.id] = (exc.kind, exc.message)
            else:
                settlement.failed[item.id] = (exc.kind, exc.message, exc.retryable or exc.stops_run)
        await self._settle(batch, settlement)

    def _after_rate_limit(self, retry_after: float | None) -> float:
        """When to try again after a 429: the upstream's time, else back off exponentially, with jitter."""
        self._rate_limited += 1
        if retry_after is not None:
            return self.clock.now() + retry_after
        limits = self.job.retry
        delay = limits.backoff * 2.0 ** min(self._rate_limited - 1, 30) * (0.5 + self.rng.random())
        return self.clock.now() + min(delay, limits.max_backoff)

    def _refused_request(
        self, batch: Batch, items: list[StartedItem], exc: BadRequest, settlement: Settlement
    ) -> Settlement:
        """A 400 (nothing ran, nothing billed): split to find the item refused; only one alone fails.

        A refusal that is not about the batch's content (an unknown model, say)
        fails the batch at once; the same reason for two batches in a row
        stops the run for a person: every further call would be refused too.
        """
        settlement.refused = {item.id for item in items}
        if exc.splittable and _splits(batch, items):
            settlement.split = _split(batch, [item.id for item in items])
            return settlement
        for item in items:
            settlement.failed[item.id] = (FailureKind.BAD_REQUEST, exc.message, not exc.splittable)
        if exc.too_long:  # about these items alone: it says nothing of the next call
            return settlement
        repeated, self._last_refusal = self._last_refusal == exc.reason, exc.reason
        if repeated:
            reason = f"{FailureKind.BAD_REQUEST.value}: {exc.message} (refused so twice in a row)"
            settlement.breaker = lambda control: breaker.opened(control, reason)
            self.stopped_for, self.stop_kind = reason, FailureKind.BAD_REQUEST
        return settlement

    async def _settle(self, batch: Batch, settlement: Settlement) -> None:
        split = await self._steps.run(lambda: self._save(batch.id, settlement))
        self._formed.extend(split)

    def _save(self, batch_id: int, settlement: Settlement) -> list[Batch]:
        limits = self.job.retry
        return self.store.settle_batch(
            batch_id, settlement, max_attempts=limits.max_attempts, max_refusals=limits.max_refusals,
            now=self.clock.now(),
        )

    def _engine_failed(self, batch: Batch, exc: Exception) -> None:
        """A bug in the engine: log and keep its traceback in the batch's history, and stop the run."""
        log.error("unexpected error in batch %s", batch.id, exc_info=exc)
        trace = "".join(traceback.format_exception(exc))
        try:
            self.store.note(batch.id, kind="engine_error", message=trace, now=self.clock.now())
        except StoreError:
            log.error("the traceback of batch %s could not be saved in the store", batch.id)
        self.request_stop(
            f"unexpected {type(exc).__name__} in batch {batch.id} (a bug in runner): {exc}; its traceback is in "
            "the log and the batch's history (runner tui, an item's detail); running again keeps the saved "
            "answers and holds what was sent for a person"
        )

    def _store_failed(self, exc: StoreError) -> None:
        """Never run work that cannot be recorded: open the breaker (reason store) and stop starting."""
        reason = f"store: {exc}"
        self.stopped_for, self.stop_kind = reason, FailureKind.STORE
        try:
            self.store.open_breaker(self.run_id, reason)
        except StoreError as again:  # tried again when the engine stops (``_tidy``), waiting as any write does
            self.stopped_for = f"{reason}; the open breaker could not be saved: {again}"
            self._breaker_unsaved = reason

    def _retry_time(self, retry_after: float | None) -> float:
        return self.clock.now() + (retry_after if retry_after is not None else self.job.retry.backoff)

    def _validate_received(self) -> None:
        """Complete locally what a dead engine received but did not validate: no upstream call."""
        by_batch: dict[int, Settlement] = {}
        for row in self.store.received_items(self.run_id):
            settlement = by_batch.setdefault(row["batch_id"], Settlement(not_before=self._retry_time(None)))
            if row["output"] is None:
                settlement.retry[row["id"]] = (FailureKind.ITEM_INVALID, "the saved answer has no usable result for it")
            else:
                self._judge(row["id"], json.loads(row["output"]), settlement)
        for batch_id, settlement in by_batch.items():
            self._save(batch_id, settlement)


def begin_batch(
    store: Store,
    run_id: int,
    batch: Batch,
    *,
    settled: tuple[Batch, Settlement] | None,
    lease: tuple[str, str],
    limits: BatchLimits,
    max_attempts: int,
    max_refusals: int,
    now: float,
    step: bool,
    intent: bool,
    claim: bool,
) -> tuple[list[StartedItem], list[Batch]]:
    """What a slot writes, in one transaction, to start a batch: the items it sends, and batches formed.

    First the slot's previous batch is saved (``settled``), then the batch
    starts (or a confirmed one is taken back), then, with ``claim``, the next
    batch is formed to wait for a slot.
    """
    formed = []
    with store.write():
        if settled is not None:
            formed += store.settle_batch(
                settled[0].id, settled[1], max_attempts=max_attempts, max_refusals=max_refusals, now=now
            )
        if batch.resume:
            items = store.resume_batch(batch.id, max_attempts=max_attempts, now=now)
        else:
            items = store.start_batch(
                batch.id, lease=lease, max_attempts=max_attempts, now=now, step=step, intent=intent
            )
        if claim and items:  # (no items: the lease is another engine's; it forms the run's batches now)
            queued = store.claim_batch(run_id, max_items=limits.max_items, max_chars=limits.max_chars, now=now)
            formed += [queued] if queued is not None else []
    return items, formed


def _splits(batch: Batch, items: list[StartedItem]) -> bool:
    """Whether a batch can still be split to find the items at fault: halves once, then single items."""
    return batch.round < 2 and len(items) > 1


def _split(batch: Batch, ids: list[int]) -> list[list[int]]:
    if batch.round == 0:
        half = (len(ids) + 1) // 2
        return [ids[:half], ids[half:]]
    return [[item_id] for item_id in ids]


def _whole_answer_problem(parsed: protocol.ParsedBatch, answer: Answer) -> str | None:
    """Why the answer as a whole cannot be used, or None when some results belong to the batch."""
    problem = parsed.problem
    if problem is None and not parsed.results and not parsed.contradictions:
        problem = "no result carries an id of this batch"
    if problem is None or not answer.finish_reason or answer.finish_reason == "stop":
        return problem
    return f"{problem} (finish_reason: {answer.finish_reason})"


def _held_reason(control: Control) -> str:
    if control.paused:
        return "paused by a person"
    return f"breaker open ({control.reason})"
