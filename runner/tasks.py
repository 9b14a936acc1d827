"""Submit and poll: the order that keeps a submitted task from being lost or paid twice.

1. the intent is committed (``RunStore.mark_intent``) before anything is uploaded;
2. the input is uploaded, then the moment the create is sent is committed
   (``RunStore.mark_create_sent``) and the task created with the batch's
   reference (``run:batch``);
3. a create whose answer was lost is looked for by that reference, never
   created again; found, it is adopted. Not found, "nothing was created" is
   concluded only once the lost create can no longer land: ``lands_within``
   seconds (the provider's timeout plus its ``create_margin``) after it was
   sent, the upstream is asked once more;
4. the task id is committed (``RunStore.save_task_id``) before waiting (and a provider
   that ``KeepsTasks`` told which task is kept);
5. every task carrying the reference besides the one kept (a create sent
   twice, by a proxy that retries on its own) is cancelled at once and
   recorded as a duplicate that may have billed what it ran
   (``RunStore.record_duplicate``); the upstream is asked again when the task
   ends, for one that landed late;
6. the task is polled until it ends, its end noticed within max(10 s, 10 %
   of the time waited so far) (:mod:`runner.rules.polls`); a task whose
   every item a person cancelled meanwhile is cancelled upstream, and polled
   on until it ends, for the lines it ran before (billed). A batch whose
   every item a person cancelled before its create is never created.

After a crash, a batch whose task id was saved is polled again (``resume``);
one whose create was sent but whose id was not is looked for as in 3; a
task the upstream no longer knows fails its items (``NotFound``), never
replaced by a new one. When a task can be neither polled nor looked for (the
upstream keeps failing), ``TaskUnreachable`` says so, and the engine holds
its items: a batch that may be running upstream is never sent again on its
own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from .busy import StoreSteps
from .clock import Clock
from .errors import NotFound, SubmitUnknown, TaskUnreachable, TransportError, UpstreamError
from .jobs import RetryLimits
from .protocol import BatchItems
from .providers import ExpiringTasks, KeepsTasks, TaskProvider, TaskResult
from .rules import polls
from .rules.judge import NotCreated
from .store.protocol import RunStore

T = TypeVar("T")

#: Polls or look-ups failing in a row before a task counts as unreachable for now.
UNREACHABLE_AFTER = 8
#: A batch whose every item a person cancelled before its task was created: none is.
NOT_SENT = NotCreated("every item was cancelled before its task was created upstream: none was, nothing was sent")


class TaskDriver:
    """Drives one task provider for one run's batches."""

    def __init__(
        self,
        store: RunStore,
        provider: TaskProvider,
        *,
        retry: RetryLimits,
        clock: Clock,
        run_reference: str,
        steps: StoreSteps,
        lands_within: float,
    ) -> None:
        self.store = store
        #: The engine's store steps: the commits below wait their turn with the slots' own.
        self.steps = steps
        self.provider = provider
        self.retry = retry
        self.clock = clock
        #: The run's unique reference (name and nonce): the prefix of its batches' references.
        self.run_reference = run_reference
        #: Seconds after a create was sent within which it may still land upstream, its answer lost.
        self.lands_within = lands_within

    def ref(self, batch_id: int) -> str:
        """The batch's own reference, sent in the task's metadata and file name."""
        return f"{self.run_reference}:{batch_id}"

    async def submit_and_wait(self, batch_id: int, items: BatchItems) -> TaskResult | NotCreated:
        """Submit the batch and wait for its task; ``items`` are let go once uploaded (nothing big waits).

        A create whose answer was lost and that made nothing, once it can no
        longer land, is a transport failure: sending it again cannot charge twice.
        A batch whose every item a person cancelled before its create is
        neither uploaded nor created (checked before each): :data:`NOT_SENT`.
        """
        await self.steps.run(lambda: self.store.mark_intent(batch_id, now=self.clock.now()))
        ref = self.ref(batch_id)
        if self.store.all_cancelled(batch_id):
            return NOT_SENT
        uploaded = await self.provider.upload(ref, items)
        del items
        if self.store.all_cancelled(batch_id):  # (a large upload takes its time)
            return NOT_SENT
        lands_by = self.clock.now() + self.lands_within
        await self.steps.run(lambda: self.store.mark_create_sent(batch_id, lands_by=lands_by))
        try:
            task_id = await self.provider.create(ref, uploaded)
        except SubmitUnknown as lost:
            found = await self._adopt(batch_id)
            if found is None and lost.cause is not None:
                raise lost.cause from lost  # nothing was created: the create's own failure stands
            if found is None:
                raise TransportError(
                    f"{lost.message}; the upstream has no batch {ref}, and one sent then can no longer land: "
                    "nothing was created, it is sent again (cannot charge twice)"
                ) from lost
            task_id = found
        return await self._keep(batch_id, task_id)

    async def resume(self, batch_id: int) -> TaskResult | None:
        """Poll a confirmed batch's saved task, or adopt the one it created; None if none was."""
        task_id = self.store.task_id(batch_id) or await self._adopt(batch_id)
        return None if task_id is None else await self._keep(batch_id, task_id)

    async def wait(self, batch_id: int, task_id: str) -> TaskResult:
        """Poll until the task ends; only a task the upstream no longer knows ends it otherwise.

        Before each poll, a task whose every item a person cancelled is
        cancelled upstream, once (``cancel_upstream``); it is polled on until
        it ends, for the lines that ran before the cancel (billed).
        """
        asked = False

        async def poll() -> TaskResult | None:
            nonlocal asked
            if not asked and self.store.all_cancelled(batch_id):
                asked = True
                await self.cancel_upstream(batch_id, task_id)
            return await self.provider.poll(task_id)

        result = await self._patiently(f"polling task {task_id}", poll, done=_ended)
        assert result is not None  # _ended let only a finished task through
        return result

    async def cancel_upstream(self, batch_id: int, task_id: str) -> None:
        """Ask the upstream to cancel the task of a batch a person cancelled, and say so in its history."""
        try:
            accepted = await self.provider.cancel(task_id)
        except UpstreamError:
            accepted = False
        message = (f"cancelled upstream ({task_id}): the lines it ran before are billed and kept"
                   if accepted else f"the upstream refused to cancel {task_id}: it runs to its end, billed")
        await self.steps.run(lambda: self.store.record_upstream_cancel(
            batch_id, accepted=accepted, message=message, now=self.clock.now()))

    async def _keep(self, batch_id: int, task_id: str) -> TaskResult:
        """Save the task's id, cancel any other task of the batch's reference, and wait for it."""
        expires = self.provider.results_expire(task_id) if isinstance(self.provider, ExpiringTasks) else None
        await self.steps.run(lambda: self.store.save_task_id(batch_id, task_id, results_expire=expires))
        if isinstance(self.provider, KeepsTasks):
            self.provider.kept(self.ref(batch_id), task_id)
        await self._cancel_others(batch_id, task_id)
        result = await self.wait(batch_id, task_id)
        await self._cancel_others(batch_id, task_id)
        return result

    async def _adopt(self, batch_id: int) -> str | None:
        """The task a lost create made, the oldest if several; None once it can no longer land."""
        ref = self.ref(batch_id)
        deadline = self.store.lands_by(batch_id) or 0.0
        delay = self.retry.backoff
        while not (found := await self._find(ref)):
            left = deadline - self.clock.now()
            if left <= 0:
                return None
            await self.clock.sleep(min(delay, left))  # it may still land: look again, the last time at the deadline
            delay = min(delay * 2, self.retry.max_backoff)
        return found[0]

    async def _cancel_others(self, batch_id: int, kept: str) -> None:
        """Cancel every other task carrying the batch's reference; each may have billed what it ran."""
        ref = self.ref(batch_id)
        try:
            others = [task for task in await self._find(ref) if task != kept]
        except TaskUnreachable:  # the list is down: the task is polled all the same, and the list asked again
            return
        for other in others:
            try:
                cancelled = await self.provider.cancel(other)
            except UpstreamError:
                cancelled = False
            outcome = "cancelled it" if cancelled else "could not cancel it"
            message = (f"a second upstream batch {other} carries this batch's reference {ref} (a create sent "
                       f"twice); runner {outcome}; it may have billed the lines it ran")
            await self.steps.run(lambda: self.store.record_duplicate(
                batch_id, other, cancelled=cancelled, message=message, now=self.clock.now()))

    async def _find(self, ref: str) -> list[str]:
        """The tasks carrying ``ref``; a list the upstream does not serve (404) is unreachable, never "none"."""
        what = f"looking for the task of {ref}"
        try:
            return await self._patiently(what, lambda: self.provider.find(ref))
        except NotFound as exc:
            raise TaskUnreachable(f"{what}: the upstream's list of tasks answered {exc.message}") from exc

    async def _patiently(
        self, what: str, call: Callable[[], Awaitable[T]], done: Callable[[T], bool] = lambda _: True
    ) -> T:
        """Repeat a free call until ``done``, paced by :func:`runner.rules.polls.pause`; failing too often in a row
        is unreachable."""
        began, failures = self.clock.now(), 0
        while True:
            try:
                result = await call()
                failures = 0
                if done(result):
                    return result
            except NotFound:
                raise
            except UpstreamError as exc:
                failures += 1
                if failures >= UNREACHABLE_AFTER:
                    raise TaskUnreachable(f"{what} failed {failures} times in a row, last: {exc.message}") from exc
            await self.clock.sleep(polls.pause(self.clock.now() - began, failures=failures, limits=self.retry))


def _ended(result: TaskResult | None) -> bool:
    return result is not None
