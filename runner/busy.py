"""The engine's store steps: several slots' steps in one commit, and waiting out another process's write lock.

Group commit: a slot's step (a start, an answer received, a save) is not
written at once but put in line; the line is written on the event loop's
next turn, every step asked for meanwhile in one transaction, each step in a
part of its own (a savepoint: one that fails undoes only its own changes), and
one commit, one disk sync, for all. A step's caller goes on only once that
commit is made: a batch's call starts only once its own ``running`` is
durable, and an answer is judged only once it is saved ``received``. The
busier the loop, the more steps one commit carries; at two slots, it is
mostly one.

Another process may hold the run store's write lock for a while: adding
another run's input. While the engine works, its connection waits only
``WAIT_SECONDS`` for the lock, so that its event loop goes on with the calls
in flight (and their timeouts); a line that found the lock taken wrote
nothing (``StoreBusy``) and is tried again after a pause that grows to
``LONGEST_PAUSE``, and a step still not written ``PATIENCE_SECONDS`` after it
was asked for is a failed write like any other, and stops the run with its
breaker open.

The steps keep the order they were asked for, as they would in line for a
lock. (The engine's turn writes a heartbeat and forms batches on its own,
between two lines, when the store lets it, and tries again next turn when it
does not.) A step that lets a batch go upstream says what must ``still``
hold, asked just before the step is written: other slots may have stopped
the run while it waited. After a step of the group whose write failed (a
``StoreError``, which stops the run once its caller hears of it, after the
commit), no such step is written: never start work that cannot be recorded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, overload

from .errors import GroupLost, StoreBusy, StoreError

if TYPE_CHECKING:
    from .store.protocol import RunStore

T = TypeVar("T")

#: How long one try waits for the lock, holding up the event loop.
WAIT_SECONDS = 0.02
#: The pause between tries doubles from ``WAIT_SECONDS`` up to this.
LONGEST_PAUSE = 1.0
#: How long a step is tried again before the store counts as failed.
PATIENCE_SECONDS = 600.0


@dataclass
class _Step:
    """A step in line: what to write, what must still hold, when it is given up, and its caller's answer."""

    write: Callable[[], Any]
    still: Callable[[], bool] | None
    deadline: float
    done: asyncio.Future[Any] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class StoreSteps:
    """One engine's store steps, in the order asked for, written together; while the store is busy they wait.

    Time comes from the engine's clock (``now``, ``sleep``).
    """

    def __init__(self, store: RunStore, *, now: Callable[[], float], sleep: Callable[[float], Awaitable[None]]) -> None:
        self._store = store
        self._now = now
        self._sleep = sleep
        self._line: list[_Step] = []
        self._writer: asyncio.Task[None] | None = None

    @overload
    async def run(self, step: Callable[[], T]) -> T: ...

    @overload
    async def run(self, step: Callable[[], T], *, still: Callable[[], bool]) -> T | None: ...

    async def run(self, step: Callable[[], T], *, still: Callable[[], bool] | None = None) -> T | None:
        """``step()``, committed with the others in line; None when ``still()`` does not hold just before it."""
        waiting = _Step(step, still, self._now() + PATIENCE_SECONDS)
        self._line.append(waiting)
        if self._writer is None:
            self._writer = asyncio.create_task(self._write_line())
        result: T | None = await waiting.done
        return result

    async def _write_line(self) -> None:
        """Write what is in line, together, until none is left; a busy store is waited for."""
        pause = WAIT_SECONDS
        try:
            while self._line:
                steps = [step for step in self._line if not step.done.cancelled()]
                self._line.clear()
                try:
                    written = self._together(steps)
                except StoreBusy as exc:
                    self._line[:0] = self._give_up_late(steps, exc)
                    await self._sleep(pause)
                    pause = min(pause * 2, LONGEST_PAUSE)
                    continue
                except BaseException as exc:  # none of them was written
                    for number, step in enumerate(steps):
                        _answer(step, error=exc if number == 0 else _told_again(exc))
                    if not isinstance(exc, Exception):
                        raise
                    continue
                pause = WAIT_SECONDS
                for step, result, error in written:
                    _answer(step, result, error)
        finally:
            self._writer = None
            for step in self._line:  # (cancelled: the engine is ending)
                step.done.cancel()
            self._line.clear()

    def _together(self, steps: list[_Step]) -> list[tuple[_Step, Any, BaseException | None]]:
        """One transaction: each step that still may, in a part of its own; committed once, or raises."""
        written: list[tuple[_Step, Any, BaseException | None]] = []
        write_failed = False
        with self._store.write():
            for step in steps:
                try:
                    if step.still is not None and (write_failed or not step.still()):
                        written.append((step, None, None))
                        continue
                    with self._store.part():
                        result = step.write()
                    written.append((step, result, None))
                except GroupLost:
                    raise
                except Exception as exc:  # that step's own failure: the others are written
                    written.append((step, None, exc))
                    # A failed write stops the run once its caller hears of it, after this commit: no start
                    # after it in this group, since ``still()`` cannot know of it yet.
                    write_failed = write_failed or isinstance(exc, StoreError)
        return written

    def _give_up_late(self, steps: list[_Step], exc: StoreBusy) -> list[_Step]:
        """The steps that may wait longer for the busy store; the others fail, their patience spent."""
        now = self._now()
        for step in steps:
            if now >= step.deadline:
                _answer(step, error=StoreBusy(f"{exc}; tried again for {PATIENCE_SECONDS:g} s"))
        return [step for step in steps if now < step.deadline]


def _told_again(exc: BaseException) -> BaseException:
    """The group's failure for one more of its callers: a new error (its traceback its own), caused by the first."""
    try:
        again = type(exc)(*exc.args)
    except Exception:  # an error type that cannot be made again from its args
        again = StoreError(str(exc))
    again.__cause__ = exc
    return again


def _answer(step: _Step, result: Any = None, error: BaseException | None = None) -> None:
    if step.done.cancelled():
        return
    if error is not None:
        step.done.set_exception(error)
    else:
        step.done.set_result(result)
