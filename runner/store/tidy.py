"""No -wal or -shm left beside a store once the last connection to it closes.

SQLite checkpoints the -wal into the store and removes both files when the
last connection to a WAL database closes, but only a connection that can
write does so, and only if no other connection, in any process, has the
store open. A view's connection cannot write: after ``runner run`` and a TUI
(or a notebook's panel) the view is often the last to close, and the files
stayed. So this process counts the stores it holds open, and when it closes
its last one to a store, it opens and closes a connection that can write:
SQLite then tidies the files away, unless another process still has the
store open (then they stay, as they must, and its own last close tidies
them). Nothing is changed but where the committed pages live: a checkpoint,
no data. It is tried only where the store file and its folder may be written
(by this process, and by their modes: a file made read-only stays untouched
even for root); elsewhere the files stay, silently.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections import Counter
from pathlib import Path

_open: Counter[Path] = Counter()
_lock = threading.Lock()


def opened(path: Path) -> None:
    """This process opened a connection to the store at ``path``."""
    with _lock:
        _open[path.resolve()] += 1


def closed(path: Path) -> None:
    """This process closed a connection to the store at ``path``: its last one tidies the -wal and -shm away."""
    key = path.resolve()
    with _lock:
        _open[key] -= 1
        if _open[key] > 0:
            return
        del _open[key]
    tidy(key)


def tidy(path: Path) -> None:
    """Checkpoint the store's -wal into it and remove the -wal and -shm, unless another connection has it open."""
    if not (Path(f"{path}-wal").exists() or Path(f"{path}-shm").exists()):
        return
    if not (_may_write(path) and _may_write(path.parent)):
        return
    try:
        conn = sqlite3.connect(f"{path.as_uri()}?mode=rw", uri=True, timeout=0, isolation_level=None)
    except sqlite3.Error:  # a read-only file or folder: the files stay, as they did
        return
    try:
        # A read opens the -wal, so that closing checkpoints it and removes both files (when it is the last).
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error:  # another process holds a lock that a read waits for: it has the store open
        pass
    finally:
        conn.close()


def _may_write(path: Path) -> bool:
    """Whether this process may write ``path``, and its modes let someone: root may write what is read-only."""
    try:
        return os.access(path, os.W_OK) and bool(path.stat().st_mode & 0o222)
    except OSError:
        return False
