"""An engine as one of its run's workers: joining, setting the run up, beating, noticing the dead.

Several engines may work one run (``runner run NAME`` started again, on the
same store). The first sets the run up (prepares it, takes over what dead
workers left, revalidates and rewinds) while any other waits
(:func:`role`), then joins it with the same job (:func:`same_job`); then each
forms, starts and saves only its own batches, at most its fair share of the
run's concurrency at once (:func:`share_left`), and forms no more ahead of
their start than that share (:func:`share`): the items beyond it are left
for the others. Every few seconds each
renews its heartbeat and judges the others (:mod:`runner.liveness`): the
batches of one found dead are recovered by recovery's rules (a call that may
have been sent is held for a person, never sent again on its own), and its
saved answers validated.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .. import lease, liveness, revalidating
from ..errors import RunError, StoreBusy
from ..rules import fairshare
from ..store.leases import Role
from ..store.owners import Elsewhere
from . import saved, stages

if TYPE_CHECKING:
    from .loop import Engine

#: Seconds between two heartbeats of a worker.
HEARTBEAT_SECONDS = 2.0
TAKEN_OVER = "another worker found this one dead (its heartbeat was late) and took its batches over"


async def role(engine: Engine, joined: Role) -> Role:
    """Wait while another live worker sets the run up (``joined``: as the engine joined); then set it up, or join
    the workers at work."""
    while joined is Role.WAIT:
        await engine.clock.sleep(lease.SETUP_POLL_SECONDS)
        beat(engine)
        joined = lease.set_up(engine.store, engine.job.name, token=engine.token, now=engine.clock.now())
    return joined


def set_up(engine: Engine, prepare: Callable[[str], object] | None) -> None:
    """Prepare the run (if asked), take over what dead workers left, revalidate and rewind: the others wait."""
    store, name, now = engine.store, engine.job.name, engine.clock.now
    was = store.job(name) if name in store.run_names() else None
    if prepare is not None:
        prepare(engine.token)
    engine.run_id = store.run_id(name)
    store.recover(engine.run_id, now=now(), lives=lease.judged_at(now()))
    saved.validate_received(engine)
    if was is not None:
        engine.revalidated = revalidating.after_schema_change(store, engine.run_id, was, engine.job, now=now())
    engine.rewound = stages.rewind(store, engine.run_id, engine.job, engine.works, now=now())
    store.end_setup(name, token=engine.token)


def same_job(engine: Engine) -> None:
    """A worker that joins others works the run's job as they do: one whose job differs (an edited job file) is
    refused, before it touches an item."""
    if engine.store.job(engine.job.name) != engine.job:
        raise RunError(
            f"run {engine.job.name!r} is being run by other workers with a different job; join them with the same "
            "job, or stop them first to run the changed one"
        )


def beat(engine: Engine) -> None:
    """Every few seconds renew the heartbeat, and take over what the workers found dead left; a busy store puts it
    off to a later turn."""
    now = engine.clock.now()
    if now - engine.last_beat < HEARTBEAT_SECONDS:
        return
    try:
        alive = lease.beat(engine.store, engine.job.name, token=engine.token, now=now)
        if alive and engine.run_id and engine.store.recover(engine.run_id, now=now, lives=lease.judged_at(now)):
            saved.validate_received(engine)
    except StoreBusy:
        return
    if not alive:
        engine.request_stop(TAKEN_OVER)
    engine.last_beat = now
    engine.seat.sweep(now)


def still_one(engine: Engine) -> bool:
    """Whether the engine is still one of its run's workers (renewing its heartbeat); False once found dead."""
    engine.last_beat = engine.clock.now()
    return lease.beat(engine.store, engine.job.name, token=engine.token, now=engine.last_beat)


def others(engine: Engine) -> Elsewhere:
    """What the run's other workers hold, and how many of its workers live now: one read for one decision (in the
    caller's transaction, when there is one)."""
    return engine.store.elsewhere(engine.run_id, token=engine.token, since=liveness.fresh_since(engine.clock.now()))


def share(engine: Engine, elsewhere: Elsewhere) -> int:
    """The engine's fair share of the run's concurrency, beside the run's workers live as ``elsewhere`` read them:
    at most that many batches in flight, and as many formed ahead of their start."""
    return fairshare.share(engine.job.batch.concurrency, elsewhere.live)


def share_left(engine: Engine, elsewhere: Elsewhere, *, mine: int) -> int:
    """How many more batches the engine, ``mine`` of its own in flight, may start within its fair share of the run's
    concurrency, beside the run's workers live as ``elsewhere`` read them."""
    return fairshare.room(engine.job.batch.concurrency, workers=elsewhere.live, mine=mine)
