"""Schema version 19 (issue 19, shared queues): the queues runs share, and what each run holds of its queue.

- ``queues``: one row per queue name (``[provider] queue``), made by the
  first engine that names it (its concurrency that run's ``[batch]
  concurrency``) or by ``runner queue set``. It holds what the runs of the
  queue share: the concurrency limit, one breaker (its columns as a run's:
  state, kind, reason, transport failures in a row) and the quiet time a
  429's Retry-After asked for.
- ``queue_holds``: one row per run in a queue, written by the engine that
  runs it (its lease ``token``): how many batches it holds in flight and how
  many it has waiting for a slot, with the run's priority among the queue's
  runs. A row counts only while its token is the run's lease holder's
  (``engines``): a crashed engine's row is dropped by the next engine of the
  queue that finds its lease dead, so a crashed engine never keeps a slot.
"""

from __future__ import annotations

SHARED_QUEUES = [
    """
    CREATE TABLE queues (
        name TEXT PRIMARY KEY,
        concurrency INTEGER NOT NULL,
        breaker TEXT NOT NULL DEFAULT 'closed',
        breaker_kind TEXT,
        breaker_reason TEXT,
        transport_failures INTEGER NOT NULL DEFAULT 0,
        quiet_until REAL NOT NULL DEFAULT 0
    )
    """,
    """
    CREATE TABLE queue_holds (
        run_id INTEGER PRIMARY KEY REFERENCES runs(id),
        queue TEXT NOT NULL REFERENCES queues(name),
        token TEXT NOT NULL,
        priority INTEGER NOT NULL DEFAULT 0,
        held INTEGER NOT NULL DEFAULT 0,
        waiting INTEGER NOT NULL DEFAULT 0
    )
    """,
    "CREATE INDEX queue_holds_by_queue ON queue_holds (queue)",
]
