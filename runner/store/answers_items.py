"""What :mod:`runner.store.views` answers about items a person looks at: failures by kind, one item in full with
its history, the items held for a confirmation and those waiting for a decision.

Split from :mod:`runner.store.answers` (which re-exports them), under the same rule: the UIs render these and
decide nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..model import Case, HeldItem
from .skips import WHEN_FALSE


@dataclass(frozen=True)
class KindCount:  # a dataclass: its field count would hide tuple.count
    """Failed items of one kind."""

    kind: str
    count: int
    retryable: int
    example: str


class FailedItem(NamedTuple):
    key: str
    group: str
    attempts: int
    paid_calls: int
    maybe_paid: int
    retryable: bool
    message: str
    #: The stage it failed at: a retry sends it again there.
    stage: str = ""


class FailuresView(NamedTuple):
    """A run's failures: kinds with counts, and the first items of the chosen kind."""

    name: str
    kinds: tuple[KindCount, ...]
    kind: str | None
    items: tuple[FailedItem, ...]
    #: The run's job has ``[[stage]]`` tables: each item's stage is worth showing.
    staged: bool = False


class HistoryLine(NamedTuple):
    """One line of an item's history: its own state change, or a move of its whole batch."""

    at: float
    #: Seconds before the view was read.
    age: float
    batch_id: int | None
    from_state: str | None
    to_state: str
    kind: str | None
    message: str | None
    #: For a batch's move, how many of the batch's items moved; None for the item's own change.
    batch_items: int | None = None
    #: A pipeline's: the stage the change happened at, and the next stage when it crossed to one.
    stage: str | None = None
    to_stage: str | None = None

    @property
    def stage_note(self) -> str | None:
        return stage_note(self.kind, self.stage, self.to_stage, self.message)


def stage_note(kind: str | None, stage: str | None, to_stage: str | None, message: str | None) -> str | None:
    """What an event did between a pipeline's stages, in words: went on to the next, or skipped one (its
    ``when`` false, and the decision kept for it dropped; or with the fan-out it lies inside, as its ``message``
    says) (else None)."""
    if to_stage:
        return f"on to stage {to_stage}"
    if kind == "decision_dropped":
        return f"stage {stage} skipped: its when is false; the decision kept for it was dropped (never applied)"
    if kind != "skipped":
        return None
    return f"stage {stage} skipped: its when is false" if message in (None, WHEN_FALSE) else f"stage {stage} {message}"


class ItemView(NamedTuple):
    """One item in full: its input, raw output, error, calls paid and whole history."""

    run: str
    key: str
    group: str
    state: str
    attempts: int
    paid_calls: int
    maybe_paid: int
    held: bool
    input: str
    output: str | None
    result: str | None
    kind: str | None
    message: str | None
    retryable: bool | None
    history: tuple[HistoryLine, ...]
    #: The stage the item is at (a completed item's: where it ended), and whether its run is a pipeline.
    stage: str = ""
    staged: bool = False
    #: A pipeline's item: each stage's result it has (JSON text), in the order they were saved.
    results: Mapping[str, str] = {}
    #: What a waiting item waits for, apart: ``waiting for a decision at stage review`` (a person),
    #: ``scheduled for 12:03:04`` (its scheduled time) or ``waiting until ...`` (a back-off); "" when it is not waiting.
    waits: str = ""


class HeldView(NamedTuple):
    """What awaits a person on a run, and what confirming each case does."""

    name: str
    engine_alive: bool
    items: tuple[HeldItem, ...]

    def by_case(self) -> dict[Case, int]:
        cases = {case: 0 for case in Case}
        for item in self.items:
            cases[item.case] += 1
        return {case: n for case, n in cases.items() if n}


class ScheduledItem(NamedTuple):
    """An item waiting for the time its input (or ``runner add --at``) scheduled it at."""

    key: str
    group: str
    at: float


class ScheduledView(NamedTuple):
    """A run's scheduled items: how many in all, the first of them (the earliest first), and when it was read."""

    name: str
    total: int
    items: tuple[ScheduledItem, ...]
    read_at: float


class Decision(NamedTuple):
    """An item waiting at a ``decide`` stage: its input and the results of the stages it passed."""

    key: str
    group: str
    stage: str
    input: Mapping[str, Any]
    #: Each passed stage's result, by stage name.
    results: Mapping[str, Any]

    @property
    def state(self) -> dict[str, Any]:
        """The item's state so far: its input fields and each passed stage's result under the stage's name."""
        return {**self.input, **self.results}


class DecisionsView(NamedTuple):
    """The decisions a run waits for: how many, and the first of them in input order."""

    run: str
    waiting: int
    items: tuple[Decision, ...]
