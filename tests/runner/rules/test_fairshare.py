"""A worker's fair share of its run's concurrency: C split evenly over the run's live workers, rounded up."""

from __future__ import annotations

import pytest

from runner.rules import fairshare


@pytest.mark.parametrize("concurrency, workers, each", [
    (4, 1, 4), (1, 1, 1),  # one worker alone gets all of C
    (4, 0, 4),  # none counted (its own heartbeat not yet fresh): as one alone
    (2, 2, 1), (4, 2, 2), (5, 2, 3), (2, 3, 1), (1, 3, 1), (8, 3, 3),
])
def test_a_worker_shares_the_run_concurrency_evenly_with_the_live_workers_rounded_up(
    concurrency: int, workers: int, each: int
) -> None:
    assert fairshare.share(concurrency, workers) == each


@pytest.mark.parametrize("workers, mine, more", [
    (2, 0, 2), (2, 1, 1), (2, 2, 0),
    (2, 4, 0),  # a worker that held all of C when another joined starts nothing until it is under its share
    (1, 2, 2),  # the only worker left gets C back
])
def test_a_worker_starts_only_what_is_left_of_its_share(workers: int, mine: int, more: int) -> None:
    assert fairshare.room(4, workers=workers, mine=mine) == more
