"""runner: a recoverable job runner for costly calls, over one SQLite run store.

The core (store, engine, providers, CLI, simulator) imports no UI library;
the TUI lives in ``tui`` and the notebook widgets in their own module.
The names below are imported when first used, so that ``import runner.cli``
(every ``runner`` command) loads only what its command needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .engine import Engine, Outcome
    from .errors import RunnerError, SkipRetry
    from .jobs import Job, load
    from .model import BreakerState, FailureKind, ItemState
    from .store import Store

#: Each public name and the module that holds it.
HOMES = {
    "BreakerState": ".model",
    "Engine": ".engine",
    "FailureKind": ".model",
    "ItemState": ".model",
    "Job": ".jobs",
    "Outcome": ".engine",
    "RunnerError": ".errors",
    "SkipRetry": ".errors",
    "Store": ".store",
    "load": ".jobs",
}

__all__ = sorted(HOMES)


def __getattr__(name: str) -> Any:
    """``runner.Engine`` and the other public names, imported from their module on first use."""
    if name not in HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(HOMES[name], __name__), name)
    globals()[name] = value
    return value
