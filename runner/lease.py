"""The lease: one live engine per run, told apart from a dead one by its heartbeat.

An engine takes the lease (by run name) before it reads the input or touches
an item, beats every few seconds, and gives it back when it stops. A second
engine is refused while the first one lives (:mod:`runner.liveness`). An
engine that finds its lease taken
starts nothing more (``RunStore.start_batch`` checks the lease in the same
transaction).
"""

from __future__ import annotations

import os

from . import liveness
from .errors import RunError
from .liveness import LEASE_SECONDS
from .model import Holder
from .store.protocol import RunStore


def acquire(store: RunStore, run: str, *, token: str, now: float) -> None:
    """Hold ``run`` for the engine ``token``; refuse while another live engine holds it."""

    def refuse_a_live_holder(holder: Holder) -> None:
        if liveness.lives(holder, now):
            raise RunError(
                f"run {run!r} is being run by another engine (pid {holder.pid} on {holder.host}, heartbeat "
                f"{now - holder.heartbeat_at:.0f}s ago); stop it first, or wait {LEASE_SECONDS:.0f}s if it died"
            )

    store.take_lease(run, token=token, pid=os.getpid(), host=liveness.this_host(), now=now,
                     refuse=refuse_a_live_holder)


def beat(store: RunStore, run: str, *, token: str, now: float) -> bool:
    """Renew the lease; False when another engine has taken it."""
    return store.beat(run, token=token, now=now)


def release(store: RunStore, run: str, *, token: str) -> None:
    store.release_lease(run, token=token)


def alive(store: RunStore, run: str, *, now: float) -> bool:
    """Whether a live engine holds the run."""
    holder = store.holder(run)
    return holder is not None and liveness.lives(holder, now)
