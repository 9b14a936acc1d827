"""The TUI's connections to the run store, on a thread of its own.

A sqlite3 connection belongs to the thread that opened it. So the TUI keeps
one thread, and the screens' workers hand their reads and a person's
commands to it, one at a time. Reads go through one read-only ``Store``,
opened once: it never writes, so it works on a store this process cannot
write and never waits for an engine writing the same file in another
process (WAL). A command opens the store for writing just for itself: where
the store cannot be written, that one command fails and says why.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from runner.errors import StoreError
from runner.location import located, named
from runner.store import Store

T = TypeVar("T")


class StoreThread:
    """Runs calls over a ``Store(path, read_only=True)``, opened on first use, on its own thread."""

    def __init__(self, path: str | Path) -> None:
        self.path = located(path)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="runner-tui-store")
        self._store: Store | None = None  # touched only on the executor's thread

    def call(self, work: Callable[[Store], T], *, write: bool = False) -> T:
        """Run ``work`` with the store and return its result; blocks the calling (worker) thread.

        ``write``: ``work`` writes (a person's command), so it gets the store
        opened for writing. A store that cannot be opened (no file yet: no
        run has started) raises the core's ``StoreError`` here, and is tried
        again on the next call.
        """
        try:
            future = self._executor.submit(self._write if write else self._read, work)
        except RuntimeError as exc:  # closed: the app is on its way out
            raise StoreError(f"{named(self.path)}: the TUI closed its connection") from exc
        return future.result()

    def close(self) -> None:
        """Close the connection on its own thread and stop the thread."""
        self._executor.submit(self._close).result()
        self._executor.shutdown()

    def _read(self, work: Callable[[Store], T]) -> T:
        if self._store is None:
            self._store = Store(self.path, read_only=True)
        return work(self._store)

    def _write(self, work: Callable[[Store], T]) -> T:
        with Store(self.path, create=False) as store:
            return work(store)

    def _close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
