"""The attempt bound: when an item to re-attempt gives up instead.

The last step of every verdict (``runner.rules.judge``): a re-attempt of an
item whose tries that may have cost reach ``max_attempts`` (its failure
kind's own, when the job sets one: ``[retry.transport]``), or whose refusals
in a row reach ``max_refusals``, gives up (failed, retryable by a person; the
store adds its tally of attempts and paid calls to the message).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from ..model import FailureKind

if TYPE_CHECKING:
    from .judge import Started, Verdict


class Backoff(Protocol):
    """The re-attempt times and bounds of the job's retry limits (``runner.jobs.RetryLimits``)."""

    @property
    def backoff(self) -> float: ...

    @property
    def max_backoff(self) -> float: ...

    @property
    def max_refusals(self) -> int: ...

    @property
    def max_attempts(self) -> int: ...

    def of(self, kind: str) -> Backoff:
        """The limits a failure of ``kind`` is re-attempted under (``[retry.rate_limited]``, say)."""
        ...


def bounded(verdict: Verdict, items: Sequence[Started], limits: Backoff) -> Verdict:
    """The attempt bound: a re-attempt of an item whose tries that may have cost, or refusals in a row, are spent gives up.

    A refused try (nothing ran, nothing billed) gives back the attempt it
    took, and adds one to the item's refusals in a row; any other try ends
    that streak.
    """
    retry = dict(verdict.retry)
    gave_up: dict[int, tuple[FailureKind, str]] = {}
    for item in items:
        if item.id not in retry:
            continue
        refused = item.id in verdict.refused
        own = limits.of(retry[item.id][0])
        if refused and item.refused_streak + 1 >= own.max_refusals:
            kind, message = retry.pop(item.id)
            gave_up[item.id] = (kind, f"{message} (gave up after {item.refused_streak + 1} refusals in a row, "
                                      "nothing billed for them")
        elif item.attempts_left + refused + _own_bound(limits, own) <= 0:
            kind, message = retry.pop(item.id)
            gave_up[item.id] = (kind, f"{message} (gave up")
    return replace(verdict, retry=retry, gave_up=gave_up) if gave_up else verdict


def _own_bound(limits: Backoff, own: Backoff) -> int:
    """How many more tries a failure kind's ``own`` limits (``limits.of(kind)``) allow than ``max_attempts``
    (fewer: negative); the item's ``attempts_left`` was counted against ``max_attempts`` when it started."""
    return own.max_attempts - limits.max_attempts
