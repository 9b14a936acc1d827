"""The lease: the workers of a run, each told apart from a dead one by its heartbeat.

A worker (an engine, or a prepare without one) joins its run (by name)
before it reads the input or touches an item, beats every few seconds, and
leaves when it stops. Several workers may work one run together; one of them
sets the run up (reads its input, takes over what dead workers left, rewinds
its stages) while the others wait (:meth:`~runner.store.leases.Leases.take_setup`).
A worker that others found dead (:mod:`runner.liveness`) is no longer one of
the run's and starts nothing more (``RunStore.start_batch`` checks the
batch's owner in the same transaction).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from . import liveness
from .errors import RunError
from .liveness import LEASE_SECONDS
from .model import Holder
from .store.leases import Role
from .store.protocol import RunStore

if TYPE_CHECKING:
    from .jobs import Job

#: Seconds between two looks at whether the worker setting the run up is done.
SETUP_POLL_SECONDS = 0.5


def join(store: RunStore, run: str, *, token: str, now: float) -> Role:
    """Make the worker ``token`` one of ``run``'s, beside any others; whether it sets the run up, waits for the one
    that does, or joins the others at work (:func:`setup_role`)."""
    return store.join_run(run, token=token, pid=os.getpid(), host=liveness.this_host(), now=now,
                          choose=lambda setting_up, workers: setup_role(token, setting_up, workers, now))


def set_up(store: RunStore, run: str, *, token: str, now: float) -> Role:
    """Whether the worker ``token`` sets the run up, waits for the one that does, or joins the others at work."""
    return store.take_setup(run, token=token,
                            choose=lambda setting_up, workers: setup_role(token, setting_up, workers, now))


def setup_role(token: str, setting_up: str | None, workers: list[Holder], now: float) -> Role:
    """What the worker ``token`` does first, given who sets the run up now (``setting_up``, a token; None: nobody)
    and the run's workers: wait while another live worker sets it up; join the live others once it is set up;
    else (alone, or the setup's worker died) set it up."""
    others = {worker.token for worker in workers if worker.token != token and liveness.lives(worker, now)}
    if setting_up in others:
        return Role.WAIT
    return Role.JOIN if setting_up is None and others else Role.SET_UP


def acquire(store: RunStore, run: str, *, token: str, now: float) -> None:
    """Hold ``run`` alone, to set it up with no engine; refuse while another live worker works it."""
    if join(store, run, token=token, now=now) is not Role.SET_UP:
        living = [worker for worker in store.workers(run) if worker.token != token and liveness.lives(worker, now)]
        release(store, run, token=token)
        first = living[0] if living else Holder(0, "?", now)
        raise RunError(
            f"run {run!r} is being run by another engine (pid {first.pid} on {first.host}, heartbeat "
            f"{now - first.heartbeat_at:.0f}s ago); stop it first, or wait {LEASE_SECONDS:.0f}s if it died"
        )


def beat(store: RunStore, run: str, *, token: str, now: float) -> bool:
    """Renew the worker's heartbeat; False when another worker found it dead and took its batches over."""
    return store.beat(run, token=token, now=now)


def release(store: RunStore, run: str, *, token: str) -> None:
    """The worker leaves the run (and gives back its setup, if it held it)."""
    store.leave_run(run, token=token)


def alive(store: RunStore, run: str, *, now: float) -> bool:
    """Whether a live worker works the run."""
    return any(liveness.lives(worker, now) for worker in store.workers(run))


def judged_at(now: float) -> Callable[[Holder], bool]:
    """Whether a worker lives, judged at ``now``."""
    return lambda worker: liveness.lives(worker, now)


def job_once_made(
    store: RunStore, run: str, *, now: Callable[[], float], sleep: Callable[[float], object],
    waiting: Callable[[Holder], object],
) -> Job:
    """The job of the run named ``run``. A run not made yet that a live worker joined (reading its input, on this
    machine or another, before the run has its first items) is waited for, ``waiting`` told of that worker once;
    with no such worker, refused as no run of that name."""
    told = False
    while run not in store.run_names():
        living = [worker for worker in store.workers(run) if liveness.lives(worker, now())]
        if not living:
            break
        if not told:
            waiting(living[0])
            told = True
        sleep(SETUP_POLL_SECONDS)
    return store.job(run)
