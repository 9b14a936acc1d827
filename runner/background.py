"""Runs executing in the background of this process: a task on the running loop, or a thread without one.

:func:`launch` starts one and registers it by (resolved store path, run name),
so that a notebook cell run again finds the live engine (:func:`live`)
instead of starting a second one; the :class:`Background` handle is awaited
for the run's outcome, or asked to stop. It leaves the registry when its
engine returns.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Awaitable, Callable, Generator
from typing import Any

from .engine import Engine, Outcome
from .errors import RunError
from .location import StoreLocation, named

log = logging.getLogger(__name__)

#: Engines this process runs in the background, by (resolved store path, run name).
LIVE: dict[tuple[str, str], Background] = {}


class Background:
    """A run executing in the background: a task on the running loop, or a thread without one.

    ``await background`` waits for its :class:`~runner.engine.Outcome`;
    :meth:`stop` asks its engine to start no more batches.
    """

    def __init__(self, name: str, db: StoreLocation) -> None:
        self.name = name
        self.db = db
        self.engine: Engine | None = None
        self._future: concurrent.futures.Future[Outcome] = concurrent.futures.Future()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop_reason: str | None = None

    def done(self) -> bool:
        """Whether the engine has returned (or failed)."""
        return self._future.done()

    def result(self) -> Outcome:
        """The outcome of a finished run; raises what the run raised, or RunError while it runs."""
        if not self._future.done():
            raise RunError(f"run {self.name!r} is still running in the background")
        return self._future.result()

    def stop(self, reason: str = "stopped from the notebook") -> None:
        """Start no more batches; those in flight finish, then the run returns (outcome 4)."""
        self._stop_reason = self._stop_reason or reason
        if self.engine is not None and self._loop is not None and not self.done():
            self._loop.call_soon_threadsafe(self.engine.request_stop, reason)

    def __await__(self) -> Generator[Any, None, Outcome]:
        return asyncio.wrap_future(self._future).__await__()

    def __repr__(self) -> str:
        if not self.done():
            state = "running"
        elif self._future.exception() is not None:
            state = f"failed: {self._future.exception()}"
        else:
            state = f"ended, exit code {self._future.result().exit_code}"
        return f"<Background run {self.name!r} in {named(self.db)}: {state}>"

    def attach(self, engine: Engine) -> None:
        """Take the engine that runs this run, as it starts (its stop may already be asked)."""
        self.engine = engine
        self._loop = asyncio.get_running_loop()
        if self._stop_reason is not None:  # stopped before its engine existed
            engine.request_stop(self._stop_reason)

    def _settle(self, outcome: Outcome | None, error: BaseException | None) -> None:
        if LIVE.get((str(self.db), self.name)) is self:
            del LIVE[(str(self.db), self.name)]
        if error is not None:
            # Nobody may await a background run: say it stopped, where the notebook shows stderr.
            log.error("background run %r stopped: %s", self.name, error)
            self._future.set_exception(error)
        else:
            assert outcome is not None
            self._future.set_result(outcome)


def live(db: StoreLocation, name: str) -> Background | None:
    """The live background engine of run ``name`` of the store at ``db`` in this process, if any."""
    return LIVE.get((str(db), name))


def launch(db: StoreLocation, name: str, execute: Callable[[Background], Awaitable[Outcome]]) -> Background:
    """Run ``execute(handle)`` in the background and return its handle at once: on the running loop, else a thread."""
    handle = Background(name, db)
    LIVE[(str(db), name)] = handle

    async def settled() -> None:
        try:
            outcome = await execute(handle)
        except BaseException as exc:  # handed to whoever awaits the handle
            handle._settle(None, exc)
            if not isinstance(exc, Exception):
                raise
        else:
            handle._settle(outcome, None)

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        threading.Thread(target=asyncio.run, args=(settled(),), name=f"runner {name}", daemon=True).start()
    else:
        handle._task = loop.create_task(settled(), name=f"runner {name}")
    return handle
