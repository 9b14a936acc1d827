"""The lease as the store keeps it: which engine holds a run, with its heartbeat.

Whether a holder is alive is the lease module's to judge (``runner.lease``);
taking the lease reads the holder and writes the new one in one transaction,
so two engines never both take it.
"""

from __future__ import annotations

from collections.abc import Callable

from ..model import Holder
from .base import StoreBase
from .database import Conn


def holds(conn: Conn, lease: tuple[str, str]) -> bool:
    """Whether the engine ``lease`` (run name, token) still holds its run, read in the caller's transaction."""
    return conn.execute("SELECT 1 FROM engines WHERE run = ? AND token = ?", lease).fetchone() is not None


class Leases(StoreBase):
    """The verbs of the lease."""

    def take_lease(
        self, run: str, *, token: str, pid: int, host: str, now: float, refuse: Callable[[Holder], None]
    ) -> None:
        """Hold ``run`` for the engine ``token``, unless ``refuse`` raises for the engine holding it now."""
        with self.write() as conn:
            row = conn.execute("SELECT pid, host, heartbeat_at FROM engines WHERE run = ?", (run,)).fetchone()
            if row is not None:
                refuse(Holder(*row))
            conn.execute(
                "INSERT INTO engines (run, token, pid, host, started_at, heartbeat_at) VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (run) DO UPDATE SET token = excluded.token, pid = excluded.pid, "
                "host = excluded.host, started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at",
                (run, token, pid, host, now, now),
            )

    def beat(self, run: str, *, token: str, now: float) -> bool:
        """Renew the lease; False when another engine has taken it."""
        with self.write() as conn:
            held = conn.execute(
                "UPDATE engines SET heartbeat_at = ? WHERE run = ? AND token = ? RETURNING run", (now, run, token)
            ).fetchone()
        return held is not None

    def release_lease(self, run: str, *, token: str) -> None:
        """Give the run back, at the end of an engine's work: what the run grew the -wal to is checkpointed."""
        with self.write() as conn:
            conn.execute("DELETE FROM engines WHERE run = ? AND token = ?", (run, token))
        self._shrink_wal()

    def holder(self, run: str) -> Holder | None:
        """The engine holding ``run``, alive or not."""
        rows = self.rows("SELECT pid, host, heartbeat_at FROM engines WHERE run = ?", [run])
        return Holder(**rows[0]) if rows else None
