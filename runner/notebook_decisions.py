"""A notebook run's decisions at its ``decide`` stages: the items waiting, and a person's approve or reject.

Part of :class:`runner.notebook.Run` (a mixin, so that module stays one you
can read top to bottom)::

    run.decisions()                            # items waiting: key, group, stage, input, state so far
    run.decisions(frame=True)                  # the same as a pandas DataFrame
    run.decide("p001", data={"ok": True})      # approve: data saved as the stage's result, the item goes on
    run.decide("p002", approve=False)          # reject: the item fails as rejected

Each decision is one store transaction (:func:`runner.deciding.decide`),
obeyed by an engine in any process, or by the next one.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any, Literal, Protocol, overload

from . import deciding
from .clock import Clock
from .jobs import Job
from .location import StoreLocation
from .store import Store, views
from .store.decisions import Decided


class _Run(Protocol):
    db: StoreLocation
    @property
    def name(self) -> str: ...
    @property
    def clock(self) -> Clock: ...
    job: Job
    def _store(self, *, read_only: bool = False) -> AbstractContextManager[Store]: ...


class Decisions:
    """``decisions()`` and ``decide()`` of a notebook run."""

    @overload
    def decisions(self: _Run, *, frame: Literal[False] = False) -> list[dict[str, Any]]: ...
    @overload
    def decisions(self: _Run, *, frame: Literal[True]) -> Any: ...

    def decisions(self: _Run, *, frame: bool = False) -> Any:
        """The items waiting for a person's decision, in input order: ``key``, ``group``, ``stage``, ``input`` and
        ``state`` (the input and each passed stage's result under its name); a DataFrame with ``frame``."""
        from .notebook import to_frame

        with self._store(read_only=True) as store:
            every = views.decision_count(store, store.run_id(self.name))
            rows = [{"key": d.key, "group": d.group, "stage": d.stage, "input": dict(d.input), "state": d.state}
                    for d in views.decisions_view(store, self.name, limit=every).items]
        return to_frame(rows) if frame else rows

    def decide(self: _Run, key: str, approve: bool = True, data: Mapping[str, Any] | None = None) -> Decided:
        """Approve (``data``, default ``{}``, saved as the stage's result) or reject one item.

        An item not at its decide stage yet keeps the decision until it
        arrives; one past it (or failed) raises :class:`~runner.errors.RunError`.
        """
        with self._store() as store:
            return deciding.decide(store, self.name, [key], approve=approve, data=data, now=self.clock.now())

