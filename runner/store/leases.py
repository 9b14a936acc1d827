"""The workers of a run as the store keeps them: each with its heartbeat, and the one setting the run up.

Whether a worker is alive, and who sets a run up, is the lease module's to
judge (``runner.lease``), passed in: joining reads the run's workers and its
setup and takes the setup in one transaction, so two workers never both set
a run up.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum

from ..model import Holder
from .base import StoreBase
from .database import Conn

#: The run's workers, each as a holder with its token.
WORKERS = "SELECT pid, host, heartbeat_at, token FROM workers WHERE run = :run"



class Role(StrEnum):
    """What a worker joining a run does first."""

    #: It sets the run up (reads the input, recovers, rewinds), the others waiting.
    SET_UP = "set up"
    #: Another live worker is setting the run up: wait, then ask again.
    WAIT = "wait"
    #: The run is set up and live workers work it: work beside them.
    JOIN = "join"


#: Who sets a run up: given the token of the worker setting it up now (None: none) and the run's workers, what a
#: worker joining does first (``runner.lease.setup_role``).
Chooser = Callable[[str | None, list[Holder]], Role]


def holds(conn: Conn, lease: tuple[str, str]) -> bool:
    """Whether the worker ``lease`` (run name, token) is still one of its run's, read in the caller's transaction."""
    return conn.execute("SELECT 1 FROM workers WHERE run = ? AND token = ?", lease).fetchone() is not None


def workers_of(conn: Conn, run: str) -> list[Holder]:
    """The run's workers, alive or not, read in the caller's transaction."""
    return [Holder(*row) for row in conn.execute(WORKERS, {"run": run}).fetchall()]


def forget_dead(conn: Conn, run: str, lives: Callable[[Holder], bool]) -> list[Holder]:
    """Delete the run's workers ``lives`` says are dead, in the caller's transaction; those workers."""
    dead = [worker for worker in workers_of(conn, run) if not lives(worker)]
    conn.executemany("DELETE FROM workers WHERE token = ?", [(worker.token,) for worker in dead])
    return dead


class Leases(StoreBase):
    """The verbs of the workers: join, beat, set up, leave; the workers as read."""

    def join_run(self, run: str, *, token: str, pid: int, host: str, now: float, choose: Chooser) -> Role:
        """The worker ``token`` works ``run`` from now on, beside any others; whether it sets the run up first
        (``take_setup``), in the same transaction."""
        with self.write() as conn:
            conn.execute(
                "INSERT INTO workers (token, run, pid, host, started_at, heartbeat_at) VALUES (?, ?, ?, ?, ?, ?)",
                (token, run, pid, host, now, now),
            )
            return _setup_role(conn, run, token, choose)

    def take_setup(self, run: str, *, token: str, choose: Chooser) -> Role:
        """Whether the worker ``token`` sets ``run`` up, waits for the worker that does, or joins the others, as
        ``choose`` says."""
        with self.write() as conn:
            return _setup_role(conn, run, token, choose)

    def end_setup(self, run: str, *, token: str) -> None:
        """The run is set up: the workers waiting go on, and its streaks start afresh (``runner.rules.streaks``): a
        run started again counts its answers and refusals in a row from none, as when each worker kept its own."""
        with self.write() as conn:
            conn.execute("DELETE FROM setups WHERE run = ? AND token = ?", (run, token))
            conn.execute("UPDATE runs SET last_refusal = NULL, all_invalid = 0, last_invalid = NULL WHERE name = ?",
                         (run,))

    def beat(self, run: str, *, token: str, now: float) -> bool:
        """Renew a worker's heartbeat; False when another found it dead and took its batches over."""
        with self.write() as conn:
            held = conn.execute(
                "UPDATE workers SET heartbeat_at = ? WHERE run = ? AND token = ? RETURNING run", (now, run, token)
            ).fetchone()
        return held is not None

    def leave_run(self, run: str, *, token: str) -> None:
        """A worker's work ends: what the run grew the -wal to is checkpointed."""
        with self.write() as conn:
            conn.execute("DELETE FROM setups WHERE run = ? AND token = ?", (run, token))
            conn.execute("DELETE FROM workers WHERE run = ? AND token = ?", (run, token))
        self._shrink_wal()

    def workers(self, run: str) -> list[Holder]:
        """The run's workers, alive or not, the longest at work first."""
        return [Holder(**row) for row in self.rows(f"{WORKERS} ORDER BY started_at, token", {"run": run})]


def _setup_role(conn: Conn, run: str, token: str, choose: Chooser) -> Role:
    """What the worker ``token`` does first, as ``choose`` says from the run's setup and workers; the setup taken
    if it is this worker's, in the caller's transaction."""
    row = conn.execute("SELECT token FROM setups WHERE run = ?", (run,)).fetchone()
    role = choose(None if row is None else str(row[0]), workers_of(conn, run))
    if role is Role.SET_UP:
        conn.execute("INSERT INTO setups (run, token) VALUES (?, ?) "
                     "ON CONFLICT (run) DO UPDATE SET token = excluded.token", (run, token))
    return role
