"""A re-run's plan: the items a person is about to send again, split into charge-safe and may-repeat, each part
with its item count and estimated cost, shown before ``runner confirm``, ``retry`` and ``revalidate`` act.

The first row that holds decides an item's part:

| sent again as                                   | on the item's record                 | part         | a call |
|-------------------------------------------------|--------------------------------------|--------------|--------|
| ``poll``: a held item's saved task polled       | anything                             | charge-safe  | yes    |
| ``adopt``: a held task's create looked for, and | anything                             | charge-safe  | yes    |
| sent again once it can no longer land           |                                      |              |        |
| ``resubmit``: a held call whose answer was lost | anything                             | may-repeat   | yes    |
| ``retry`` of an item rejected at a decide stage | anything                             | charge-safe  | no     |
| ``retry`` of an item that failed as invalid     | anything (it was answered)           | may-repeat   | yes    |
| (``item_invalid``, ``batch_invalid``)           |                                      |              |        |
| ``retry`` of any other failure                  | a call answered, or one whose answer | may-repeat   | yes    |
|                                                 | was lost (an unknown charge)         |              |        |
| ``retry`` of any other failure                  | neither: its calls were refused, its | charge-safe  | yes    |
|                                                 | Batch API line not run, or none sent |              |        |
| ``revalidate``: a result now invalid            | anything (it was answered)           | may-repeat   | yes    |
| ``revalidate``: a result kept, or completed     | anything                             | charge-safe  | no     |

In a pipeline, "answered" is at the stage the item is sent again at (the
store counts its paid calls beyond one per calling stage it passed); a call
lost is counted at any stage (shown as more than it may be, never less). A
part's cost is its
items' calls at the estimate of :mod:`runner.rules.estimate` (unknown, None,
when a stage has no price); items sent with no call cost nothing.

Pure: the items' facts and the estimate come in, the plan goes out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum

from ..model import FailureKind
from ..pricing import money
from ..plurals import plural

#: The failure kinds whose item was answered: a re-attempt is billed again.
ANSWERED_KINDS = (FailureKind.ITEM_INVALID, FailureKind.BATCH_INVALID)


class Resend(StrEnum):
    """How an item is sent again."""

    POLL = "poll"
    ADOPT = "adopt"
    RESUBMIT = "resubmit"
    RETRY = "retry"
    REVALIDATE_AGAIN = "revalidate_again"
    REVALIDATE_KEPT = "revalidate_kept"


class Part(StrEnum):
    """A plan's two parts."""

    CHARGE_SAFE = "charge-safe"
    MAY_REPEAT = "may-repeat"


@dataclass(frozen=True)
class Resent:
    """What a plan knows of one item (or a group of alike items) sent again."""

    how: Resend
    #: The kind it failed as (a retry's).
    kind: str | None = None
    #: A call of it was answered (billed) before, at the stage it is sent again at.
    answered: bool = False
    #: A call of it was sent and its answer lost (an unknown charge).
    lost: bool = False
    #: Its failure may pass when sent again as it is (False: the upstream refused it as it is, say its input too
    #: long for the model: the same refusal again unless its cause is fixed first; ``runner failures``' column).
    retryable: bool = True


def part(item: Resent) -> Part:
    """The part of one item: the first row of the module's table that holds."""
    if item.how in (Resend.POLL, Resend.ADOPT, Resend.REVALIDATE_KEPT):
        return Part.CHARGE_SAFE
    if item.how in (Resend.RESUBMIT, Resend.REVALIDATE_AGAIN):
        return Part.MAY_REPEAT
    if item.kind == FailureKind.REJECTED:  # a person's: a retry waits for a decision again, with no call
        return Part.CHARGE_SAFE
    if item.kind in ANSWERED_KINDS or item.answered or item.lost:
        return Part.MAY_REPEAT
    return Part.CHARGE_SAFE


def calls(item: Resent) -> bool:
    """Whether sending it again makes a call (a decision waited for, or a result kept, makes none)."""
    return item.how is not Resend.REVALIDATE_KEPT and not (item.how is Resend.RETRY and item.kind == FailureKind.REJECTED)


@dataclass(frozen=True)
class Share:
    """One part of a plan: its items and their estimated cost (None: unknown)."""

    items: int = 0
    cost: float | None = 0.0

    def add(self, items: int, cost: float | None) -> Share:
        total = None if self.cost is None or cost is None else self.cost + cost
        return Share(self.items + items, total)


@dataclass(frozen=True)
class Group:
    """Alike items of a plan: at one ``stage``, ``items`` of them with ``chars`` input characters."""

    stage: str
    resent: Resent
    items: int
    chars: int


#: What ``items`` items of ``chars`` input characters cost at ``stage``: ``estimate(stage, items, chars)``.
Estimate = Callable[[str, int, int], "float | None"]


@dataclass(frozen=True)
class RerunPlan:
    """What sending some items again does: the charge-safe part and the part that may be billed again."""

    charge_safe: Share = Share()
    may_repeat: Share = Share()
    #: Items sent again whose failure is not retryable as it is (within the parts above).
    not_retryable: int = 0

    @property
    def items(self) -> int:
        return self.charge_safe.items + self.may_repeat.items

    def __str__(self) -> str:
        """The plan as every UI shows it before it acts:
        ``plan: 120 items · 100 charge-safe (est. $0.0200) · 20 may be billed again (est. $0.0100)``."""

        def est(share: Share) -> str:
            if not share.items:
                return ""
            return f" (est. {money(share.cost)})" if share.cost is not None else " (cost unknown)"

        refused = (f" · {self.not_retryable:,} not retryable as {'it is' if self.not_retryable == 1 else 'they are'}"
                   " (refused as sent: fix the cause first, or it fails the same way)") if self.not_retryable else ""
        return (f"plan: {plural(self.items, 'item')} · {self.charge_safe.items:,} charge-safe{est(self.charge_safe)} · "
                f"{self.may_repeat.items:,} may be billed again{est(self.may_repeat)}{refused}")


def plan(groups: Iterable[Group], estimate: Estimate) -> RerunPlan:
    """The plan of ``groups``: each split by :func:`part`, its calls at ``estimate``."""
    shares = {Part.CHARGE_SAFE: Share(), Part.MAY_REPEAT: Share()}
    not_retryable = 0
    for group in groups:
        if not group.items:
            continue
        cost = estimate(group.stage, group.items, group.chars) if calls(group.resent) else 0.0
        which = part(group.resent)
        shares[which] = shares[which].add(group.items, cost)
        not_retryable += 0 if group.resent.retryable else group.items
    return RerunPlan(shares[Part.CHARGE_SAFE], shares[Part.MAY_REPEAT], not_retryable)
