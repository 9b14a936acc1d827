"""The engine's writes, on a thread of their own and committed together.

A commit with ``synchronous=FULL`` waits for the disk (about 0.3 ms here), as
long as the rest of a batch's bookkeeping; made in the event loop, every
commit would hold up the other slot's call. The engine hands each write (a
:class:`Store` method and its arguments) to the :class:`Writer`, whose thread
has its own connection to the same file. The writes waiting when the thread
comes round run in one transaction, each in a savepoint of its own (a write
that fails undoes itself alone), and one commit makes them all durable: the
group commit of databases. Only then is each caller answered, so a write's
result is never seen before it is on disk: ``running`` is committed before
the call, ``received`` before validation, as the brief's invariants ask.

A failure of the transaction itself (``BEGIN``, ``COMMIT``, or a write that
aborts it) fails every write of the group with a :class:`StoreError`; the
engine opens the breaker, as for any store failure. Once any write has failed
with a :class:`StoreError`, the writes handed over with :meth:`Writer.start`
(those that let a batch go upstream) are refused: no batch starts after a
write that could not be recorded, whichever slot asked. Should the thread
itself die, every write waiting or to come fails instead of hanging.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

from .errors import StoreError
from .store import Store

P = ParamSpec("P")
T = TypeVar("T")


@dataclass
class _Write:
    apply: Callable[[Store], Any]
    future: asyncio.Future[Any]
    loop: asyncio.AbstractEventLoop
    #: A write that lets a batch go upstream: refused once a write has failed.
    starts: bool = False
    ok: bool = False
    value: Any = None

    def fail(self, failure: BaseException) -> None:
        self.value, self.ok = failure, False

    def answer(self) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
            self.loop.call_soon_threadsafe(_settle_future, self.future, self.ok, self.value)


class Writer:
    """A thread that commits the engine's writes to the store at ``path``, together when they wait together."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._queue: queue.SimpleQueue[_Write | None] = queue.SimpleQueue()
        self._opened = threading.Event()
        #: The first failure of a write (or of the thread): later starts are refused with it.
        self._failure: StoreError | None = None
        self._dead = False
        self._thread = threading.Thread(target=self._serve, name=f"runner-writer {path.name}", daemon=True)
        self._thread.start()
        self._opened.wait()
        if self._dead and self._failure is not None:
            raise self._failure

    def __call__(
        self, method: Callable[Concatenate[Store, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> asyncio.Future[T]:
        """Hand over ``method(store, *args, **kwargs)`` at once; await its result, there once committed."""
        return self._hand_over(lambda store: method(store, *args, **kwargs), starts=False)

    def start(
        self, method: Callable[Concatenate[Store, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> asyncio.Future[T]:
        """Like calling the writer, for a write that lets a batch go upstream: refused after a failed write."""
        return self._hand_over(lambda store: method(store, *args, **kwargs), starts=True)

    def _hand_over(self, apply: Callable[[Store], Any], *, starts: bool) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        write = _Write(apply, loop.create_future(), loop, starts)
        if self._dead:
            write.fail(self._failure or StoreError(f"{self.path}: the store's writer stopped"))
            write.answer()
        else:
            self._queue.put(write)
        return write.future

    def close(self) -> None:
        """Commit what was handed over, then stop the thread and close its connection."""
        self._queue.put(None)
        self._thread.join()

    def _serve(self) -> None:
        group: list[_Write | None] = []
        try:
            store = Store(self.path, create=False)
        except BaseException as exc:
            self._die(exc, group)
            return
        finally:
            self._opened.set()
        try:
            with store:
                while True:
                    group = [self._queue.get()]
                    while not self._queue.empty():  # whatever else waits joins this commit
                        group.append(self._queue.get())
                    writes = [write for write in group if write is not None]
                    if writes:
                        self._commit(store, writes)
                    if None in group:
                        return
        except BaseException as exc:  # a bug here must not leave anyone waiting for ever
            self._die(exc, group)

    def _die(self, exc: BaseException, group: list[_Write | None]) -> None:
        """Fail the writes of the group in hand and every one waiting; later ones fail at once."""
        if self._failure is None:
            self._failure = exc if isinstance(exc, StoreError) else StoreError(
                f"{self.path}: the store's writer stopped ({type(exc).__name__}: {exc})"
            )
        self._dead = True
        while not self._queue.empty():
            group.append(self._queue.get())
        for write in group:
            if write is not None:
                write.fail(self._failure)
                write.answer()

    def _commit(self, store: Store, writes: list[_Write]) -> None:
        """Apply the writes in one transaction, then answer each caller."""
        conn = store.conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            for write in writes:
                if write.starts and self._failure is not None:
                    write.fail(self._failure)
                    continue
                _apply(store, write)
                if not conn.in_transaction:
                    raise StoreError(f"{store.path}: store write failed (the transaction was aborted: {write.value})")
                if isinstance(write.value, StoreError) and self._failure is None:
                    self._failure = write.value
            conn.execute("COMMIT")
        except (sqlite3.Error, StoreError) as exc:
            with contextlib.suppress(sqlite3.Error):  # the store is failing already; each caller hears of it below
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
            failure = exc if isinstance(exc, StoreError) else StoreError(f"{store.path}: store write failed ({exc})")
            self._failure = self._failure or failure
            for write in writes:
                write.fail(failure)
        for write in writes:
            write.answer()


def _apply(store: Store, write: _Write) -> None:
    """One write in a savepoint of its own: a write that fails undoes itself alone."""
    conn = store.conn
    conn.execute("SAVEPOINT write")
    try:
        write.value, write.ok = write.apply(store), True
        conn.execute("RELEASE write")
    except Exception as exc:  # noqa: BLE001 - handed to the caller that asked for this write
        write.fail(exc)
        if conn.in_transaction:
            conn.execute("ROLLBACK TO write")
            conn.execute("RELEASE write")


def _settle_future(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if future.done():  # cancelled by its caller, or already failed by a dying thread
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)
