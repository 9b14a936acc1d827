"""Submit and poll: the order that keeps a submitted task from being lost or paid twice.

1. the intent is committed (``Store.mark_intent``) before anything is uploaded;
2. the task is submitted with the batch's reference (``run:batch``);
3. a create whose answer was lost is looked for by that reference, never
   created again; found, it is adopted;
4. the task id is committed (``Store.save_task_id``) before waiting;
5. the task is polled with back-off until it ends.

After a crash, a batch whose task id was saved is polled again (``resume``);
one with an intent but no id is looked for first; a task the upstream no
longer knows fails its items (``NotFound``), never replaced by a new one.
When a task can be neither polled nor looked for (the upstream keeps
failing), ``TaskUnreachable`` says so, and the engine holds its items: a
batch that may be running upstream is never sent again on its own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from .busy import StoreSteps
from .errors import NotFound, SubmitUnknown, TaskUnreachable, TransportError, UpstreamError
from .jobs import RetryLimits
from .providers import TaskProvider, TaskResult
from .store import Store


T = TypeVar("T")


class Sleeper(Protocol):
    async def sleep(self, seconds: float) -> None: ...


#: Polls or look-ups failing in a row before a task counts as unreachable for now.
UNREACHABLE_AFTER = 8


class TaskDriver:
    """Drives one task provider for one run's batches."""

    def __init__(
        self,
        store: Store,
        provider: TaskProvider,
        *,
        retry: RetryLimits,
        clock: Sleeper,
        run_reference: str,
        steps: StoreSteps,
    ) -> None:
        self.store = store
        #: The engine's store steps: the commits below wait their turn with the slots' own.
        self.steps = steps
        self.provider = provider
        self.retry = retry
        self.clock = clock
        #: The run's unique reference (name and nonce): the prefix of its batches' references.
        self.run_reference = run_reference

    def ref(self, batch_id: int) -> str:
        """The batch's own reference, sent in the task's metadata and file name."""
        return f"{self.run_reference}:{batch_id}"

    async def submit_and_wait(self, batch_id: int, payloads: list[dict[str, Any]], *, now: float) -> TaskResult:
        await self.steps.run(lambda: self.store.mark_intent(batch_id, now=now))
        ref = self.ref(batch_id)
        try:
            task_id = await self.provider.submit(ref, payloads)
        except SubmitUnknown:
            found = await self._find(ref)
            if found is None:
                raise TransportError(f"creating batch {ref} failed and the upstream has no such batch") from None
            task_id = found
        await self.steps.run(lambda: self.store.save_task_id(batch_id, task_id))
        return await self.wait(task_id)

    async def resume(self, batch_id: int) -> TaskResult | None:
        """Poll a confirmed batch's saved task, or adopt the one it created; None if none was."""
        task_id = self.store.task_id(batch_id) or await self._find(self.ref(batch_id))
        if task_id is None:
            return None
        await self.steps.run(lambda: self.store.save_task_id(batch_id, task_id))
        return await self.wait(task_id)

    async def wait(self, task_id: str) -> TaskResult:
        """Poll until the task ends; only a task the upstream no longer knows ends it otherwise."""
        result = await self._patiently(f"polling task {task_id}", lambda: self.provider.poll(task_id), done=_ended)
        assert result is not None  # _ended let only a finished task through
        return result

    async def _find(self, ref: str) -> str | None:
        return await self._patiently(f"looking for the task of {ref}", lambda: self.provider.find(ref))

    async def _patiently(
        self, what: str, call: Callable[[], Awaitable[T]], done: Callable[[T], bool] = lambda _: True
    ) -> T:
        """Repeat a free call with back-off until ``done``; failing too often in a row is unreachable."""
        delay, failures = self.retry.backoff, 0
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
            await self.clock.sleep(delay)
            delay = min(delay * 2, self.retry.max_backoff)


def _ended(result: TaskResult | None) -> bool:
    return result is not None
