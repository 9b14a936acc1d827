"""Per-kind retry limits (``[retry.transport]``, ``[retry.rate_limited]``) and ``SkipRetry``: the judge's table.

Attempts are counted from the first try (Asynq's ``MaxRetry`` + 1): an item
started with ``attempts_left`` n under ``[retry] max_attempts`` m has made
m - n tries, this one included.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from runner import errors
from runner.job_queue import KindRetry
from runner.jobs import RetryLimits
from runner.model import FailureKind
from runner.rules.judge import judge

NOW = 1_000.0


@dataclass(frozen=True)
class Item:
    id: int
    key: str
    attempts_left: int
    refused_streak: int = 0


def verdict(error: errors.UpstreamError, item: Item, limits: RetryLimits):  # type: ignore[no-untyped-def]
    return judge(0, [item], error, check=lambda result: None, rate_limited=0, limits=limits, now=NOW, jitter=0.5)


#: Three tries in all, two more for a transport failure, one for a 429 in a row.
LIMITS = RetryLimits(max_attempts=3, backoff=1.0, max_refusals=10, transport=KindRetry(max_attempts=5, backoff=30.0),
                     rate_limited=KindRetry(max_attempts=2, backoff=7.0))


@pytest.mark.parametrize("tries, retried", [(1, True), (3, True), (4, True), (5, False)])
def test_per_kind_limits_bound_transport_failures_by_their_own_max_attempts(tries: int, retried: bool) -> None:
    judged = verdict(errors.TransportError("503"), Item(1, "a", attempts_left=3 - tries), LIMITS)
    assert (1 in judged.retry, 1 in judged.gave_up) == (retried, not retried)


def test_per_kind_limits_give_a_transport_failure_its_own_back_off() -> None:
    assert verdict(errors.TransportError("503"), Item(1, "a", attempts_left=2), LIMITS).not_before == NOW + 30.0


def test_per_kind_limits_lower_than_the_retrys_give_up_sooner() -> None:
    limits = RetryLimits(max_attempts=5, transport=KindRetry(max_attempts=1))
    judged = verdict(errors.TransportError("503"), Item(1, "a", attempts_left=4), limits)
    assert judged.gave_up and not judged.retry


def test_per_kind_limits_bound_429s_in_a_row_and_wait_the_kinds_back_off() -> None:
    first = verdict(errors.RateLimited("429"), Item(1, "a", attempts_left=3, refused_streak=0), LIMITS)
    second = verdict(errors.RateLimited("429"), Item(1, "a", attempts_left=3, refused_streak=1), LIMITS)
    assert 1 in first.retry and first.not_before == NOW + 7.0  # 7 s x 2^0 x (0.5 + jitter 0.5)
    assert 1 in second.gave_up and "after 2 refusals in a row" in second.gave_up[1][1]


def test_per_kind_limits_leave_a_kind_without_its_own_to_the_retrys() -> None:
    limits = RetryLimits(max_attempts=3, backoff=2.0, rate_limited=KindRetry(max_attempts=9, backoff=50.0))
    judged = verdict(errors.TransportError("503"), Item(1, "a", attempts_left=1), limits)
    spent = verdict(errors.TransportError("503"), Item(1, "a", attempts_left=0), limits)
    assert judged.not_before == NOW + 2.0 and 1 in judged.retry
    assert spent.gave_up and not spent.retry


def test_skip_retry_fails_at_once_retryable_by_a_person_whatever_attempts_are_left() -> None:
    judged = verdict(errors.SkipRetry("cannot be read"), Item(1, "a", attempts_left=9), LIMITS)
    assert judged.failed == {1: (FailureKind.SKIPPED_RETRY, "cannot be read", True)}
    assert not judged.retry and not judged.gave_up and judged.breaker is None
