"""How a run ended, as the engine returns it: done, or stopped for a person (and why), with the exit code."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..model import FailureKind, ItemState
from ..rules.revalidating import StagePlan


@dataclass(frozen=True)
class Outcome:
    """How a run ended: done, or stopped because a person is needed (and why)."""

    status: dict[str, Any]
    stopped_for: str | None
    stop_kind: FailureKind | None = None
    #: As the run started: stage -> completed items sent back to it (it, or one before it, changed); stage no
    #: longer in the job -> items left at it sent on (``stages.rewind``).
    rewound: Mapping[str, int] = field(default_factory=dict)
    gone: Mapping[str, int] = field(default_factory=dict)
    #: As the run started: stage inside a fan-out -> (sub-items sent back to it, their parents, waiting at their
    #: join again).
    inside: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    #: The python stages given no handler at which items were left: the run goes on from Python with them.
    needs_handler: tuple[str, ...] = ()
    #: As the run started: stage whose only change was its output schema -> what revalidating it did, with no
    #: call (``runner.revalidating.after_schema_change``); its results now invalid failed, never sent again.
    revalidated: Mapping[str, StagePlan] = field(default_factory=dict)

    @property
    def open_queue(self) -> str | None:
        """The run's shared queue, when its breaker is open and holds the run (None: no queue, or not open)."""
        queue = self.status["queue"]
        return queue["name"] if queue and queue["breaker"]["state"] == "open" else None

    @property
    def exit_code(self) -> int:
        """The CLI contract: 0 all completed, 3 failed items, 4 stopped for a person, 1 refused key."""
        if self.stop_kind is FailureKind.AUTH:
            return 1
        if self.stopped_for is not None:
            return 4
        return 3 if self.status["counts"][ItemState.FAILED] else 0
