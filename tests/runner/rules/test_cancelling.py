"""A cancel's rule over a settling batch: a cancelled item completes only on a valid answer, else fails cancelled."""

from __future__ import annotations

import pytest

from runner.model import FailureKind, FanOut, Settlement
from runner.rules.cancelling import settled

CANCELLED = FailureKind.CANCELLED
RETRY = Settlement(completed=[1], retry={2: (FailureKind.ITEM_INVALID, "no label")},
                   failed={3: (FailureKind.AUTH, "401", True)}, gave_up={4: (FailureKind.TRANSPORT, "503")},
                   split=[[5, 6], [7]])


@pytest.mark.parametrize("cancelled, completed, failed, retry, split", [
    ((), [1], {3: FailureKind.AUTH}, [2], [[5, 6], [7]]),
    ((1,), [1], {3: FailureKind.AUTH}, [2], [[5, 6], [7]]),
    ((2, 3), [1], {2: CANCELLED, 3: CANCELLED}, [], [[5, 6], [7]]),
    ((4, 5, 7), [1], {3: FailureKind.AUTH, 4: CANCELLED, 5: CANCELLED, 7: CANCELLED}, [2], [[6]]),
])
def test_a_cancelled_item_keeps_a_completion_and_fails_cancelled_instead_of_any_other_end(
    cancelled: tuple[int, ...], completed: list[int], failed: dict[int, FailureKind], retry: list[int],
    split: list[list[int]],
) -> None:
    after = settled(RETRY, cancelled)
    assert after.completed == completed
    assert {i: kind for i, (kind, _, _) in after.failed.items()} == failed
    assert (list(after.retry), after.split) == (retry, split)
    assert (4 in after.gave_up) is (4 not in cancelled)


def test_a_cancelled_item_says_what_its_batch_said_and_stays_retryable_by_a_person() -> None:
    assert settled(RETRY, [2]).failed[2] == (CANCELLED, "cancelled by a person; its batch finished: no label", True)


def test_a_cancelled_item_that_would_fan_out_makes_no_sub_item_and_goes_to_its_join_to_fail_there() -> None:
    fan = FanOut("split", "gather", "note", ('{"_chunk": 1}',), "{}")
    settlement = Settlement(completed=[1, 2], fan_out={1: fan, 2: fan})
    after = settled(settlement, [1])
    assert (after.completed, after.fan_out, after.next_stage) == ([1, 2], {2: fan}, {1: "gather"})
