"""The judge, rule by rule: split, retry only the invalid, classify every failure, the bounds, the streaks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from runner import batch_api, errors
from runner.protocol import ParsedBatch
from runner.rules.breaker import Control, Open, TransportFailure, after_success
from runner.rules.judge import (
    MISSING_LINE,
    NEVER_CREATED,
    Answered,
    Finished,
    Lines,
    NotCreated,
    Stop,
    Verdict,
    judge,
    judge_saved,
    whole_answer_problem,
)
from runner.rules.streaks import AllInvalid, Move, Refused, Reset
from runner.jobs import RetryLimits
from runner.model import BreakerState, FailureKind

NOW = 1_000.0
BATCH_INVALID, ITEM_INVALID = FailureKind.BATCH_INVALID, FailureKind.ITEM_INVALID


@dataclass(frozen=True)
class Item:
    id: int
    key: str
    attempts_left: int = 2
    refused_streak: int = 0


#: The job's retry limits, as the engine passes them (back-off 1 s, at most 60 s, 10 refusals in a row).
Limits = RetryLimits


def items(count: int, **fields: Any) -> list[Item]:
    return [Item(i, f"k{i}", **fields) for i in range(1, count + 1)]


def labelled(result: Any) -> str | None:
    """The check of these tests: a result needs a label."""
    return None if "label" in result else "result has no label"


def verdict(finished: Finished, batch: list[Item] | None = None, *, split_round: int = 0,
            rate_limited: int = 0, jitter: float = 0.5, limits: Limits = Limits()) -> Verdict:
    return judge(split_round, items(4) if batch is None else batch, finished, check=labelled, rate_limited=rate_limited,
                 limits=limits, now=NOW, jitter=jitter)


GOOD = {"label": "question"}


@pytest.mark.parametrize("split_round, size, split", [
    (0, 4, ((1, 2), (3, 4))),
    (0, 5, ((1, 2, 3), (4, 5))),
    (1, 3, ((1,), (2,), (3,))),
    (2, 4, ()),
    (0, 1, ()),
])
def test_a_wholly_invalid_answer_splits_once_in_halves_then_into_single_items(
    split_round: int, size: int, split: tuple[tuple[int, ...], ...]
) -> None:
    judged = verdict(Answered({}, "answer is not JSON"), items(size), split_round=split_round)
    assert judged.split == split
    assert judged.retry == ({} if split else {i: (BATCH_INVALID, "answer is not JSON") for i in range(1, size + 1)})
    assert (judged.completed, judged.failed, judged.breaker) == ((), {}, after_success)


def test_the_attempt_bound_keeps_an_item_with_no_attempt_left_out_of_a_split() -> None:
    batch = [Item(1, "k1", 0), Item(2, "k2", 1), Item(3, "k3", 1), Item(4, "k4", 0)]
    judged = verdict(Answered({}, "empty answer"), batch)
    assert (judged.split, judged.retry) == (((2,), (3,)), {})
    assert judged.gave_up == {1: (BATCH_INVALID, "empty answer (gave up"), 4: (BATCH_INVALID, "empty answer (gave up")}


def test_only_the_invalid_items_are_retried() -> None:
    contradicted = {"k3": 'the answer gave 2 results for id "k3"'}
    answer = Answered({1: GOOD, 2: {"note": "no label"}, 4: GOOD}, None, contradicted)
    judged = verdict(answer, items(5))
    assert judged.completed == (1, 4)
    assert judged.retry == {
        2: (ITEM_INVALID, "result has no label"),
        3: (ITEM_INVALID, 'the answer gave 2 results for id "k3"'),
        5: (ITEM_INVALID, "the answer has no result for this id"),
    }
    assert (judged.split, judged.failed, judged.not_before, judged.breaker) == ((), {}, NOW + 1.0, after_success)


@pytest.mark.parametrize("parsed, finish_reason, problem", [
    (ParsedBatch({"k1": GOOD}, None), "length", None),
    (ParsedBatch({}, None, {"k1": "disagree"}), None, None),
    (ParsedBatch({}, None), "stop", "no result carries an id of this batch"),
    (ParsedBatch({}, None), "length", "no result carries an id of this batch (finish_reason: length)"),
    (ParsedBatch({}, "empty answer"), None, "empty answer"),
    (ParsedBatch({}, "empty answer"), "content_filter", "empty answer (finish_reason: content_filter)"),
])
def test_an_answer_with_no_result_of_the_batch_is_wholly_invalid_and_says_how_it_ended(
    parsed: ParsedBatch, finish_reason: str | None, problem: str | None
) -> None:
    assert whole_answer_problem(parsed, finish_reason) == problem


RETRYABLE = [
    (errors.TransportError("503 sick"), TransportFailure("503 sick")),
    (errors.SubmitUnknown("create lost"), TransportFailure("create lost")),
    (errors.RateLimited("429 slow down", retry_after=30), None),
]
FAILING = [
    (errors.AuthError("401 bad key"), True, Stop(FailureKind.AUTH, "auth: 401 bad key")),
    (errors.BillingError("402 no credit"), True, Stop(FailureKind.BILLING, "billing: 402 no credit")),
    (errors.PermissionDenied("403 no"), True, Stop(FailureKind.PERMISSION, "permission: 403 no")),
    (errors.NotFound("404 no such task"), False, None),
    (errors.OutputInvalid("not JSON at all"), True, None),
]


@pytest.mark.parametrize("error, move", RETRYABLE)
def test_transport_trouble_and_rate_limits_are_retried_later(error: errors.UpstreamError, move: Any) -> None:
    judged = verdict(error)
    assert judged.retry == {i: (error.kind, error.message) for i in range(1, 5)}
    assert (judged.failed, judged.completed, judged.breaker, judged.stop) == ({}, (), move, None)


@pytest.mark.parametrize("error, retryable, stop", FAILING)
def test_every_other_failure_fails_the_items_with_its_kind_and_credentials_balance_permission_stop_the_run(
    error: errors.UpstreamError, retryable: bool, stop: Stop | None
) -> None:
    judged = verdict(error, items(2))
    assert judged.failed == {1: (error.kind, error.message, retryable), 2: (error.kind, error.message, retryable)}
    assert (judged.retry, judged.stop, judged.refused) == ({}, stop, frozenset())
    assert judged.breaker == (Open(stop.kind, stop.reason) if stop else None)
    if stop:
        assert judged.breaker is not None and judged.breaker(Control()).breaker is BreakerState.OPEN


@pytest.mark.parametrize("error, refused", [
    (errors.RateLimited("429"), True), (errors.BadRequest("400 bad", splittable=True), True),
    (errors.BadRequest("400 bad"), True), (errors.TransportError("503"), False), (errors.AuthError("401"), False),
])
def test_refusals_count_apart_from_attempts(error: errors.UpstreamError, refused: bool) -> None:
    assert verdict(error, items(1)).refused == (frozenset({1}) if refused else frozenset())


@pytest.mark.parametrize("split_round, size, split", [(0, 4, ((1, 2), (3, 4))), (1, 2, ((1,), (2,)))])
def test_a_400_a_smaller_batch_might_pass_splits_the_batch(
    split_round: int, size: int, split: tuple[tuple[int, ...], ...]
) -> None:
    refusal = errors.BadRequest("400 context_length_exceeded", splittable=True)
    judged = verdict(refusal, items(size), split_round=split_round)
    assert (judged.split, judged.failed, judged.retry, judged.stop, judged.streak) == (split, {}, {}, None, None)
    assert judged.refused == frozenset(range(1, size + 1))


@pytest.mark.parametrize("split_round, batch", [(0, items(1)), (2, items(3))])
def test_a_400_fails_the_item_alone_or_once_it_can_be_split_no_more(split_round: int, batch: list[Item]) -> None:
    refusal = errors.BadRequest("400 context_length_exceeded", splittable=True)
    judged = verdict(refusal, batch, split_round=split_round)
    assert judged.failed == {item.id: (FailureKind.BAD_REQUEST, refusal.message, False) for item in batch}
    assert (judged.split, judged.stop, judged.streak) == ((), None, Refused(refusal.reason, refusal.message))


@pytest.mark.parametrize("split_round, size, parts, split", [
    (0, 7, 3, ((1, 2, 3), (4, 5), (6, 7))),  # as many parts as the size needs, not halves
    (1, 4, 2, ((1, 2), (3, 4))),  # split before: still by size, never into single items
    (5, 2, 3, ((1,), (2,))),  # no more parts than items
])
def test_a_requests_file_too_large_splits_by_size_into_the_parts_it_needs_at_any_round(
    split_round: int, size: int, parts: int, split: tuple[tuple[int, ...], ...]
) -> None:
    refusal = batch_api.RequestsFile(line_bytes=0).refusal(batch_api.FILE_BYTES * parts - 1)
    assert refusal is not None and refusal.parts == parts
    judged = verdict(refusal, items(size), split_round=split_round)
    assert (judged.split, judged.failed, judged.retry, judged.stop) == (split, {}, {}, None)


def test_a_requests_file_too_large_for_one_item_fails_it() -> None:
    refusal = batch_api.RequestsFile(line_bytes=0).refusal(batch_api.FILE_BYTES + 1)
    assert refusal is not None
    judged = verdict(refusal, items(1), split_round=3)
    assert judged.failed == {1: (FailureKind.BAD_REQUEST, refusal.message, False)} and judged.split == ()


def test_a_400_no_batch_would_pass_fails_the_batch_at_once_retryable_by_a_person() -> None:
    judged = verdict(errors.BadRequest("400 invalid schema"), items(3))
    assert judged.failed == {i: (FailureKind.BAD_REQUEST, "400 invalid schema", True) for i in range(1, 4)}
    assert judged.split == ()


def test_a_400_no_batch_would_pass_moves_the_runs_streak_of_refusals_with_its_gist() -> None:
    judged = verdict(errors.BadRequest("400 unknown parameter 7"), items(2), rate_limited=3)
    assert judged.streak == Refused("# unknown parameter #", "400 unknown parameter 7")
    assert (judged.rate_limited, judged.stop, judged.breaker) == (3, None, None)  # the store decides the stop


@pytest.mark.parametrize("in_a_row, jitter, wait", [
    (0, 0.0, 0.5), (0, 0.5, 1.0), (0, 0.999, 1.499), (1, 0.5, 2.0), (3, 0.0, 4.0), (3, 0.999, 11.992),
    (6, 0.0, 32.0), (6, 0.5, 60.0), (40, 0.0, 60.0),
])
def test_429_back_off_doubles_with_each_in_a_row_jittered_within_half_and_one_and_a_half(
    in_a_row: int, jitter: float, wait: float
) -> None:
    judged = verdict(errors.RateLimited("429"), rate_limited=in_a_row, jitter=jitter)
    assert judged.not_before == judged.quiet_until == pytest.approx(NOW + wait)
    assert (judged.rate_limited, judged.streak) == (in_a_row + 1, None)


def test_a_429_waits_the_time_the_upstream_gave_and_no_batch_starts_before_it() -> None:
    judged = verdict(errors.RateLimited("429", retry_after=30), rate_limited=5, jitter=0.9)
    assert (judged.not_before, judged.quiet_until, judged.rate_limited) == (NOW + 30, NOW + 30, 6)
    assert verdict(errors.TransportError("503", retry_after=7)).not_before == NOW + 7


@pytest.mark.parametrize("finished, streak, rate_limited", [
    (Answered({1: GOOD}), Reset(), 0),
    (Answered({}, "empty answer"), Reset(), 0),
    (Lines({1: GOOD}, answered={"k1"}), None, 4),
    (NotCreated(), None, 4),
    (errors.TransportError("503"), None, 4),
])
def test_an_answer_ends_the_streaks_and_nothing_else_does(finished: Finished, streak: Move | None,
                                                            rate_limited: int) -> None:
    judged = verdict(finished, rate_limited=4)
    assert (judged.streak, judged.rate_limited) == (streak, rate_limited)


def test_a_task_judges_each_line_on_its_own() -> None:
    lines = Lines(
        {1: GOOD, 2: {"note": "x"}},
        answered={"k1", "k2", "k3"},
        errors={"k4": errors.RateLimited("429 line"), "k5": errors.TransportError("500 line"),
                "k6": errors.BadRequest("400 line")},
    )
    judged = verdict(lines, items(7))
    assert judged.completed == (1,)
    assert judged.retry == {
        2: (ITEM_INVALID, "result has no label"),
        3: (ITEM_INVALID, "the answer has no usable result for this id"),
        4: (FailureKind.RATE_LIMITED, "429 line"),
        5: (FailureKind.TRANSPORT, "500 line"),
    }
    assert judged.failed == {
        6: (FailureKind.BAD_REQUEST, "400 line", False), 7: (FailureKind.NOT_FOUND, MISSING_LINE, True),
    }
    assert (judged.refused, judged.maybe_paid, judged.breaker) == (frozenset({4}), frozenset({7}), after_success)


def test_a_task_never_created_is_sent_again_at_once_with_nothing_to_pay_twice() -> None:
    judged = verdict(NotCreated(), items(2))
    assert judged.retry == {1: (FailureKind.TRANSPORT, NEVER_CREATED), 2: (FailureKind.TRANSPORT, NEVER_CREATED)}
    assert (judged.not_before, judged.breaker, judged.maybe_paid) == (NOW, None, frozenset())


def test_saved_outputs_are_validated_locally() -> None:
    judged = judge_saved(items(4), {1: '{"label": "x"}', 2: None, 3: '{"note": "x"}', 4: "null"}, check=lambda r: (
        "result is not a JSON object" if not isinstance(r, dict) else labelled(r)), limits=Limits(), now=NOW)
    assert judged.completed == (1,)
    assert judged.retry == {
        2: (ITEM_INVALID, "the saved answer has no usable result for it"),
        3: (ITEM_INVALID, "result has no label"),
        4: (ITEM_INVALID, "result is not a JSON object"),
    }
    assert (judged.not_before, judged.breaker) == (NOW + 1.0, None)


RATE_LIMITED = errors.RateLimited("429 slow down", retry_after=5.0)
TRANSPORT_FAILURE = errors.TransportError("connection reset")


@pytest.mark.parametrize("failure, attempts_left, refused_streak, gives_up", [
    # A try that may have cost: the bound is max_attempts.
    (TRANSPORT_FAILURE, 1, 0, None),
    (TRANSPORT_FAILURE, 0, 0, "connection reset (gave up"),
    (TRANSPORT_FAILURE, 0, 9, "connection reset (gave up"),
    # A refused try (a 429: nothing ran) gives its attempt back; the bound is max_refusals in a row.
    (RATE_LIMITED, 0, 0, None),
    (RATE_LIMITED, 0, 8, None),
    (RATE_LIMITED, 2, 9, "429 slow down (gave up after 10 refusals in a row, nothing billed for them"),
])
def test_the_attempt_bound_counts_tries_that_may_have_cost_and_refusals_in_a_row(
    failure: errors.UpstreamError, attempts_left: int, refused_streak: int, gives_up: str | None
) -> None:
    judged = verdict(failure, items(1, attempts_left=attempts_left, refused_streak=refused_streak))
    if gives_up is None:
        assert (1 in judged.retry, judged.gave_up) == (True, {})
    else:
        assert (judged.retry, judged.gave_up) == ({}, {1: (failure.kind, gives_up)})


def test_an_invalid_saved_output_gives_up_when_its_attempts_are_spent() -> None:
    judged = judge_saved(items(2, attempts_left=0), {1: '{"label": "x"}', 2: '{"note": "x"}'}, check=labelled,
                         limits=Limits(), now=NOW)
    assert (judged.completed, judged.retry) == ((1,), {})
    assert judged.gave_up == {2: (ITEM_INVALID, "result has no label (gave up")}


NO_LABEL = Answered({1: {"note": "x"}, 2: {"note": "y"}})


@pytest.mark.parametrize("answer, streak", [
    (NO_LABEL, AllInvalid("result has no label")),
    # A valid result, or one item alone, ends the streak.
    (Answered({1: {"label": "x"}, 2: {"note": "y"}}), Reset()),
    (Answered({1: {"note": "x"}}), Reset()),
])
def test_every_result_invalid_for_one_reason_moves_the_runs_streak_of_such_answers(
    answer: Answered, streak: Move
) -> None:
    judged = verdict(answer, items(len(answer.results)))
    assert (judged.streak, judged.stop, judged.breaker) == (streak, None, after_success)  # the store decides the stop
