"""runner: a recoverable job runner for costly calls, over one SQLite run store.

The core (store, engine, providers, CLI, simulator) imports no UI library;
the TUI lives in ``tui`` and the notebook widgets in their own module.
"""

from __future__ import annotations

from .engine import Engine, Outcome
from .errors import RunnerError
from .jobs import Job, load
from .model import BreakerState, FailureKind, ItemState
from .store import Store

__all__ = [
    "BreakerState",
    "Engine",
    "FailureKind",
    "ItemState",
    "Job",
    "Outcome",
    "RunnerError",
    "Store",
    "load",
]
