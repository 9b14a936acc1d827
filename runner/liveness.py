"""Whether the engine holding a run's lease still lives: a fresh heartbeat, from a process that may still run.

A holder on this host whose process is gone is dead at once, so a restart
after a crash need not wait for the heartbeat to age; one on another host
lives until its heartbeat is older than :data:`LEASE_SECONDS`.
"""

from __future__ import annotations

import os

from .model import Holder

#: A heartbeat older than this means the engine holding the run is dead.
LEASE_SECONDS = 15.0


def this_host() -> str:
    """This machine's name, as a lease records it (``gethostname``, read without importing ``socket``)."""
    return os.uname().nodename


def lives(holder: Holder, now: float) -> bool:
    """A fresh heartbeat, from a process that may still live."""
    return holder.heartbeat_at > fresh_since(now) and _alive(holder.pid, holder.host)


def fresh_since(now: float) -> float:
    """The time after which a heartbeat is fresh at ``now``: a store counts the live workers by it."""
    return now - LEASE_SECONDS


def _alive(pid: int, host: str) -> bool:
    """Whether a lease holder's process may still live: on this host we can look."""
    if host != this_host():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
