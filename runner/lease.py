"""The lease: one live engine per run, told apart from a dead one by its heartbeat.

An engine takes the lease (by run name) before it reads the input or touches
an item, beats every few seconds, and gives it back when it stops. A second
engine is refused while the first one's heartbeat is fresh. A holder on this
host whose process is gone is dead at once, so a restart after a crash need
not wait for the heartbeat to age. An engine that finds its lease taken
starts nothing more (``Store.start_batch`` checks the lease in the same
transaction).
"""

from __future__ import annotations

import os
import socket

from .errors import RunError
from .store import Store

#: A heartbeat older than this means the engine holding the run is dead.
LEASE_SECONDS = 15.0


def acquire(store: Store, run: str, *, token: str, now: float) -> None:
    """Hold ``run`` for the engine ``token``; refuse while another live engine holds it."""
    with store.write() as conn:
        row = conn.execute("SELECT pid, host, heartbeat_at FROM engines WHERE run = ?", (run,)).fetchone()
        if row and now - row[2] < LEASE_SECONDS and _alive(row[0], row[1]):
            raise RunError(
                f"run {run!r} is being run by another engine (pid {row[0]} on {row[1]}, "
                f"heartbeat {now - row[2]:.0f}s ago); stop it first, or wait {LEASE_SECONDS:.0f}s if it died"
            )
        conn.execute(
            "INSERT INTO engines (run, token, pid, host, started_at, heartbeat_at) VALUES (?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (run) DO UPDATE SET token = excluded.token, pid = excluded.pid, "
            "host = excluded.host, started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at",
            (run, token, os.getpid(), socket.gethostname(), now, now),
        )


def beat(store: Store, run: str, *, token: str, now: float) -> bool:
    """Renew the lease; False when another engine has taken it."""
    with store.write() as conn:
        held = conn.execute(
            "UPDATE engines SET heartbeat_at = ? WHERE run = ? AND token = ? RETURNING run", (now, run, token)
        ).fetchone()
    return held is not None


def release(store: Store, run: str, *, token: str) -> None:
    with store.write() as conn:
        conn.execute("DELETE FROM engines WHERE run = ? AND token = ?", (run, token))


def alive(store: Store, run: str, *, now: float) -> bool:
    """Whether a live engine holds the run."""
    rows = store.rows("SELECT pid, host, heartbeat_at FROM engines WHERE run = ?", [run])
    return bool(rows) and now - rows[0]["heartbeat_at"] < LEASE_SECONDS and _alive(rows[0]["pid"], rows[0]["host"])


def _alive(pid: int, host: str) -> bool:
    """Whether a lease holder's process may still live: on this host we can look."""
    if host != socket.gethostname():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
