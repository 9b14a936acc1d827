"""A person's decision at a ``decide`` stage: what it does to one item, a pure rule over where the item stands.

- waiting at a decide stage (hold ``decide``): the decision is applied there;
  an approval's data becomes the stage's result, and the item goes where
  :func:`runner.rules.stages.next_stage` says over its state with that result
  (the next stage, pending there, or none: completed); a rejection fails it;
- unfinished before a decide stage: the decision is kept for the first decide
  stage at or after its current one, applied when the item waits there;
- anywhere else (completed, failed, past the last decide stage): refused,
  with why in words.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from ..model import FailureKind, Hold, ItemState
from .stages import Next, StageLike, next_stage, state_of

#: The kind of a stage where a person decides (``runner.jobs.DECIDE``).
DECIDE = "decide"

#: Why a rejected item failed.
REJECTED = "rejected by a person at stage {stage!r}"


class Kinded(StageLike, Protocol):
    """A stage as this rule reads it: its name, its ``when`` and its kind."""

    @property
    def kind(self) -> str: ...


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
    if item.state == ItemState.COMPLETED:
        return Plan(None, why="it is completed: past its decide stage")
    if item.state == ItemState.FAILED:
        if item.error_kind == FailureKind.REJECTED:
            return Plan(None, why=f"it was rejected at stage {item.stage!r}: a retry of kind rejected sends it "
                                  "back to wait there")
        return Plan(None, why=f"it failed at stage {item.stage!r} ({item.error_kind}), not at a decide stage")
    later = [name for name in deciding if names.index(name) >= names.index(item.stage)]
    if not later:
        return Plan(None, why=f"it is at stage {item.stage!r}, past the last decide stage")
    return Plan(later[0])
