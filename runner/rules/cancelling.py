"""A person's cancel of items in flight: what their batch's settlement becomes for them.

``runner cancel`` fails at once the items not in flight; an item whose batch
is in flight is only marked, and its batch finishes (its answer is saved and
paid for). When the batch settles, :func:`settled` rewrites the judge's
settlement for the marked items:

| the judge's verdict for a cancelled item | becomes                                            |
|------------------------------------------|----------------------------------------------------|
| completed (a valid answer came back)     | completed: it was paid for; failing it would only  |
|                                          | invite paying for it again                         |
| completed at a stage before the last     | its result kept, then failed ``cancelled`` at the  |
|                                          | next stage (the store, after the boundary)         |
| completed at a fan-out stage             | its result kept, no sub-item made, failed          |
|                                          | ``cancelled`` at its join (as the row above)       |
| re-attempted later, split, given up, or  | failed ``cancelled``, retryable by a person, with  |
| failed for another reason                | what its batch said in the message                 |

So no cancelled item goes back for another try, and ``runner retry`` leaves
it alone unless named. Pure: the store reads the marks and applies the
result in the settle's own transaction.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

from ..model import FailureKind, Settlement

#: The message of an item cancelled by a person (``runner cancel``, the TUI, the notebook).
BY_A_PERSON = "cancelled by a person"
#: The message that marks an item cancelled while its batch is in flight.
IN_FLIGHT = f"{BY_A_PERSON}; its batch in flight finishes first"


def settled(settlement: Settlement, cancelled: Collection[int]) -> Settlement:
    """``settlement`` with every ``cancelled`` item it does not complete failed as ``cancelled``."""
    if not cancelled:
        return settlement
    chosen = set(cancelled)
    said = {
        **{i: message for i, (_, message) in settlement.retry.items()},
        **{i: message for i, (_, message) in settlement.gave_up.items()},
        **{i: message for i, (_, message, _) in settlement.failed.items()},
        **{i: "its batch's answer was unusable" for ids in settlement.split for i in ids},
    }
    failed = {i: found for i, found in settlement.failed.items() if i not in chosen}
    failed |= {i: (FailureKind.CANCELLED, f"{BY_A_PERSON}; its batch finished: {message}", True)
               for i, message in said.items() if i in chosen}
    # A cancelled item that would fan out makes no sub-item: it goes to its join, where the store fails it.
    joins = {i: fan.join for i, fan in settlement.fan_out.items() if i in chosen}
    return replace(
        settlement,
        fan_out={i: fan for i, fan in settlement.fan_out.items() if i not in chosen},
        next_stage={**settlement.next_stage, **joins},
        retry={i: found for i, found in settlement.retry.items() if i not in chosen},
        gave_up={i: found for i, found in settlement.gave_up.items() if i not in chosen},
        failed=failed,
        split=[kept for ids in settlement.split if (kept := [i for i in ids if i not in chosen])],
    )
