"""Waiting out another process's write lock without holding up the event loop.

Another process may hold the run store's write lock for a while: adding
another run's input takes tens of seconds for a million items. While the
engine works, its connection waits only ``WAIT_SECONDS`` for the lock, so
that its event loop goes on with the calls in flight (and their timeouts);
a step that found the lock taken wrote nothing (``StoreBusy``) and is tried
again, until ``PATIENCE_SECONDS`` have passed: then it is a failed write like
any other, and opens the breaker.

The engine's steps keep the order they were asked for: while one waits, the
later ones wait behind it (:class:`StoreSteps`), as they would in line for a
lock. A step that lets a batch go upstream says what must ``still`` hold each
time it is tried: other slots may have stopped the run while it waited.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar, overload

from .errors import StoreBusy

T = TypeVar("T")

#: How long one try waits for the lock, holding up the event loop.
WAIT_SECONDS = 0.05
#: How long a step is tried again before the store counts as failed.
PATIENCE_SECONDS = 600.0


class StoreSteps:
    """One engine's store steps, in the order asked for; while the store is busy they wait their turn."""

    def __init__(self) -> None:
        self._line = asyncio.Lock()

    @property
    def waiting(self) -> bool:
        """A step is waiting for the store (a write asked for now would jump the line)."""
        return self._line.locked()

    @overload
    async def run(self, step: Callable[[], T]) -> T: ...

    @overload
    async def run(self, step: Callable[[], T], *, still: Callable[[], bool]) -> T | None: ...

    async def run(self, step: Callable[[], T], *, still: Callable[[], bool] | None = None) -> T | None:
        """``step()``, tried again while the store is busy; None when ``still()`` does not hold before a try.

        With a free line and a free store, the step runs at once, without
        giving the event loop a turn.
        """
        async with self._line:
            deadline = time.monotonic() + PATIENCE_SECONDS
            while True:
                if still is not None and not still():
                    return None
                try:
                    return step()
                except StoreBusy as exc:
                    if time.monotonic() >= deadline:
                        raise StoreBusy(f"{exc}; tried again for {PATIENCE_SECONDS:g} s") from exc
                await asyncio.sleep(WAIT_SECONDS)
