"""The engine's turn loop: the lease, the turns that form and start batches, idling, stopping, tidying up.

Every turn beats the run's lease, reads the run's control row from the store and asks the gate
(:func:`runner.rules.gate.gate`) how many batches may start now; those are formed (``claim_batch``) and each given a
slot of its own (:class:`~runner.engine.slot.Slot`), which asks the gate again just before it starts. With nothing
in flight, the engine waits for what the store says is still to come (a waiting item's time, a person's resume), or
stops: progress and the end of the run are read from the store, never from the in-memory line of formed batches.

A job's stages (:mod:`.stages`) share the run's slots: batches are formed per stage and group, later stages first,
each worked with its stage's provider, check and limits; a re-run first checks again, with no call, the results of
a stage whose only change is its output schema (:mod:`runner.revalidating`), then sends back the completed items
whose stage changed (``stages.rewind``).

An engine is one of its run's workers (:mod:`.worker`): several may work one run, each its own batches, the gate
counting the batches all of them have in flight. The one that sets the run up takes over what dead workers left
(``RunStore.recover``, then the saved outputs validated locally: :mod:`runner.rules.triage` gives the order), and
every worker does as it beats; on stop it gives back its batches formed but not sent, and leaves the run. A
failed store write stops the run with its breaker open (kind ``store``). Why a run stopped is a failure kind beside
its reason (``Outcome.stop_kind``, the breaker's kind when it was already open): the exit code comes from the kind,
never from the reason's words. Time comes from an injected clock.
"""

from __future__ import annotations

import asyncio
import logging
import random
import secrets
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Mapping

from .. import busy, lease, python_stages
from ..rules.breaker import Control
from ..clock import Clock, SystemClock
from ..errors import StoreBusy, StoreError
from ..jobs import Job
from ..providers import Provider, TaskProvider
from ..rules import gate
from ..rules.judge import Verdict
from ..rules.streaks import STOPS
from ..rules.revalidating import StagePlan
from ..model import Batch, BreakerState, FailureKind, Settlement
from ..store.leases import Role
from ..store.protocol import RunStore
from . import joins, saved, sharing, stages, worker
from .outcome import Outcome
from .slot import Slot

log = logging.getLogger(__name__)
POLL_SECONDS = 0.5


