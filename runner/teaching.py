"""What the teaching notebooks need beside the API: a folder of their own, and a crash on purpose.

``scratch("quickstart")`` is the folder ``runs/quickstart`` (under the
working folder, or under ``$RUNNER_NOTEBOOK_RUNS`` when it is set), emptied:
each execution starts from nothing and leaves nothing in the system's temp
folder, and the store stays there to be looked at afterwards
(``runner tui --db runs/quickstart/runs.db``).

``crash_mid_call(run, sim)`` continues a run as ``runner run NAME`` in a
child process and kills it with SIGKILL while the simulator holds that
process's first call, as a crash would: the store says ``running`` for the
call's items, and no answer ever comes back.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .notebook import Run
    from .sim import Simulator

#: Where the notebooks' folders go instead of ``runs/`` (the tests point it at their own temporary folder).
FOLDER_ENV = "RUNNER_NOTEBOOK_RUNS"


def scratch(name: str) -> Path:
    """The folder ``name`` for a notebook's run store, made empty."""
    folder = Path(os.environ.get(FOLDER_ENV) or "runs") / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


@dataclasses.dataclass(frozen=True)
class Crash:
    """How the killed engine ended, and the keys of the call it was making."""

    returncode: int
    keys: list[str]


def crash_mid_call(run: Run, sim: Simulator, *, timeout: float = 60.0) -> Crash:
    """Run ``run`` in a ``runner run`` process; SIGKILL it while ``sim`` holds its first call."""
    started = threading.Event()
    first = threading.Lock()
    keys: list[str] = []
    engine: subprocess.Popen[bytes] | None = None

    def kill_during(ids: list[str]) -> None:  # the simulator calls it for each chat call, before answering
        if not first.acquire(blocking=False):
            return
        keys.extend(ids)
        if started.wait(timeout) and engine is not None:
            os.kill(engine.pid, signal.SIGKILL)

    before, sim.on_request = sim.on_request, kill_during
    try:
        engine = subprocess.Popen(
            [sys.executable, "-m", "runner", "run", run.name, "--db", str(run.db)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        started.set()
        try:
            returncode = engine.wait(timeout)
        except subprocess.TimeoutExpired:
            engine.kill()
            engine.wait()
            raise
    finally:
        sim.on_request = before
    return Crash(returncode, keys)
