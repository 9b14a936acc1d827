"""Revalidation: a stage's saved outputs checked again against its output schema now, with no call.

Each saved output of a stage falls in one of four cases (:func:`sort`):

| saved output                               | now valid                        | now invalid                 |
|--------------------------------------------|----------------------------------|-----------------------------|
| an item that failed (or waits) as invalid  | completes the stage (no call):   | stays as it is              |
| at the stage, its answer kept              | charge-safe                      |                             |
| a result the stage validated before        | re-stamped with the stage's      | sent again, once a person   |
|                                            | fingerprint now (no call)        | agreed: may repeat a charge |
|                                            |                                  | (it was answered); else, as |
|                                            |                                  | a run revalidates on its    |
|                                            |                                  | own, failed as invalid      |

An item in flight (queued, running, received) keeps its result: its batch
settles it. :class:`Plan` counts each case per stage, charge-safe apart from
may-repeat, so that a person sees what a revalidation does before it acts
(the ledger adds each part's cost to it).

Pure: the saved outputs and the check come in, the sorting goes out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

#: What is wrong with one result, or None when it is valid (``runner.validation.ResultCheck.problem``).
Check = Callable[[Any], "str | None"]


@dataclass(frozen=True)
class Saved:
    """One item's saved output at a stage, as the store keeps it (JSON values already read)."""

    id: int
    key: str
    #: The result the stage validated before (None: none saved).
    result: Any = None
    #: The answer kept of an item that failed (or waits) as invalid at the stage (None: not such an item).
    rejected: Any = None
    #: Its batch is in flight: its result is left to it.
    in_flight: bool = False


@dataclass
class Sorted:
    """A stage's saved outputs sorted: item ids to complete, to re-stamp, to send again (id -> what is wrong)."""

    complete: list[int] = field(default_factory=list)
    restamp: list[int] = field(default_factory=list)
    again: dict[int, str] = field(default_factory=dict)
    #: Items that failed as invalid whose answer still fails, and results now invalid left to a batch in flight.
    still_invalid: int = 0
    in_flight: int = 0


@dataclass(frozen=True)
class StagePlan:
    """What revalidating one stage does: items completed and results re-stamped with no call (charge-safe),
    results sent again (may repeat a charge: they were answered) or failed as invalid for a person's retry
    (``refused``: a run's own revalidation), and those left as they are."""

    stage: str
    completed: int = 0
    restamped: int = 0
    again: int = 0
    still_invalid: int = 0
    in_flight: int = 0
    refused: int = 0

    @property
    def charge_safe(self) -> int:
        return self.completed + self.restamped

    @property
    def may_repeat(self) -> int:
        return self.again


@dataclass(frozen=True)
class Plan:
    """A revalidation's plan, stage by stage; ``applied``: made durable (False: shown, not agreed to)."""

    stages: tuple[StagePlan, ...] = ()
    applied: bool = True

    @property
    def charge_safe(self) -> int:
        return sum(stage.charge_safe for stage in self.stages)

    @property
    def may_repeat(self) -> int:
        return sum(stage.may_repeat for stage in self.stages)

    @property
    def changes(self) -> bool:
        """Whether applying it moves or re-stamps anything."""
        return any(stage.completed or stage.restamped or stage.again or stage.refused for stage in self.stages)


def sort(saved: Sequence[Saved], check: Check) -> Sorted:
    """Each saved output checked again (see the module's table)."""
    out = Sorted()
    for item in saved:
        if item.rejected is not None:
            if check(item.rejected) is None:
                out.complete.append(item.id)
            else:
                out.still_invalid += 1
        elif item.result is not None:
            problem = check(item.result)
            if problem is None:
                out.restamp.append(item.id)
            elif item.in_flight:
                out.in_flight += 1
            else:
                out.again[item.id] = problem
    return out


def stage_plan(stage: str, sorted_: Sorted) -> StagePlan:
    """The counts of one stage's sorting."""
    return StagePlan(stage, len(sorted_.complete), len(sorted_.restamp), len(sorted_.again), sorted_.still_invalid,
                     sorted_.in_flight)
