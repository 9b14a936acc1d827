"""Schema (issue 20): several workers on one run, each batch owned by the worker that formed it.

- ``workers`` replaces ``engines``: one row per worker (its ``token``) on a
  run, with its process, host and heartbeat, so that a second ``runner run``
  of the same run joins it instead of being refused. A worker found dead is
  deleted by the worker that notices, in the transaction that takes its
  batches over; a worker whose row is gone starts nothing more.
- ``batches.owner``: the token of the worker that formed the batch. Only the
  owner starts it; recovery touches only the batches whose owner is no
  live worker (NULL: a batch formed before owners, which nobody owns); a
  confirmed batch is taken by one worker before it is polled again.
- ``setups``: the run being set up (its input read, what a dead worker left
  recovered, its stages rewound) by one worker, whose token it names; the
  others wait for it.
- ``runs.quiet_until``: the time a 429's Retry-After asked for, kept with the
  run so that every worker holds back together.

Portable DDL only (the PostgreSQL store takes the same statements).

Version 25: ``queue_holds`` keyed by worker, ``(run_id, token)``, no longer
by run: each worker of a run in a shared queue writes what it holds and has
waiting in a row of its own, and the queue counts them all (two workers of
one run no longer overwrite each other's hold). A worker joining the queue
drops its run's rows left by workers gone from the run.

Version 26: the run's streaks on its row (``runner.rules.streaks``): the
gist of the last bad request no batch would pass (``last_refusal``), and the
answers in a row whose every result was invalid for one reason
(``all_invalid``, ``last_invalid``). Kept in memory by each worker before,
they were its own; moved in the settlement's transaction now, they are the
run's, whichever worker got the answer. A run upgraded starts with none.
"""

from __future__ import annotations

from .dialect import Dialects

WORKERS = [
    """
    CREATE TABLE workers (
        token TEXT PRIMARY KEY,
        run TEXT NOT NULL,
        pid BIGINT NOT NULL,
        host TEXT NOT NULL,
        started_at DOUBLE PRECISION NOT NULL,
        heartbeat_at DOUBLE PRECISION NOT NULL
    )
    """,
    "INSERT INTO workers (token, run, pid, host, started_at, heartbeat_at) "
    "SELECT token, run, pid, host, started_at, heartbeat_at FROM engines",
    "DROP TABLE engines",
    "CREATE INDEX workers_by_run ON workers (run)",
    "CREATE TABLE setups (run TEXT PRIMARY KEY, token TEXT NOT NULL)",
    "ALTER TABLE batches ADD COLUMN owner TEXT",
    "ALTER TABLE runs ADD COLUMN quiet_until DOUBLE PRECISION NOT NULL DEFAULT 0",
]

HOLDS_BY_WORKER = Dialects(
    sqlite=[
        """
        CREATE TABLE queue_holds_by_worker (
            run_id INTEGER NOT NULL REFERENCES runs(id),
            queue TEXT NOT NULL REFERENCES queues(name),
            token TEXT NOT NULL,
            priority INTEGER NOT NULL DEFAULT 0,
            held INTEGER NOT NULL DEFAULT 0,
            waiting INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (run_id, token)
        )
        """,
        "INSERT INTO queue_holds_by_worker (run_id, queue, token, priority, held, waiting) "
        "SELECT run_id, queue, token, priority, held, waiting FROM queue_holds",
        "DROP TABLE queue_holds",
        "ALTER TABLE queue_holds_by_worker RENAME TO queue_holds",
        "CREATE INDEX queue_holds_by_queue ON queue_holds (queue)",
    ],
    postgres=["ALTER TABLE queue_holds DROP CONSTRAINT queue_holds_pkey, ADD PRIMARY KEY (run_id, token)"],
)

STREAKS = [
    "ALTER TABLE runs ADD COLUMN last_refusal TEXT",
    "ALTER TABLE runs ADD COLUMN all_invalid BIGINT NOT NULL DEFAULT 0",
    "ALTER TABLE runs ADD COLUMN last_invalid TEXT",
]
