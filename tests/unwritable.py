"""Stores that a process cannot write, made for real: a read-only file or folder, a full disk, a held lock.

File modes do not stop root, and the tests may run as root. So a reader in a
subprocess runs without root's power to write whatever it likes
(``reader_argv``), and a folder that must stop this very process is, for
root, a small tmpfs of its own: remounted read-only it stops root too, and
filled up it is a full disk (``Folder``). Other users get chmod, and no full
disk. (A lock another process holds is a scene: ``scenes.write_lock_held``.)
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from scenes import dead_engine
from support import make_job, posts

from runner import breaker, runs
from runner.model import FailureKind
from runner.store import Settlement, Store

#: What lets root write a file or folder whatever its modes say.
ROOTS_WRITE_RIGHTS = ("dac_override", "dac_read_search", "fowner")
NOW = 1_800_000_000.0
LEASE = "gone"


def reader_argv(*argv: str) -> list[str]:
    """``argv`` run with no right to write what the files' modes forbid: as root, without those capabilities."""
    if os.geteuid() != 0:
        return list(argv)
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("as root, a reader bound by file modes needs setpriv (util-linux)")
    dropped = ",".join(f"-{cap}" for cap in ROOTS_WRITE_RIGHTS)
    return [setpriv, f"--bounding-set={dropped}", f"--inh-caps={dropped}", *argv]


class Folder:
    """A folder that can be made read-only, writable again, or full, for this very process.

    For root it is a small tmpfs mounted there; for another user a plain
    folder, made read-only by chmod (a full disk then needs root: skipped).
    """

    SIZE = "4m"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.mounted = os.geteuid() == 0
        path.mkdir()
        if self.mounted:
            mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.SIZE}", "tmpfs", str(path)],
                                     capture_output=True, text=True)
            if mounted.returncode:
                pytest.skip(f"as root, a folder that stops root needs a tmpfs of its own: {mounted.stderr.strip()}")

    def read_only(self) -> None:
        if self.mounted:
            self._remount("ro")
        else:
            for file in self.path.iterdir():
                file.chmod(0o444)
            self.path.chmod(0o555)

    def writable(self) -> None:
        if self.mounted:
            self._remount("rw")
        else:
            self.path.chmod(0o755)
            for file in self.path.iterdir():
                file.chmod(0o644)

    def fill(self) -> None:
        """Leave no free byte on the folder's file system."""
        if not self.mounted:
            pytest.skip("a full disk needs root, to mount a small tmpfs")
        with open(self.path / "filler", "wb", buffering=0) as filler:
            try:
                while filler.write(b"\0" * 65_536):
                    pass
            except OSError:
                pass  # ENOSPC: full, which is the point

    def remove(self) -> None:
        if self.mounted:
            subprocess.run(["umount", str(self.path)], check=True)
        else:
            self.writable()

    def _remount(self, mode: str) -> None:
        subprocess.run(["mount", "-o", f"remount,{mode}", str(self.path)], check=True)


def small_store(folder: Path, *, records: list[dict[str, Any]] | None = None, message: str = "no label") -> Path:
    """``folder/runs.db``, closed: a run ``posts`` of three items, one completed, one failed (with ``message``),
    one pending; the items are ``records`` if given (three, by ``id`` and ``month``), else ``posts(3)``."""
    db = folder / "runs.db"
    job = make_job(folder, "http://127.0.0.1:9/v1", records or posts(3), name="posts", max_items=2)
    with Store(db) as store:
        run_id = runs.prepare(store, job, now=NOW)
        with dead_engine(store, "posts", LEASE) as lease:
            batch = store.claim_batch(run_id, max_items=2, max_chars=10_000, now=NOW, owner=LEASE)
            assert batch is not None
            done, bad = store.start_batch(batch.id, lease=lease, max_attempts=3, now=NOW)
            store.record_answer(batch.id, {done.id: json.dumps({"id": done.key}), bad.id: "{}"}, raw="{}", now=NOW)
            settlement = Settlement(completed=[done.id], failed={bad.id: (FailureKind.ITEM_INVALID, message, True)},
                                    breaker=breaker.after_success)
            store.settle_batch(batch.id, settlement, now=NOW)
    return db


#: What ``small_store`` holds, as ``runner status posts --json`` counts it.
SMALL_COUNTS = {"pending": 1, "queued": 0, "waiting": 0, "running": 0, "received": 0, "completed": 1, "failed": 1}


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
