"""Waiting out another process's write lock without holding up the event loop.

Another process may hold the run store's write lock for a while: adding
another run's input takes tens of seconds for a million items. While the
engine works, its connection waits only ``WAIT_SECONDS`` for the lock, so
that its event loop goes on with the calls in flight (and their timeouts);
a step that found the lock taken wrote nothing (``StoreBusy``) and is tried
again after a pause that grows to ``LONGEST_PAUSE``, until
``PATIENCE_SECONDS`` have passed since it was asked for: then it is a failed
write like any other, and stops the run with its breaker open.

The slots' steps keep the order they were asked for: while one waits, the
later ones wait behind it (:class:`StoreSteps`), as they would in line for a
lock. (The engine's turn writes a heartbeat and forms batches on its own,
when the store lets it, and tries again next turn when it does not.) A step
that lets a batch go upstream says what must ``still`` hold each time it is
tried: other slots may have stopped the run while it waited.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar, overload

from .errors import StoreBusy

T = TypeVar("T")

#: How long one try waits for the lock, holding up the event loop.
WAIT_SECONDS = 0.02
#: The pause between tries doubles from ``WAIT_SECONDS`` up to this.
LONGEST_PAUSE = 1.0
#: How long a step is tried again before the store counts as failed.
PATIENCE_SECONDS = 600.0


class StoreSteps:
    """One engine's store steps, in the order asked for; while the store is busy they wait their turn.

    Time comes from the engine's clock (``now``, ``sleep``).
    """

    def __init__(self, *, now: Callable[[], float], sleep: Callable[[float], Awaitable[None]]) -> None:
        self._now = now
        self._sleep = sleep
        self._line = asyncio.Lock()

    @overload
    async def run(self, step: Callable[[], T]) -> T: ...

    @overload
    async def run(self, step: Callable[[], T], *, still: Callable[[], bool]) -> T | None: ...

    async def run(self, step: Callable[[], T], *, still: Callable[[], bool] | None = None) -> T | None:
        """``step()``, tried again while the store is busy; None when ``still()`` does not hold before a try.

        With a free line and a free store, the step runs at once, without
        giving the event loop a turn.
        """
        deadline = self._now() + PATIENCE_SECONDS
        pause = WAIT_SECONDS
        async with self._line:
            while True:
                if still is not None and not still():
                    return None
                try:
                    return step()
                except StoreBusy as exc:
                    if self._now() >= deadline:
                        raise StoreBusy(f"{exc}; tried again for {PATIENCE_SECONDS:g} s") from exc
                await self._sleep(pause)
                pause = min(pause * 2, LONGEST_PAUSE)
