"""Shared queues as the store keeps them (:mod:`.migrations_shared_queues`): the queue's row, and each run's hold.

An engine joins its run's queue as it starts (the queue made with the run's
concurrency if new), writes what it holds and has waiting (``hold_in_queue``)
in the transaction of the start that takes a slot, and gives it back as it
stops. Each worker of a run keeps a hold of its own (keyed by run and token):
the queue counts what all of them hold. A hold counts only while its engine is
one of its run's workers; ``sweep_queue`` drops the holds of engines whose
lease is dead, so a crashed engine never keeps a slot. A batch's breaker move and a 429's quiet
time are written to the queue by the batch's settlement (:mod:`.settling`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import RunError
from ..model import BreakerState, FailureKind, Holder, Settlement
from ..rules.breaker import Control
from ..rules.queues import Queue
from .answers import QueueShare
from .commands import Commands
from .database import Conn

#: The holds of the queue ``:queue`` whose engine is still one of its run's workers (the token it joined with), one
#: per worker.
LIVE_HOLDS = """
SELECT h.run_id, runs.name AS run, h.priority, h.held, h.waiting
FROM queue_holds h JOIN runs ON runs.id = h.run_id
JOIN workers w ON w.run = runs.name AND w.token = h.token
WHERE h.queue = :queue
"""

#: The queue run ``?`` names ("": none) and the concurrency its job would make a new queue with.
RUN_QUEUE = """
SELECT coalesce(@field(job, '$.provider.queue'), '') AS queue,
    CAST(@field(job, '$.batch.concurrency') AS INTEGER) AS concurrency
FROM runs WHERE id = ?
"""

QUEUE_COLUMNS = "name, concurrency, breaker, breaker_kind, breaker_reason, transport_failures, quiet_until"
QUEUE_ROW = f"SELECT {QUEUE_COLUMNS} FROM queues WHERE name = ?"


def queue_row(conn: Conn, name: str) -> dict[str, Any] | None:
    """The queue's row (:data:`QUEUE_COLUMNS`; None: no queue of that name), read in the caller's transaction."""
    cursor = conn.execute(QUEUE_ROW, (name,))
    row = cursor.fetchone()
    return None if row is None else dict(zip([column[0] for column in cursor.description], row))


def queue_of(conn: Conn, run_id: int) -> str | None:
    """The queue the engine holding the run joined (None: none, or the run's hold is an engine's before), read in
    the caller's transaction."""
    row = conn.execute("SELECT h.queue FROM queue_holds h JOIN runs ON runs.id = h.run_id "
                       "JOIN workers w ON w.run = runs.name AND w.token = h.token WHERE h.run_id = ?",
                       (run_id,)).fetchone()
    return None if row is None else str(row[0])


def control_of(row: dict[str, Any]) -> Control:
    """A queue row's breaker, as a run's control (no pause, no steps: those are a run's)."""
    kind = row["breaker_kind"]
    return Control(BreakerState(row["breaker"]), row["breaker_reason"], row["transport_failures"],
                   kind=FailureKind(kind) if kind else None)


def write_control(conn: Conn, name: str, control: Control) -> None:
    """Write a queue's breaker inside the caller's transaction."""
    conn.execute("UPDATE queues SET breaker = ?, breaker_kind = ?, breaker_reason = ?, transport_failures = ? "
                 "WHERE name = ?", (control.breaker, control.kind, control.reason, control.transport_failures, name))


def settled(conn: Conn, name: str, settlement: Settlement) -> None:
    """A batch's breaker move and a 429's quiet time, applied to its run's queue in the settlement's transaction."""
    if settlement.quiet_until:
        conn.execute("UPDATE queues SET quiet_until = ? WHERE name = ? AND quiet_until < ?",
                     (settlement.quiet_until, name, settlement.quiet_until))
    if settlement.breaker is not None and (row := queue_row(conn, name)) is not None:
        before = control_of(row)
        after = settlement.breaker(before)
        if after != before:
            write_control(conn, name, after)


