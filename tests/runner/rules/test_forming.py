"""Forming and splitting batches: pure rules, the store only reads and writes what they decide."""

from __future__ import annotations

import pytest

from runner import batch_api
from runner.rules import forming, splitting


@pytest.mark.parametrize("split_round", [0, 1, 2])
def test_no_items_split_are_no_parts(split_round: int) -> None:
    assert splitting.halves_then_singles(split_round, []) == ()
    assert splitting.parts([], 0) == splitting.parts([], 3) == ()


def test_a_batch_takes_the_leading_items_of_one_group_while_their_lines_fit_the_file() -> None:
    file = batch_api.RequestsFile(line_bytes=100, file_bytes=1_000)  # 10 characters, a key of 4: 156 bytes; 6 fit
    candidates = [(n, "a", 10, 4) for n in range(9)] + [(9, "b", 10, 4)]
    assert forming.fill(candidates, 10_000, file) == ("a", list(range(6)), 60)
    assert forming.fill(candidates, 35, None) == ("a", [0, 1, 2], 30)


def test_a_batch_takes_its_groups_highest_priority_items_passing_over_other_groups_between_them() -> None:
    candidates = [(1, "b", 10, 4), (2, "a", 10, 4), (3, "b", 10, 4), (4, "b", 10, 4), (5, "a", 10, 4)]
    assert forming.fill(candidates, 10_000, None, 2) == ("b", [1, 3], 20)
    assert forming.fill(candidates, 25, None) == ("b", [1, 3], 20)


def test_an_item_no_batch_can_hold_says_which_bound_it_passes() -> None:
    file = batch_api.RequestsFile(line_bytes=100)
    assert forming.too_large((1, "a", 50, 5), 40, file) == "item is 50 characters, over batch.max_chars (40)"
    assert forming.too_large((1, "a", 50, 5), 400, file) == ("item is 50 characters: its request line may take 320 bytes with "
                                                "the prompt, more than a requests file may hold")
