"""One slot: a batch's life, from its start to its save, then the next batch in line.

1. start (the store's ``advance``): the slot's previous batch saved, this one's
   items ``running`` with attempts + 1, the next batch formed, in one commit
   made *before* the call; the gate (:func:`runner.rules.gate.may_go_on`) and
   the budget (:func:`runner.budgets.guard`) are asked just before it, and
   again after a wait for a busy store: a batch that would pass the budget
   does not start, and the run stops with its breaker open (kind ``budget``);
2. call, with bounded request retries for transport trouble, or submit and
   poll (:class:`~runner.tasks.TaskDriver`);
3. receive: the answer committed as ``received`` before anything reads it;
4. judge (:func:`runner.rules.judge.judge`): completed, re-attempted later,
   split or failed, the breaker's move, the move of the run's streaks, and
   whether the run must stop;
5. save: an answered call's verdict in the commit that starts the slot's
   next batch (when the gate and the worker's fair share of the run's
   concurrency let one start now), any other alone; so is a verdict whose
   streak may stop the run (:func:`runner.rules.streaks.may_stop`): the store
   decides the stop from the run's streaks, as all its workers moved them,
   and the engine heeds it before any start.

A slot is held for all of 1 to 5 (at most ``concurrency`` are), and released
on success and failure alike.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from .. import budgets, pricing, protocol, usage
from . import stages, worker
from ..errors import StoreError, TaskUnreachable, TransportError, UpstreamError
from ..providers import Answer, Provider, TaskResult
from ..rules import charges, gate, streaks
from ..rules.judge import Answered, Finished, Lines, NotCreated, Verdict, judge, whole_answer_problem
from ..model import Batch, BreakerState, FailureKind, Settlement, StartedItem

if TYPE_CHECKING:
    from .loop import Engine

log = logging.getLogger(__name__)


class Slot:
    """One of an engine's slots: batches one after another, each from its start to its save."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        #: The breaker was closed when the slot's batch started (the last read before its start): a failure of
        #: its call is then no second one in a row after another that failed meanwhile (``rules.breaker``).
        self.started_closed = False
        #: The gate let this slot start its first batch: it counts among the engine's slots at work.
        self.begun = False
        #: Why the slot's batch would pass the run's budget: the breaker it opens, once the start is given up.
        self.over_budget: str | None = None
        #: The worker's fair share of the run's concurrency, as read just before the start: its start forms the next
        #: batch only while fewer are formed ahead.
        self.share = engine.job.batch.concurrency

    async def run(self, batch: Batch, *, step: bool) -> None:
        """Work ``batch``, then the next in line while there is one and the gate lets it start.

        ``step``: the first batch spends a step a person allowed. A batch
        that got its answer is saved in the transaction that starts the next:
        between two calls the slot waits for two commits (the answer, then
        save and start), not three.
        """
        engine = self.engine
        settled: tuple[Batch, Settlement] | None = None
        try:
            while True:
                settlement = await self._one(batch, step=step, settled=settled)
                if settlement is None:
                    return
                settled = (batch, settlement)
                if streaks.may_stop(settlement.streak):  # saved alone: a stop it calls for is heeded before a start
                    await self._save(*settled)
                    settled = None
                if not engine.formed:  # (batches a person confirmed are put first in line by every turn)
                    if settled is not None:
                        await self._save(*settled)
                    await self._restate_budget(batch)  # the batch just saved stands in for the next
                    return
                batch, step = engine.formed.popleft(), False
        except StoreError as exc:
            engine.store_failed(exc)
        except Exception as exc:  # a bug must not cancel the other batches in flight
            engine.engine_failed(batch, exc)
        finally:
            engine.holding -= self.begun

    def may_go_on(self, batch: Batch, *, step: bool) -> bool:
        """Whether this slot may start a batch: the run and its controls as they are now.

        Read just before each start (and again after a wait for a busy store):
        since the turn that gave the slot its first batch, or since the slot's
        last call, another slot's outcome may have stopped the run (a refused
        key), opened the breaker or left it probing (one slot), and a person
        may have paused it; in a shared queue, another run may have taken
        the last slot, set a quiet time or moved the queue's breaker. Asked just before the start is written (its
        commit may carry other slots' starts): a slot the gate lets begin
        counts among those at work from then on, for the next slot asked.
        A slot beyond this worker's fair share of the run's concurrency (another
        worker joined) ends here, its place left to the others; the share read
        here bounds the batches the start forms ahead.

        Then the budget: what is spent, in flight (the starts written before
        this one count) and unknown, plus this batch's estimate. A step a
        person allowed, and a confirmed batch's poll (nothing sent again), are
        not held to it.
        """
        engine = self.engine
        self.over_budget = None
        if engine.stopped_for is not None:
            return False
        control = engine.control()
        self.started_closed = control.breaker is BreakerState.CLOSED
        now = engine.clock.now()
        # The run's batches in flight: this engine's other slots, and the other workers' batches running (read in
        # the start's transaction: none of theirs can start meanwhile).
        mine = engine.holding - self.begun
        elsewhere = worker.others(engine)
        in_flight = mine + elsewhere.running
        self.share = worker.share(engine, elsewhere)
        go = gate.may_go_on(
            control, step=step, concurrency=engine.job.batch.concurrency,
            in_flight=in_flight, quiet_until=engine.quiet_until, now=now,
        ) and engine.seat.room(mine=in_flight, now=now) > 0 and worker.share_left(engine, elsewhere, mine=mine) > 0
        if go and not (step or batch.resume):
            self.over_budget = budgets.guard(engine.store, engine.run_id, engine.job_json, batch)
            if self.over_budget is not None:
                engine.stop_for_person(self.over_budget, FailureKind.BUDGET)
                return False
        if go and not self.begun:
            self.begun = True
            engine.holding += 1
            engine.seat.tell(held=engine.holding)  # in the start's own transaction: no other run takes the slot
        return go

    async def _one(self, batch: Batch, *, step: bool, settled: tuple[Batch, Settlement] | None) -> Settlement | None:
        """Start a batch (saving the slot's previous one), call or submit it, receive and judge it.

        Returns the settlement of an answered call, for the slot's next start
        to save; any other outcome is saved here, and None returned. None too
        when the batch does not start.
        """
        items = await self._start(batch, step=step, settled=settled)
        if not items:
            return None
        work = self.engine.work(batch.stage)
        tasks = work.tasks
        if tasks is not None:
            # The items' texts go with the upload alone: a batch waiting hours upstream keeps none of them here
            # (but a pipeline's record and results, which the boundary reads).
            submitted = tasks.resume(batch.id) if batch.resume else tasks.submit_and_wait(
                batch.id, stages.sent(self.engine.job, work.stage, items))
            items = items if self.engine.job.staged else [item._replace(input="", results="{}") for item in items]
            settlement = await self._submit(submitted, batch, items)
            if settlement is not None:
                await self._save(batch, settlement)
            return None
        assert work.caller is not None
        try:
            answer = await self._call(work.caller, batch, stages.sent(self.engine.job, work.stage, items))
        except UpstreamError as exc:
            await self._save(batch, self._judge(batch, items, exc))
            return None
        return self._judge(batch, items, await self._receive(batch, items, answer))

    async def _start(
        self, batch: Batch, *, step: bool, settled: tuple[Batch, Settlement] | None
    ) -> list[StartedItem] | None:
        """The items of the batch, started; None (the batch back in line) when the gate says no more now.

        No items when another engine took the run over (this one stops), or
        when a person cancelled every item of the batch while it waited for
        its slot (it ends with none; the slot's next turn forms another).
        """
        engine = self.engine
        work = engine.work(batch.stage)
        begun = await engine.steps.run(
            lambda: engine.store.advance(
                engine.run_id, batch, settled=settled, lease=(engine.job.name, engine.token),
                max_attempts=work.stage.retry.max_attempts, now=engine.clock.now(), step=step,
                intent=work.tasks is None,
                claims=engine.claims if len(engine.formed) < self.share else (),
            ),
            still=lambda: self.may_go_on(batch, step=step),
        )
        if begun is None:
            engine.formed.appendleft(batch)
            if settled is not None:
                await self._save(*settled)
            if self.over_budget is not None:
                reason = self.over_budget
                await engine.steps.run(lambda: engine.store.open_breaker(engine.run_id, FailureKind.BUDGET, reason))
            else:
                await self._restate_budget(batch)
            return None
        items, formed = begun
        engine.take_formed(formed)
        if not items:
            await self._save(batch, Settlement())
            if not await engine.steps.run(lambda: worker.still_one(engine)):
                engine.request_stop(worker.TAKEN_OVER)
        return items

    async def _restate_budget(self, batch: Batch) -> None:
        """A run held at its budget gets its reason written afresh, with the figures now and ``batch``'s estimate
        as the next batch's: a stop's reason then never shows what was in flight before, nor the spent of
        before a step (the first stop's is written by :meth:`_start`)."""
        engine = self.engine
        control = engine.control()
        if control.breaker is not BreakerState.OPEN or control.kind is not FailureKind.BUDGET:
            return
        reason = budgets.restated(engine.store, engine.run_id, engine.job_json, batch)
        if reason is None or reason == control.reason:
            return
        if engine.stop_kind is FailureKind.BUDGET:
            engine.stop_for_person(reason, FailureKind.BUDGET)
        await engine.steps.run(lambda: engine.store.open_breaker(engine.run_id, FailureKind.BUDGET, reason))

    async def _call(self, caller: Provider, batch: Batch, sent: protocol.BatchItems) -> Answer:
        """The upstream call, with bounded request retries (with jitter) for transport trouble."""
        engine = self.engine
        limits = engine.work(batch.stage).stage.retry
        for retry in range(limits.request_retries + 1):
            try:
                return await caller.call(sent)
            except TransportError as exc:
                if exc.maybe_billed:
                    await engine.steps.run(lambda: engine.store.count_maybe_paid(batch.id))
                wait = exc.retry_after
                if retry == limits.request_retries or (wait is not None and wait > limits.max_backoff):
                    raise
                await engine.steps.run(lambda: engine.store.count_request_retry(batch.id))
                delay = min(limits.backoff * 2**retry, limits.max_backoff) * (0.5 + engine.rng.random())
                await engine.clock.sleep(wait if wait is not None else delay)
        raise AssertionError("unreachable")

    async def _submit(
        self, submitted: Awaitable[TaskResult | NotCreated | None], batch: Batch, items: list[StartedItem]
    ) -> Settlement | None:
        """Await the submit (or, confirmed after a crash, the poll again) and judge; None when its items are held."""
        engine = self.engine
        try:
            result = await submitted
        except TaskUnreachable as exc:
            await engine.steps.run(lambda: engine.store.hold(batch.id, now=engine.clock.now()))
            engine.stop_for_person(f"{exc.message}; its items are held (runner confirm polls it again)")
            return None
        except UpstreamError as exc:
            return self._judge(batch, items, exc)
        if result is None or isinstance(result, NotCreated):  # nothing reached the upstream: no sickness to count
            return self._judge(batch, items, result or NotCreated())
        if result.failure is not None:
            return self._judge(batch, items, result.failure)
        return self._judge(batch, items, await self._receive_lines(batch, items, result))

    async def _receive(self, batch: Batch, items: list[StartedItem], answer: Answer) -> Answered:
        """Commit the call's answer, each item with its usable result, as received; the answer as read."""
        engine = self.engine
        answered, outputs = read_answer(batch.id, answer, items)
        cost = self._charged(batch, answer.usage)
        await engine.steps.run(lambda: engine.store.record_answer(
            batch.id, outputs, raw=answer.raw, now=engine.clock.now(), usage=answer.usage, cost=cost))
        return answered

    async def _receive_lines(self, batch: Batch, items: list[StartedItem], result: TaskResult) -> Lines:
        """Commit a finished task's answered lines as received (each was billed); the lines as read."""
        engine = self.engine
        answered = [item for item in items if item.key in result.answers]
        results: dict[int, Any] = {}
        outputs: dict[int, str] = {}
        for item in answered:
            line, encoded = read_answer(batch.id, result.answers[item.key], [item])
            results.update(line.results)
            outputs.update(encoded)
        raw = protocol.encode({item.key: result.answers[item.key].raw for item in answered})
        used = usage.total(result.answers[item.key].usage for item in answered)
        cost = self._charged(batch, used)
        await engine.steps.run(lambda: engine.store.record_answer(
            batch.id, outputs, raw=raw, answered=[item.id for item in answered], now=engine.clock.now(),
            usage=used, cost=cost))
        return Lines(results, answered=result.answers.keys(), errors=result.errors)

    def _charged(self, batch: Batch, used: usage.Usage | None) -> tuple[float, float] | None:
        """What a call of the batch that reported ``used`` cost at its stage's price (None: unknown)."""
        provider = self.engine.work(batch.stage).stage.provider
        return pricing.charged(pricing.price_of(provider.price, provider.model), used, kind=provider.kind)

    def _judge(self, batch: Batch, items: list[StartedItem], finished: Finished) -> Settlement:
        """The verdict on the batch, heeded by the engine; what the store is to save."""
        engine = self.engine
        work = engine.work(batch.stage)
        verdict = judge(
            batch.round, items, finished, check=work.check.problem, rate_limited=engine.rate_limited,
            limits=work.stage.retry, now=engine.clock.now(), jitter=engine.rng.random(),
            started_closed=self.started_closed,
        )
        engine.heed(verdict)
        results = finished.results if isinstance(finished, Answered | Lines) else {}
        settlement = settlement_of(verdict)
        settlement.not_billed = set(charges.not_billed(items, finished))
        return stages.boundary(engine.job, work, items, settlement, results)

    async def _save(self, batch: Batch, settlement: Settlement) -> None:
        """Save the slot's last batch alone. Its call is over: from now on the slot no longer counts as at work
        (its save is written before any start asked for after it)."""
        engine = self.engine
        engine.holding -= self.begun
        self.begun = False

        def save() -> list[Batch]:
            split = engine.save(batch.id, settlement)
            engine.seat.tell(held=engine.holding)  # the slot freed for the queue's other runs with the save
            return split

        engine.formed.extend(await engine.steps.run(save))
        if streaks.may_stop(settlement.streak):
            engine.heed_streaks()


