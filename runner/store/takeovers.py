"""What a dead worker's takeover says: one event of the run for each worker found dead (issue 20).

A worker killed (SIGKILL, a machine lost) leaves no word of its own. The
worker that finds it dead (its heartbeat late) takes its batches over
(:meth:`runner.store.owners.Owners.recover`) and, in the same transaction,
logs one event for it: where it ran, when it last beat, how many batches it
held and what became of their items (back to pending, held for a person's
confirmation, answers kept to validate). The event is the run's, no item's:
it moves none (``items`` 0), so the events still account for every item.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..model import Holder
from ..words import clock, plural
from .database import Conn

#: The kind of the event that says a worker was found dead and its batches taken over.
KIND = "worker_dead"

#: The batches ``:batches`` (a JSON list of ids): their owner, their items, and of those the held and received.
HOLDINGS = """
SELECT b.id, b.owner, count(i.id) AS items, count(i.id) FILTER (WHERE i.hold = 'confirm') AS held,
       count(i.id) FILTER (WHERE i.state = 'received') AS received
FROM batches AS b LEFT JOIN items AS i ON i.batch_id = b.id WHERE b.id IN (@ints(:batches)) GROUP BY b.id, b.owner
"""

#: A run's event that moves no item.
SAID = "INSERT INTO events (run_id, at, to_state, items, kind, message) VALUES (?, ?, 'pending', 0, ?, ?)"

Holdings = Mapping[int, Mapping[str, Any]]


def holdings(conn: Conn, batches: str) -> Holdings:
    """What the batches ``batches`` hold now, by batch id (read in the caller's transaction)."""
    return {row[0]: dict(zip(("id", "owner", "items", "held", "received"), row, strict=True))
            for row in conn.execute(HOLDINGS, {"batches": batches}).fetchall()}


def tell(conn: Conn, run_id: int, dead: Sequence[Holder], before: Holdings, after: Holdings, *, now: float) -> None:
    """Log, for each worker found ``dead``, what became of the batches it held (``before`` and ``after`` the
    takeover), in the caller's transaction."""
    held = {worker.token: [(was, after[batch]) for batch, was in before.items() if was["owner"] == worker.token]
            for worker in dead}
    conn.executemany(SAID, [(run_id, now, KIND, said(worker, held[worker.token], now=now)) for worker in dead])


def said(worker: Holder, batches: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]], *, now: float) -> str:
    """A dead worker's event in words: ``host:pid stopped beating at 14:02:11; its 2 batches taken over: 3 items
    back to pending, 4 held for confirmation`` (what none became of, unsaid); the time is this machine's (with
    its date when not the day of ``now``, the takeover's)."""
    head = f"{worker.host}:{worker.pid} stopped beating at {clock(worker.heartbeat_at, now=now)}"
    if not batches:
        return f"{head}; it held no batch"
    pending = sum(was["items"] - left["items"] for was, left in batches)
    held = sum(left["held"] for _, left in batches)
    received = sum(left["received"] for _, left in batches)
    fates = [words for n, words in ((pending, f"{plural(pending, 'item')} back to pending"),
                                    (held, f"{held:,} held for confirmation"),
                                    (received, f"{plural(received, 'answer')} kept to validate")) if n]
    return f"{head}; its {plural(len(batches), 'batch', 'batches')} taken over: {', '.join(fates) or 'no item in them'}"
