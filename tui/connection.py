"""The TUI's one connection to the run store, on a thread of its own.

A sqlite3 connection belongs to the thread that opened it, and opening a
``Store`` checks its schema in a short write transaction. So the TUI opens the
store once, on a thread it keeps, and the screens' workers hand their reads
and a person's commands to that thread, one at a time. The engine writing the
same file in another process is never locked out: these are reads, plus the
short transactions of the commands (WAL, with a busy timeout).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from runner.errors import StoreError
from runner.store import Store

T = TypeVar("T")


class StoreThread:
    """Runs calls over one ``Store(path, create=False)``, opened on first use, on its own thread."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="runner-tui-store")
        self._store: Store | None = None  # touched only on the executor's thread

    def call(self, work: Callable[[Store], T]) -> T:
        """Run ``work`` with the store and return its result; blocks the calling (worker) thread.

        A store that cannot be opened yet (no file: no run has started) raises
        the core's ``StoreError`` here, and is tried again on the next call.
        """
        try:
            future = self._executor.submit(self._run, work)
        except RuntimeError as exc:  # closed: the app is on its way out
            raise StoreError(f"{self.path}: the TUI closed its connection") from exc
        return future.result()

    def close(self) -> None:
        """Close the connection on its own thread and stop the thread."""
        self._executor.submit(self._close).result()
        self._executor.shutdown()

    def _run(self, work: Callable[[Store], T]) -> T:
        if self._store is None:
            self._store = Store(self.path, create=False)
        return work(self._store)

    def _close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