class Queues(Commands):
    """The verbs of shared queues: join, hold, sweep, leave; a person's limit and resume; the queues as read."""

    def join_queue(self, run_id: int, queue: str, *, token: str, priority: int, concurrency: int) -> None:
        """The engine ``token`` runs ``run_id`` in ``queue`` (made with ``concurrency`` if new), holding nothing; the
        run's holds of workers gone from it are dropped."""
        with self.write() as conn:
            conn.execute("INSERT INTO queues (name, concurrency) VALUES (?, ?) ON CONFLICT (name) DO NOTHING",
                         (queue, concurrency))
            conn.execute("DELETE FROM queue_holds WHERE run_id = ? AND token != ? AND token NOT IN "
                         "(SELECT token FROM workers)", (run_id, token))
            conn.execute(
                "INSERT INTO queue_holds (run_id, queue, token, priority) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (run_id, token) DO UPDATE SET queue = excluded.queue, priority = excluded.priority, "
                "held = 0, waiting = 0", (run_id, queue, token, priority))

    def run_queue(self, run_id: int, *, token: str) -> Queue | None:
        """The run's queue as its engine ``token`` reads it (None: the run is in none): the row, what the other runs
        hold and the batches waiting in runs of a higher priority (the run's own other workers are counted by its
        batches, ``elsewhere``)."""
        mine = self.rows("SELECT queue, priority FROM queue_holds WHERE run_id = ? AND token = ?", [run_id, token])
        if not mine:
            return None
        name, priority = mine[0]["queue"], mine[0]["priority"]
        (row,) = self.rows(QUEUE_ROW, [name])
        others = [hold for hold in self.rows(LIVE_HOLDS, {"queue": name}) if hold["run_id"] != run_id]
        return Queue(name, row["concurrency"], control_of(row), row["quiet_until"],
                     others=sum(hold["held"] for hold in others),
                     ahead=sum(hold["waiting"] for hold in others if hold["priority"] > priority))

    def hold_in_queue(self, run_id: int, *, token: str, held: int, waiting: int) -> None:
        """What the run's engine ``token`` holds in flight and has waiting for a slot now."""
        with self.write() as conn:
            conn.execute("UPDATE queue_holds SET held = ?, waiting = ? WHERE run_id = ? AND token = ?",
                         (held, waiting, run_id, token))

    def sweep_queue(self, queue: str, *, lives: Callable[[Holder], bool]) -> int:
        """Drop the holds in ``queue`` of engines whose lease is gone or dead (``lives`` says); how many. Read
        first: a write is taken only when a hold is dead (read again in it: a hold may have moved since)."""
        if not self._dead_holds(queue, lives):
            return 0
        with self.write() as conn:
            dead = self._dead_holds(queue, lives)
            conn.executemany("UPDATE queue_holds SET held = 0, waiting = 0 WHERE run_id = ? AND token = ?", dead)
        return len(dead)

    def _dead_holds(self, queue: str, lives: Callable[[Holder], bool]) -> list[tuple[int, str]]:
        """The holds (run, token) holding or waiting in ``queue`` whose engine's lease is gone or dead."""
        rows = self.rows("SELECT h.run_id, h.token, e.pid, e.host, e.heartbeat_at FROM queue_holds h "
                         "JOIN runs ON runs.id = h.run_id LEFT JOIN workers e ON e.run = runs.name AND e.token = h.token "
                         "WHERE h.queue = ? AND (h.held > 0 OR h.waiting > 0)", [queue])
        return [(row["run_id"], row["token"]) for row in rows
                if row["pid"] is None or not lives(Holder(row["pid"], row["host"], row["heartbeat_at"]))]

    def set_queue(self, name: str, *, concurrency: int) -> None:
        """A person's limit on ``name``: at most ``concurrency`` batches in flight, all its runs together."""
        with self.write() as conn:
            conn.execute("INSERT INTO queues (name, concurrency) VALUES (?, ?) "
                         "ON CONFLICT (name) DO UPDATE SET concurrency = excluded.concurrency", (name, concurrency))

    def queue_command(self, name: str, change: Callable[[Control], Control]) -> Control:
        """A person's ``change`` to the queue's breaker (it may refuse by raising); an unknown queue is refused."""
        with self.write() as conn:
            row = queue_row(conn, name)
            if row is None:
                raise RunError(f"no queue {name!r} in this store{self._known_queues()}")
            control = change(control_of(row))
            write_control(conn, name, control)
        return control

    def queues(self) -> list[dict[str, Any]]:
        """Every queue, by name: its limit, breaker and quiet time, and per run in it what it holds and waits for
        (``live``: its engine holds the run now; a run with none holds nothing)."""
        found = []
        for row in self.rows(f"SELECT {QUEUE_COLUMNS} FROM queues ORDER BY name"):
            live = _by_run(self.rows(LIVE_HOLDS, {"queue": row["name"]}))
            runs = self.rows("SELECT h.run_id, runs.name AS run, max(h.priority) AS priority FROM queue_holds h "
                             "JOIN runs ON runs.id = h.run_id WHERE h.queue = ?1 "
                             "AND @field(runs.job, '$.provider.queue') = ?1 GROUP BY h.run_id, runs.name "
                             "ORDER BY priority DESC, runs.name", [row["name"]])
            found.append({**row, "runs": [{**run, **live[run["run_id"]], "live": True} if run["run_id"] in live else
                                          {**run, "held": 0, "waiting": 0, "live": False} for run in runs]})
        return found

    def share(self, run_id: int, *, now: float) -> QueueShare | None:
        """The queue the run's job names, as the views show it (None: it names none); a queue no engine has made
        yet shows the limit the run's would make it with."""
        (run,) = self.rows(RUN_QUEUE, [run_id])
        if not run["queue"]:
            return None
        rows = self.rows(QUEUE_ROW, [run["queue"]])
        row = rows[0] if rows else {"concurrency": run["concurrency"], "breaker": "closed", "breaker_kind": None,
                                    "breaker_reason": None, "transport_failures": 0, "quiet_until": 0.0}
        holds = _by_run(self.rows(LIVE_HOLDS, {"queue": run["queue"]}))
        mine = holds.get(run_id, {"held": 0, "waiting": 0})
        return QueueShare(run["queue"], row["concurrency"], control_of(row),
                          row["quiet_until"] if row["quiet_until"] > now else None, mine["held"], mine["waiting"],
                          sum(hold["held"] for hold in holds.values()))

    def _known_queues(self) -> str:
        names = [row["name"] for row in self.rows("SELECT name FROM queues ORDER BY name")]
        return f"; its queues: {', '.join(names)}" if names else " (no run has named a queue yet)"


def _by_run(holds: list[dict[str, Any]]) -> dict[int, dict[str, int]]:
    """Live holds (one per worker) summed by run: what each run's workers hold and have waiting together."""
    runs: dict[int, dict[str, int]] = {}
    for hold in holds:
        run = runs.setdefault(hold["run_id"], {"held": 0, "waiting": 0})
        run["held"] += hold["held"]
        run["waiting"] += hold["waiting"]
    return runs
