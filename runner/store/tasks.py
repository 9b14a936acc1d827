"""A submitted batch's task, as the store keeps it: the intent, the create sent, the task's id, its duplicates.

What keeps a task from being paid twice: the intent is committed before the
upload, the time until when a create may still land before the create is
sent, the task's id as soon as it is known; a second task found carrying the
batch's reference is kept once, as an unknown charge on the batch's items.
"""

from __future__ import annotations

from ..model import ItemState
from . import items
from .base import StoreBase

#: A line in a batch's history about ``:items`` of its items that stay in ``:state``.
NOTE = """
INSERT INTO events (run_id, batch_id, at, from_state, to_state, items, kind, message, stage)
SELECT run_id, id, :now, :state, :state, :items, :kind, :message, stage FROM batches WHERE id = :batch
"""


#: Whether batch ``?`` has items running and a person cancelled every one of them.
ALL_CANCELLED = """
SELECT count(*) > 0 AND count(*) = count(*) FILTER (WHERE error_kind = 'cancelled') AS cancelled
FROM items WHERE batch_id = ? AND state = 'running'
"""


class Tasks(StoreBase):
    """The verbs of a submitted batch's task."""

    def mark_intent(self, batch_id: int, *, now: float) -> None:
        """Commit that a batch is about to be submitted, before anything is uploaded."""
        with self.write() as conn:
            conn.execute("UPDATE batches SET intent_at = ? WHERE id = ?", (now, batch_id))

    def save_task_id(self, batch_id: int, task_id: str, *, results_expire: float | None = None) -> None:
        """Commit the upstream task id of a submitted batch, before waiting for it, with when its results expire
        upstream when the provider said (kept when it did not: a task adopted again keeps the time saved)."""
        with self.write() as conn:
            conn.execute("UPDATE batches SET upstream_id = ?, results_expire = coalesce(?, results_expire) WHERE id = ?",
                         (task_id, results_expire, batch_id))

    def mark_create_sent(self, batch_id: int, *, lands_by: float) -> None:
        """Commit that a task's create is about to be sent, and until when it may land if its answer is lost."""
        with self.write() as conn:
            conn.execute("UPDATE batches SET lands_by = ? WHERE id = ?", (lands_by, batch_id))

    def lands_by(self, batch_id: int) -> float | None:
        """Until when the batch's create, sent, may still land upstream; None if it was never sent."""
        (row,) = self.rows("SELECT lands_by FROM batches WHERE id = ?", [batch_id])
        return None if row["lands_by"] is None else float(row["lands_by"])

    def task_id(self, batch_id: int) -> str | None:
        (row,) = self.rows("SELECT upstream_id FROM batches WHERE id = ?", [batch_id])
        return str(row["upstream_id"]) if row["upstream_id"] else None

    def record_duplicate(self, batch_id: int, upstream_id: str, *, cancelled: bool, message: str, now: float) -> bool:
        """A second upstream task carrying the batch's reference: kept once, with an unknown charge.

        Each of the batch's items still running may have paid for the lines
        the duplicate ran (``maybe_paid`` + 1), and the batch's history says
        so. False when this duplicate was recorded before.
        """
        with self.write() as conn:
            added = conn.execute(
                "INSERT INTO duplicates (run_id, batch_id, upstream_id, found_at, cancelled, message) "
                "SELECT run_id, id, ?, ?, ?, ? FROM batches WHERE id = ? ON CONFLICT DO NOTHING RETURNING id",
                (upstream_id, now, int(cancelled), message, batch_id),
            ).fetchone()
            if added is None:
                return False
            maybe_paid = items.count_maybe_paid(conn, batch_id)
            conn.execute(NOTE, {"batch": batch_id, "state": ItemState.RUNNING, "items": maybe_paid,
                                "kind": "duplicate", "message": message, "now": now})
        return True

    def all_cancelled(self, batch_id: int) -> bool:
        """Whether a person cancelled every item of the batch still running: its task may be cancelled upstream."""
        (row,) = self.rows(ALL_CANCELLED, [batch_id])
        return bool(row["cancelled"])

    def record_upstream_cancel(self, batch_id: int, *, accepted: bool, message: str, now: float) -> None:
        """A line in the batch's history: its task was cancelled upstream (or the upstream refused)."""
        with self.write() as conn:
            conn.execute(NOTE, {"batch": batch_id, "state": ItemState.RUNNING, "items": 0,
                                "kind": "cancelled_upstream" if accepted else "cancel_refused",
                                "message": message, "now": now})
