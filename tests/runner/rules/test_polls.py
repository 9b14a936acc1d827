"""The poll schedule: a task's end is noticed within max(10 s, 10 % of the time waited so far)."""

from __future__ import annotations

import pytest

from runner.jobs import RetryLimits
from runner.rules import polls


@pytest.mark.parametrize("waited, pause", [
    (0.0, 1.0),
    (1.0, 1.0),
    (2.0, 1.0),
    (3.0, 1.5),
    (10.0, 5.0),
    (20.0, 10.0),
    (50.0, 10.0),
    (100.0, 10.0),
    (1_000.0, 100.0),
    (86_400.0, 8_640.0),
])
def test_the_pause_grows_with_the_time_waited_and_never_past_ten_seconds_or_ten_percent(
    waited: float, pause: float
) -> None:
    assert polls.pause(waited) == pytest.approx(pause)


@pytest.mark.parametrize("waited, failures, pause", [
    (0.0, 1, 1.0),
    (0.0, 2, 2.0),
    (0.0, 3, 4.0),
    (0.0, 8, 60.0),
    (1_000.0, 1, 100.0),
    (1_000.0, 8, 100.0),
])
def test_after_failed_polls_the_pause_is_at_least_the_request_back_off(
    waited: float, failures: int, pause: float
) -> None:
    assert polls.pause(waited, failures=failures, limits=RetryLimits(backoff=1.0, max_backoff=60.0)) == pause


@pytest.mark.parametrize("ends_at", [0.0, 0.5, 1.9, 2.0, 4.9, 7.0, 10.0, 33.0, 99.0, 101.0, 3_599.0, 50_000.0, 86_399.0])
def test_a_task_is_noticed_within_max_ten_seconds_or_ten_percent_of_its_time(ends_at: float) -> None:
    noticed = next(t for t in polls.schedule(86_400.0) if t >= ends_at)
    assert noticed - ends_at <= polls.lag_bound(ends_at)


@pytest.mark.parametrize("seconds, most", [(5.0, 6), (60.0, 13), (3_600.0, 55), (86_400.0, 88)])
def test_polls_per_task_stay_few(seconds: float, most: int) -> None:
    assert len(polls.schedule(seconds)) <= most
