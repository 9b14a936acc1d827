"""The attempt bound: when an item to re-attempt gives up instead.

The last step of every verdict (``runner.rules.judge``): a re-attempt of an
item whose tries that may have cost reach ``max_attempts``, or whose refusals
in a row reach ``max_refusals``, gives up (failed, retryable by a person; the
store adds its tally of attempts and paid calls to the message).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from ..model import FailureKind

if TYPE_CHECKING:
    from .judge import Backoff, Started, Verdict


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
        if refused and item.refused_streak + 1 >= limits.max_refusals:
            kind, message = retry.pop(item.id)
            gave_up[item.id] = (kind, f"{message} (gave up after {item.refused_streak + 1} refusals in a row, "
                                      "nothing billed for them")
        elif item.attempts_left + refused <= 0:
            kind, message = retry.pop(item.id)
            gave_up[item.id] = (kind, f"{message} (gave up")
    return replace(verdict, retry=retry, gave_up=gave_up) if gave_up else verdict