def read_answer(batch_id: int, answer: Answer, items: list[StartedItem]) -> tuple[Answered, dict[int, str]]:
    """The answer split by item, as the judge reads it, and each usable result as it is saved.

    Never raises: an answer this engine cannot read (a bug, whatever its
    shape) is an unusable answer, judged as one, and saved all the same.
    """
    try:
        parsed = protocol.parse_results(answer.content, (item.key for item in items))
        problem = answer.problem or whole_answer_problem(parsed, answer.finish_reason)
        results = {item.id: parsed.results[item.key] for item in items if item.key in parsed.results}
        outputs = {item_id: protocol.encode(result) for item_id, result in results.items()}
    except Exception as exc:
        log.exception("batch %s: the answer could not be read", batch_id)
        return Answered({}, f"the answer could not be read ({type(exc).__name__}: {exc})"), {}
    return Answered(results, problem, parsed.contradictions), outputs


def settlement_of(verdict: Verdict) -> Settlement:
    """The store's form of a verdict: what it applies in one transaction."""
    return Settlement(
        completed=list(verdict.completed), retry=dict(verdict.retry), failed=dict(verdict.failed),
        gave_up=dict(verdict.gave_up), split=[list(ids) for ids in verdict.split], maybe_paid=set(verdict.maybe_paid),
        refused=set(verdict.refused), not_before=verdict.not_before, breaker=verdict.breaker,
        quiet_until=verdict.quiet_until, streak=verdict.streak,
    )
