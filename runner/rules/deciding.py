"""A person's decision at a ``decide`` stage: what it does to one item, a pure rule over where the item stands.

- waiting at a decide stage (hold ``decide``): the decision is applied there;
  an approval's data becomes the stage's result, and the item goes where
  :func:`runner.rules.stages.next_stage` says over its state with that result
  (the next stage, pending there, or none: completed); a rejection fails it;
- unfinished before a decide stage: the decision is kept for the first decide
  stage at or after its current one that the item can reach, applied when the
  item waits there (a stage whose ``when`` turns out false drops it, noted:
  :mod:`runner.store.skips`);
- anywhere else (completed, failed, past the last decide stage it can reach:
  a sub-item stops at its join, a parent passes over its sub-items' stages):
  refused, with why in words.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from ..model import FailureKind, Hold, ItemState
from .fanout import inside
from .stages import Next, StageLike, next_stage, state_of

#: The kind of a stage where a person decides (``runner.jobs.DECIDE``).
DECIDE = "decide"

#: Why a rejected item failed (the stage it failed at is the item's, which every view tells beside it).
REJECTED = "rejected by a person"


class Kinded(StageLike, Protocol):
    """A stage as this rule reads it: its name, its ``when``, its kind and what it fans out."""

    @property
    def kind(self) -> str: ...
    @property
    def fan_out(self) -> str: ...


class At(NamedTuple):
    """Where an item stands, as the store reads it for a decision."""

    key: str
    stage: str
    state: str
    hold: str
    error_kind: str | None
    #: Its input fields, and the results of the stages it passed (stage -> result).
    record: Mapping[str, Any]
    results: Mapping[str, Any]
    #: A fan-out's sub-item: it goes through the stages up to its join, never past it.
    sub_item: bool = False


class Plan(NamedTuple):
    """What a decision does to one item: applied at ``stage`` now, kept for it, or refused (``why``)."""

    stage: str | None
    applied: bool = False
    #: An approval applied: where the item goes (``Next(None)``: completed).
    goes: Next | None = None
    why: str = ""

    @property
    def refused(self) -> bool:
        return self.stage is None


def plan(stages: Sequence[Kinded], item: At, *, approve: bool, data: Mapping[str, Any]) -> Plan:
    """What approving (with ``data``) or rejecting does to ``item``, given the job's ``stages`` in order."""
    names = [stage.name for stage in stages]
    deciding = [stage.name for stage in stages if stage.kind == DECIDE]
    if not deciding:
        return Plan(None, why="the run has no decide stage")
    if item.stage not in names:
        return Plan(None, why=f"it is at stage {item.stage!r}, which the job no longer has")
    if item.state == ItemState.WAITING and item.hold == Hold.DECIDE:
        goes = next_stage(stages, item.stage, state_of(item.record, {**item.results, item.stage: dict(data)}))
        return Plan(item.stage, applied=True, goes=goes if approve else None)
    later = [name for name in deciding if names.index(name) >= names.index(item.stage)]
    reached = _reachable(stages, item)
    if item.sub_item and later and not reached:  # settled or not: no decide stage is a sub-item's
        return Plan(None, why=f"it is a sub-item: it stops at its join, and decide stage {later[0]!r} after it is "
                              "its parent's")
    if item.state == ItemState.COMPLETED:
        return Plan(None, why="it is completed: past its decide stage")
    if item.state == ItemState.FAILED:
        if item.error_kind == FailureKind.REJECTED:
            return Plan(None, why=f"it was rejected at stage {item.stage!r}: a retry of kind rejected sends it "
                                  "back to wait there")
        return Plan(None, why=f"it failed at stage {item.stage!r} ({item.error_kind}), not at a decide stage")
    if not later:
        return Plan(None, why=f"it is at stage {item.stage!r}, past the last decide stage")
    if not reached:
        return Plan(None, why=f"decide stage {later[0]!r} is its sub-items' (after its fan-out): decide those")
    return Plan(reached[0])


def _reachable(stages: Sequence[Kinded], item: At) -> list[str]:
    """The decide stages from the item's own on that it can reach: a sub-item's up to its join, an item's
    outside any fan-out."""
    names = [stage.name for stage in stages]
    onward = stages[names.index(item.stage):]
    if item.sub_item:
        ends = [n for n, stage in enumerate(onward) if stage.kind == "join"]
        onward = onward[:ends[0]] if ends else onward
        return [stage.name for stage in onward if stage.kind == DECIDE]
    return [stage.name for stage in onward if stage.kind == DECIDE and not inside(stages, stage.name)]
