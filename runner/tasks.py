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
"""

from __future__ import annotations

from typing import Any, Protocol

from .errors import SubmitUnknown, TransportError
from .jobs import RetryLimits
from .providers import TaskProvider, TaskResult
from .store import Store


class Sleeper(Protocol):
    async def sleep(self, seconds: float) -> None: ...


class TaskDriver:
    """Drives one task provider for one run's batches."""

    def __init__(self, store: Store, provider: TaskProvider, *, run: str, retry: RetryLimits, clock: Sleeper) -> None:
        self.store = store
        self.provider = provider
        self.run = run
        self.retry = retry
        self.clock = clock

    def ref(self, batch_id: int) -> str:
        """The batch's own reference, sent in the task's metadata and file name."""
        return f"{self.run}:{batch_id}"

    async def submit_and_wait(self, batch_id: int, payloads: list[dict[str, Any]], *, now: float) -> TaskResult:
        self.store.mark_intent(batch_id, now=now)
        ref = self.ref(batch_id)
        try:
            task_id = await self.provider.submit(ref, payloads)
        except SubmitUnknown:
            found = await self.provider.find(ref)
            if found is None:
                raise TransportError(f"creating batch {ref} failed and the upstream has no such batch") from None
            task_id = found
        self.store.save_task_id(batch_id, task_id)
        return await self.wait(task_id)

    async def resume(self, batch_id: int) -> TaskResult | None:
        """Poll a confirmed batch's saved task, or adopt the one it created; None if none was."""
        task_id = self.store.task_id(batch_id) or await self.provider.find(self.ref(batch_id))
        if task_id is None:
            return None
        self.store.save_task_id(batch_id, task_id)
        return await self.wait(task_id)

    async def wait(self, task_id: str) -> TaskResult:
        """Poll until the task ends; polling is free, so transport trouble only slows it down."""
        delay = self.retry.backoff
        while True:
            try:
                result = await self.provider.poll(task_id)
            except TransportError:
                result = None
            if result is not None:
                return result
            await self.clock.sleep(delay)
            delay = min(delay * 2, self.retry.max_backoff)