class Engine:
    """Runs one job's run over a store until nothing is left that it may do alone.

    With ``wait_for_person`` it stays while the run is paused, its breaker
    open or items held for a confirmation, obeying resume, step and confirm,
    written to the store from anywhere; without, it returns (the CLI's exit 4).
    A refused key still ends the run (its key is read once, at the start), and
    so do a Ctrl-C, a failed store and a bug.
    """

    def __init__(self, store: RunStore, job: Job, provider: Provider | TaskProvider | None, *,
                 clock: Clock | None = None, wait_for_person: bool = False, rng: random.Random | None = None,
                 stage_providers: Mapping[str, Provider | TaskProvider] | None = None) -> None:
        self.store, self.job, self.job_json = store, job, job.to_json()  # the JSON: the budget guard's, made once
        self.clock = clock or SystemClock()
        #: Each stage's provider, its check, and (once the run starts) its caller or its task driver;
        #: ``provider`` serves every stage not in ``stage_providers``; a python stage given neither is not worked
        #: here: its items wait there for its handler (``python_stages``).
        given = {s.name: (stage_providers or {}).get(s.name, provider) for s in job.stages}
        self.works = stages.works_of(job, {name: given for name, given in given.items() if given is not None})
        #: The python stages given no handler here: their items are not tried.
        self.unworked = [name for name in python_stages.names(job) if name not in self.works]
        #: The stages to form batches of, later stages first.
        self.claims = stages.claims(self.works, job)
        self.wait_for_person = wait_for_person
        self.rng = rng or random.Random()
        self.run_id = 0
        self.token = secrets.token_hex(8)
        self.stopped_for: str | None = None
        self.stop_kind: FailureKind | None = None
        #: The stop is one a person lifts through the store (resume, step, confirm): waiting, it is waited out.
        self._liftable = False
        #: When the worker last renewed its heartbeat.
        self.last_beat = 0.0
        #: Batches formed (or confirmed by a person) that wait for a slot, the next to start first.
        self.formed: deque[Batch] = deque()
        #: Batches of reused results (``[cache] reuse``), received with no call: for ``saved.settle_reused``.
        self.reused: deque[Batch] = deque()
        #: The slots at work: each a task running batches one after another.
        self._in_flight: set[asyncio.Task[None]] = set()
        #: Slots at work (each counted once the gate let it start its first batch) and not yet ended.
        self.holding = 0
        self._resumed: set[int] = set()
        #: After a rate limit, no batch starts before this time (the upstream asked us to wait).
        self.quiet_until = 0.0
        #: The slots' store steps, in order, waiting their turn while another process holds the store.
        self.steps = busy.StoreSteps(store, now=self.clock.now, sleep=self.clock.sleep)
        #: The last turn could not form the batches it wanted: another process held the store.
        self._forming_held_up = False
        #: Why the run stopped on a store failure, while its open breaker could not be saved yet.
        self._breaker_unsaved: str | None = None
        #: The worker's calls refused in a row for a rate limit: its back-off's length when the upstream gives no time
        #: (the quiet time itself is the run's). The run's streaks are on its row (``runner.rules.streaks``).
        self.rate_limited = 0
        #: What the run sent on as it started: items sent back to a stage, items at a stage gone sent on,
        #: sub-items sent back to a stage inside their fan-out.
        self.rewound = stages.Rewound({}, {}, {})
        #: The python stages given no handler here at which the run stopped, its items left there.
        self.needs_handler: tuple[str, ...] = ()
        #: What the run revalidated as it started: stages whose only change was their output schema.
        self.revalidated: dict[str, StagePlan] = {}
        #: The run's seat in its shared queue (``[provider] queue``), taken as it starts; a run in none is alone.
        self.seat: sharing.Alone = sharing.Alone()

    async def run(self, prepare: Callable[[str], object] | None = None) -> Outcome:
        """Join the run's workers, set the run up unless they did (prepare it if asked, recover what dead workers
        left), and work beside them.

        ``prepare`` adds the input's items (:func:`runner.preparing.prepare`),
        given the worker's token. Returns when nothing is left that the
        engine may do alone; bad input raises before any item changes.
        """
        name = self.job.name
        cut_short = False
        joined = lease.join(self.store, name, token=self.token, now=self.clock.now())
        self.last_beat = self.clock.now()
        try:
            if await worker.role(self, joined) is Role.SET_UP:
                worker.set_up(self, prepare)
            else:
                worker.same_job(self)
            self.run_id = self.store.run_id(name)
            self.seat = sharing.seat(self.store, self.job, self.run_id, self.token)
            for work in self.works.values():
                stages.begin(work, self.store, self.run_id, clock=self.clock, steps=self.steps)
            with self.store.waiting_at_most(busy.WAIT_SECONDS):
                await self._work()
        except asyncio.CancelledError:
            cut_short = True
            raise
        finally:
            await self._tidy(name, cut_short=cut_short)
        return Outcome(self.store.status(name, now=self.clock.now()), self.stopped_for, self.stop_kind, *self.rewound,
                       needs_handler=self.needs_handler, revalidated=self.revalidated)

    async def _tidy(self, name: str, *, cut_short: bool) -> None:
        """Save the open breaker a store failure could not, give back unsent batches and the lease.

        An engine cancelled (``cut_short``: a second Ctrl-C) first recovers its
        own run as the next engine would on start: the calls it cut short are
        held for confirmation now, not when the run is next started. Each
        waits for a busy store as any step does; a store that failed may
        refuse all of it.
        """
        try:
            unsaved = self._breaker_unsaved
            if unsaved is not None:
                await self.steps.run(lambda: self.store.open_breaker(self.run_id, FailureKind.STORE, unsaved))
                self.stopped_for, self._breaker_unsaved = unsaved, None
            if self.run_id:
                gives_back = self.store.recover if cut_short else self.store.release_queued
                await self.steps.run(lambda: gives_back(self.run_id, lease=(name, self.token), now=self.clock.now()))
            await self.steps.run(self.seat.leave)
            await self.steps.run(lambda: lease.release(self.store, name, token=self.token))
        except StoreError:
            if self.stop_kind is not FailureKind.STORE:
                raise

    def request_stop(self, reason: str) -> None:
        """Start no more batches; those in flight finish, then ``run`` returns, waiting for a person or not.

        A stop a verdict made keeps its reason and kind (what a person must fix); it is only no longer waited out.
        """
        if self.stopped_for is None:
            self.stopped_for = reason
        self._liftable = False

    def stop_for_person(self, reason: str, kind: FailureKind | None = None) -> None:
        """Start no more batches: the store now holds the run for a person (an open breaker, held items).

        Without ``wait_for_person`` the run returns once those in flight
        finish; with it, the engine waits until a person lifts the hold.
        """
        # A stop already asked for (a Ctrl-C, say) stays a stop; its reason gives way, as a verdict's always did.
        self._liftable = kind is not FailureKind.AUTH and (self.stopped_for is None or self._liftable)
        self.stopped_for, self.stop_kind = reason, kind

    def heed(self, verdict: Verdict) -> None:
        """Keep what a verdict says of the run: the rate limits in a row, the quiet time a rate limit asked, a stop."""
        self.rate_limited = verdict.rate_limited
        self.quiet_until = max(self.quiet_until, verdict.quiet_until)
        if verdict.stop is not None:
            self.stop_for_person(verdict.stop.reason, verdict.stop.kind)

    def heed_streaks(self) -> None:
        """After a save that moved the run's streaks: the stop they called for (this worker's save, or another's),
        read back from the breaker the store opened, with its reason."""
        control = self.control()
        if control.breaker is BreakerState.OPEN and control.kind in STOPS and control.reason is not None:
            self.stop_for_person(control.reason, control.kind)

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
            worker.beat(self)
            stages.take_decisions(self.store, self.run_id, self.job, now=self.clock.now())
            joins.join(self.store, self.run_id, self.job, now=self.clock.now())  # parents whose sub-items settled
            saved.settle_reused(self)
            control = self.control()
            self._forming_held_up = self._may_start() and self._start(control)
            return control
        except StoreError as exc:
            self.store_failed(exc)
            return None

    def control(self) -> Control:
        """The run's controls joined with its queue's, read now; the run's and the queue's quiet time heeded (a 429
        another worker of the run, or another run of the queue, saw)."""
        control, quiet_until = self.seat.joined(self.store.control(self.run_id))
        self.quiet_until = max(self.quiet_until, quiet_until, self.store.quiet_until(self.run_id))
        return control

    def _may_start(self) -> bool:
        """Nothing stopped the run, and no rate limit holds new starts back."""
        return self.stopped_for is None and not gate.quiet(quiet_until=self.quiet_until, now=self.clock.now())

    def _start(self, control: Control) -> bool:
        """Put confirmed batches first in line, form what the free slots want, and give each a new slot.

        Each slot begins on a later step of the loop and asks the gate again
        then (``Slot.may_go_on``): other slots' outcomes may have changed the
        run meanwhile. A start while the run is held spends a step a person
        allowed. Returns whether forming was held up by a busy store.
        """
        self._take_resumable()
        elsewhere = worker.others(self)
        in_flight = len(self._in_flight) + elsewhere.running  # all workers'
        free = min(gate.gate(control, concurrency=self.job.batch.concurrency, in_flight=in_flight,
                             quiet_until=self.quiet_until, now=self.clock.now()),
                   worker.share_left(self, elsewhere, mine=len(self._in_flight)))
        held_up = len(self.formed) < free and not self._form(lookahead=free)
        room = min(free, self.seat.room(mine=in_flight, now=self.clock.now()))
        self.seat.tell(held=self.holding, waiting=max(min(free, len(self.formed)) - room, 0))
        for _ in range(min(room, len(self.formed))):
            batch = self.formed.popleft()
            self._in_flight.add(asyncio.create_task(Slot(self).run(batch, step=gate.held(control))))
        return held_up

    async def _idle_or_stop(self, control: Control) -> bool:
        try:
            return await self._idle(control)
        except StoreError as exc:
            self.store_failed(exc)
            return False

    async def _idle(self, control: Control) -> bool:
        """Nothing in flight: wait for what the store says is still to come (a person's act, waiting), or stop."""
        if self.stopped_for is not None and not self._waits_out_stop(control):
            return False
        if self.reused:  # the next turn settles them
            return True
        if self.store.unfinished(self.run_id) == 0:
            return False
        if gate.held(control):
            return await self._wait_for_person(gate.held_reason(control), control.kind)
        if self.seat.waiting:  # batches formed wait for a slot in the queue: another run's end frees one
            await self.clock.sleep(POLL_SECONDS)
            return True
        due = self.store.next_due(self.run_id, skip=self.unworked)
        if due is None and not self.formed and self._forming_held_up:  # wait for the store, then start it
            formed = await self.steps.run(self._claim)
            self.take_formed([formed] if formed is not None else [])
            self._forming_held_up = False
            return True
        if due is None and not self.formed and worker.others(self).held:
            await self.clock.sleep(POLL_SECONDS)  # other workers hold batches: stay, to notice if one dies
            return True
        if due is None and not self.formed:  # only items held for a person, or at a python stage given no handler
            return await self._left()
        due = max(due or 0.0, self.quiet_until)
        await self.clock.sleep(min(max(due - self.clock.now(), 0.0), POLL_SECONDS))
        return True

    async def _left(self) -> bool:
        """Only items no call of this engine can move are left: wait for a person's act, or stop (``stages.left``)."""
        left = stages.left(self.store, self.job, self.works, now=self.clock.now())
        if left.for_person:
            return await self._wait_for_person(left.reason, None)
        self.stopped_for, self.stop_kind, self.needs_handler = left.reason, None, left.unhandled
        return False

    async def _wait_for_person(self, reason: str, kind: FailureKind | None) -> bool:
        """Held for a person: waiting for one, a poll's wait for their act (resume, step, confirm); else stop."""
        if not self.wait_for_person:
            self.stopped_for, self.stop_kind = reason, kind
            return False
        await self.clock.sleep(POLL_SECONDS)
        return True

    def _waits_out_stop(self, control: Control) -> bool:
        """Waiting for a person, a stop the store holds (an open breaker) is not the end: the engine waits for its lift.

        A stop the store does not hold the run for (a task that cannot be
        polled holds only its own items) ends the run: going on would pay for
        more batches that the same sick upstream cannot give back.
        """
        if not (self.wait_for_person and self._liftable and gate.held(control)):
            return False
        self.stopped_for, self.stop_kind, self._liftable = None, None, False
        return True

    def _take_resumable(self) -> None:
        """Put the batches a person confirmed first in line."""
        for confirmed in self.store.resumable(self.run_id):
            if self.job.staged and confirmed.stage not in self.works:  # a python stage given no handler here
                continue
            if confirmed.id not in self._resumed and self.store.take_batch(confirmed.id, token=self.token):
                self._resumed.add(confirmed.id)  # (polled by this worker alone)
                self.formed.appendleft(confirmed)

    def _form(self, *, lookahead: int) -> bool:
        """Keep up to ``lookahead`` batches queued for the next free slots; False if the store was busy."""
        while len(self.formed) < lookahead:
            try:
                batch = self._claim()
            except StoreBusy:
                return False
            if batch is None:
                return True
            self.take_formed([batch])
            saved.settle_reused(self)
        return True

    def take_formed(self, formed: Iterable[Batch]) -> None:
        """Batches formed, in line for a slot; those of reused results kept apart, for ``saved.settle_reused``."""
        for batch in formed:
            (self.reused if batch.reused else self.formed).append(batch)

    def _claim(self) -> Batch | None:
        return self.store.claim_first(self.run_id, self.claims, now=self.clock.now(), owner=self.token)

    def work(self, stage: str | None) -> stages.StageWork:
        """How a batch of ``stage`` is worked. A job without ``[[stage]]`` has one stage, whatever its items are
        labelled (a run made by a job file, then continued with a Python handler, kind ``python``)."""
        return self.works[stage] if self.job.staged and stage is not None else next(iter(self.works.values()))

    def save(self, batch_id: int, settlement: Settlement) -> list[Batch]:
        """Save how a batch ended, in one transaction; the batches a split formed."""
        return self.store.settle_batch(batch_id, settlement, now=self.clock.now())

    def engine_failed(self, batch: Batch, exc: Exception) -> None:
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

    def store_failed(self, exc: StoreError) -> None:
        """Never run work that cannot be recorded: open the breaker (reason store) and stop starting."""
        reason = f"store: {exc}"
        self.stopped_for, self.stop_kind = reason, FailureKind.STORE
        try:
            self.store.open_breaker(self.run_id, FailureKind.STORE, reason)
        except StoreError as again:  # tried again when the engine stops (``_tidy``), waiting as any write does
            self.stopped_for = f"{reason}; the open breaker could not be saved: {again}"
            self._breaker_unsaved = reason
