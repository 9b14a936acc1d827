"""The workers of a run as a person sees them: where each runs, how long since its heartbeat, what it holds.

A worker holds the batches it formed that are queued or running (their
items as formed); one that died holds them until a live worker notices
and takes them over (``runner.engine.worker``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from .. import liveness

if TYPE_CHECKING:
    from .leases import Leases

#: What each worker of run ``:run`` holds: its batches queued or running, and their items.
HELD = """
SELECT owner, count(*) AS batches, coalesce(sum(size), 0) AS items FROM batches
WHERE run_id = :run AND state IN ('queued', 'running') GROUP BY owner
"""


class WorkerShown(NamedTuple):
    """One worker of a run: its host and process, seconds since its heartbeat, whether it lives, what it holds."""

    host: str
    pid: int
    heartbeat_age: float
    alive: bool
    batches: int
    items: int

    def json(self) -> dict[str, Any]:
        return self._asdict()


def workers_shown(store: Leases, name: str, run_id: int, *, now: float) -> tuple[WorkerShown, ...]:
    """The workers of run ``name`` (id ``run_id``), the longest at work first."""
    held = {row["owner"]: row for row in store.rows(HELD, {"run": run_id})}
    nothing = {"batches": 0, "items": 0}
    return tuple(
        WorkerShown(worker.host, worker.pid, now - worker.heartbeat_at, liveness.lives(worker, now),
                    held.get(worker.token, nothing)["batches"], held.get(worker.token, nothing)["items"])
        for worker in store.workers(name)
    )
