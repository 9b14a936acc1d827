"""The run's streaks, kept on its row and moved inside a settlement's transaction (:mod:`runner.rules.streaks`).

Every worker of the run moves the same row, each move applied to the value
its transaction reads: three answers in a row are the run's three, and two
workers settling at once lose no move.
"""

from __future__ import annotations

from ..rules.streaks import Move, Stop, Streaks, moved
from .database import Conn

READ = (
    "SELECT runs.id, runs.last_refusal, runs.all_invalid, runs.last_invalid FROM batches "
    "JOIN runs ON runs.id = batches.run_id WHERE batches.id = ?"
)


def move(conn: Conn, batch_id: int, streak: Move) -> Stop | None:
    """The move of batch ``batch_id``'s call applied to its run's streaks, in the caller's transaction; the stop
    their new value calls for."""
    (run_id, last_refusal, all_invalid, last_invalid) = conn.execute(READ, (batch_id,)).fetchone()
    before = Streaks(last_refusal=last_refusal, all_invalid=int(all_invalid), last_invalid=last_invalid)
    after, stop = moved(before, streak)
    if after != before:
        conn.execute("UPDATE runs SET last_refusal = ?, all_invalid = ?, last_invalid = ? WHERE id = ?",
                     (after.last_refusal, after.all_invalid, after.last_invalid, run_id))
    return stop
