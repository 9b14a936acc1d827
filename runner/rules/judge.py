"""The judge: what a finished call means for each item of its batch, one function for every provider kind.

A call (``openai-chat``, a Python handler), a submitted task (``openai-batch``,
a Python submit/poll pair) and a saved answer after a crash all end in one
of these, and :func:`judge` gives its :class:`Verdict`:

| how the call finished                  | verdict                                                       |
|----------------------------------------|---------------------------------------------------------------|
| an answer, some results valid          | those completed; only the invalid or missing re-attempted     |
| an answer wholly invalid               | split in halves once, then single items; alone, re-attempted  |
| every result invalid for one reason,   | the run stops for a person (``item_invalid``): the job and    |
| three answers of the run in a row      | the model disagree, and every further call would pay for none |
| transport failure (after its retries)  | re-attempted later; the breaker counts it                     |
| rate limited (429)                     | re-attempted at the upstream's time, else after a back-off    |
|                                        | that doubles with each 429 in a row, with jitter; a refusal,  |
|                                        | so it counts against ``max_refusals``, not ``max_attempts``;  |
|                                        | no batch starts before that time                              |
| bad request (400) a smaller batch      | split until the item refused is alone; alone, it fails        |
| might pass                             |                                                               |
| a requests file too large (refused     | split by size into the parts it needs, at any round, never    |
| before sending)                        | into single items for that; an item alone fails               |
| bad request that no batch would pass   | the batch fails; the same refusal twice in a row stops the    |
|                                        | run                                                           |
| credentials, balance, permission, an   | the items fail, retryable by a person; the breaker opens and  |
| unknown model                          | the run stops                                                 |
| any other failure (not found, a        | the items fail, with the failure's kind                       |
| handler's ``SkipRetry``, ...)          | (``skipped_retry``: retryable by a person, never by the run)  |
| a task's lines                         | each line on its own: a result is checked, an error judged by |
|                                        | its kind, a missing line fails as maybe paid                  |
| a task never created                   | sent again at once: nothing ran, nothing to pay twice         |

The attempt bound is the last step of every verdict (:func:`bounded`): an
item to re-attempt whose tries that may have cost reach ``max_attempts`` (its
failure kind's own, ``[retry.transport]`` or ``[retry.rate_limited]``, when
set; its back-off too), or
whose refusals in a row reach ``max_refusals``, gives up instead (failed,
retryable by a person; the store adds its tally of attempts and paid calls
to the message). The judge never splits an item whose attempts are spent.

Pure: how the call moves the run's streaks goes out with the verdict, the
store applying it and deciding the stop (:mod:`runner.rules.streaks`); the
worker's rate limits in a row come in and their new count goes out; the time
and the jitter (a number in [0, 1) the engine drew) are passed in.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from ..errors import BadRequest, UpstreamError
from ..protocol import ParsedBatch
from ..model import FailureKind
from . import splitting
from .bounds import Backoff, bounded
from .breaker import Control, Open, TransportFailure, after_success
from .streaks import AllInvalid, Move, Refused, Reset, Stop, stopping

MISSING_LINE = (
    "the finished task has no line for this item: it may have run and been billed; "
    "runner retry sends it again, which may charge twice"
)
NEVER_CREATED = "the batch was never created upstream: it is sent again, which cannot charge twice"
#: Failures worth another attempt on their own: the upstream was sick or busy, not the items wrong.
TRANSIENT = (FailureKind.TRANSPORT, FailureKind.RATE_LIMITED)

Check = Callable[[Any], str | None]

class Started(Protocol):
    """An item of the batch, as it was started (``runner.store.StartedItem``)."""

    @property
    def id(self) -> int: ...

    @property
    def key(self) -> str: ...

    @property
    def attempts_left(self) -> int: ...

    @property
    def refused_streak(self) -> int: ...


@dataclass(frozen=True)
class Answered:
    """A call's answer, read: each item's result by item id, what was wrong as a whole, and keys it contradicted."""

    results: Mapping[int, Any]
    problem: str | None = None
    contradictions: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Lines:
    """A finished task, line by line: usable results by item id, the keys it answered, and errors by key."""

    results: Mapping[int, Any]
    answered: Collection[str] = ()
    errors: Mapping[str, UpstreamError] = field(default_factory=dict)


@dataclass(frozen=True)
class NotCreated:
    """A task that the upstream never created (confirmed after a crash, or not sent): nothing reached it."""

    why: str = NEVER_CREATED


#: How a call finished: its answer, its task's lines, no task at all, or a classified failure.
Finished = Answered | Lines | NotCreated | UpstreamError


@dataclass(frozen=True)
class Verdict:
    """What a finished call means for each item, for the breaker and for the run.

    The store applies the items' part and the breaker's move in one
    transaction (as a ``runner.store.Settlement``), with the move of the run's
    streaks and the stop it calls for; the engine keeps ``rate_limited``,
    waits out ``quiet_until`` and heeds ``stop``.
    """

    #: Items whose result passed the check: completed, with their saved output as the result.
    completed: tuple[int, ...] = ()
    #: item id -> (kind, message): tried again after ``not_before``, within the attempt bound.
    retry: Mapping[int, tuple[FailureKind, str]] = field(default_factory=dict)
    #: item id -> (kind, message, retryable by a person).
    failed: Mapping[int, tuple[FailureKind, str, bool]] = field(default_factory=dict)
    #: item id -> (kind, message): would be re-attempted, but its attempts (or refusals in a row) are spent.
    gave_up: Mapping[int, tuple[FailureKind, str]] = field(default_factory=dict)
    #: Item ids sent again at once in new, smaller batches.
    split: tuple[tuple[int, ...], ...] = ()
    #: Items whose call may have been billed with no answer to show for it.
    maybe_paid: frozenset[int] = frozenset()
    #: Items whose try the upstream refused before running anything: counted against ``max_refusals``.
    refused: frozenset[int] = frozenset()
    not_before: float = 0.0
    #: How the call moves the breaker.
    breaker: Callable[[Control], Control] | None = None
    #: How the call moves the run's streaks (None: it leaves them as they are).
    streak: Move | None = None
    #: The worker's calls the upstream refused in a row for its rate limit, after this call: the back-off, when the
    #: upstream gives no time, doubles with each.
    rate_limited: int = 0
    #: No batch of the run starts before this time (0: no quiet asked for).
    quiet_until: float = 0.0
    #: The run stops for a person, whatever the streaks say (an unknown model, a refused key...).
    stop: Stop | None = None


def judge(
    split_round: int,
    items: Sequence[Started],
    finished: Finished,
    *,
    check: Check,
    rate_limited: int,
    limits: Backoff,
    now: float,
    jitter: float,
    started_closed: bool = False,
) -> Verdict:
    """The verdict on a batch's ``items`` (split ``split_round`` times already) once its call ``finished``.

    ``check`` says what is wrong with one result, or None when it is valid; ``started_closed``: the call
    started while the breaker was closed (:func:`runner.rules.breaker.after_transport_failure`).
    """
    verdict = _by_kind(split_round, items, finished, check, rate_limited, limits, now, jitter, started_closed)
    return bounded(verdict, items, limits)


def _by_kind(split_round: int, items: Sequence[Started], finished: Finished, check: Check, rate_limited: int,
             limits: Backoff, now: float, jitter: float, started_closed: bool) -> Verdict:
    """The verdict before the attempt bound."""
    if isinstance(finished, Answered):
        answered = _answered(split_round, items, finished, check, not_before=now + limits.backoff)
        return _systematic(answered)
    if isinstance(finished, Lines):
        return _lines(items, finished, check, rate_limited=rate_limited, not_before=now + limits.backoff)
    if isinstance(finished, NotCreated):
        return Verdict(retry={item.id: (FailureKind.TRANSPORT, finished.why) for item in items},
                       not_before=now, rate_limited=rate_limited)
    limits = limits.of(finished.kind)
    not_before = now + (finished.retry_after if finished.retry_after is not None else limits.backoff)
    if isinstance(finished, BadRequest) and not finished.stops_run:
        return _refused_request(split_round, items, finished, rate_limited=rate_limited, not_before=not_before)
    return _failed(items, finished, rate_limited=rate_limited, not_before=not_before, limits=limits, now=now,
                   jitter=jitter, started_closed=started_closed)


def judge_saved(
    items: Sequence[Started], outputs: Mapping[int, str | None], *, check: Check, limits: Backoff, now: float
) -> Verdict:
    """The verdict on items a stopped engine received but did not validate: each saved output checked, no call.

    ``outputs``: item id -> its saved output (JSON), or None when the answer held no usable result for it.
    """
    completed: list[int] = []
    retry: dict[int, tuple[FailureKind, str]] = {}
    for item_id, output in outputs.items():
        if output is None:
            retry[item_id] = (FailureKind.ITEM_INVALID, "the saved answer has no usable result for it")
        else:
            _check(item_id, json.loads(output), check, completed, retry)
    return bounded(Verdict(completed=tuple(completed), retry=retry, not_before=now + limits.backoff), items, limits)


def whole_answer_problem(parsed: ParsedBatch, finish_reason: str | None) -> str | None:
    """Why the answer as a whole cannot be used, or None when some results belong to the batch."""
    problem = parsed.problem
    if problem is None and not parsed.results and not parsed.contradictions:
        problem = "no result carries an id of this batch"
    if problem is None or not finish_reason or finish_reason == "stop":
        return problem
    return f"{problem} (finish_reason: {finish_reason})"


def _answered(
    split_round: int, items: Sequence[Started], answer: Answered, check: Check, *, not_before: float
) -> Verdict:
    """An answer: valid results completed, the others re-attempted; a wholly invalid one split. Streaks end."""
    completed: list[int] = []
    retry: dict[int, tuple[FailureKind, str]] = {}
    halves: tuple[tuple[int, ...], ...] = ()
    if answer.problem is not None:
        retry, halves = _split_or_retry(split_round, items, answer.problem)
    for item in items:
        if item.id in answer.results:
            _check(item.id, answer.results[item.id], check, completed, retry)
        elif answer.problem is None:
            why = answer.contradictions.get(item.key, "the answer has no result for this id")
            retry[item.id] = (FailureKind.ITEM_INVALID, why)
    return Verdict(completed=tuple(completed), retry=retry, split=halves, not_before=not_before, breaker=after_success,
                   streak=Reset())


def _systematic(verdict: Verdict) -> Verdict:
    """An answer whose every result is invalid for one reason: one more in the run's streak of them.

    The same reason for every result (two or more) of
    :data:`runner.rules.streaks.INVALID_IN_A_ROW` answers in a row says the job
    and the model disagree (a schema the model does not follow, a check no
    answer passes): every further call would pay for nothing, so the run
    stops for a person (breaker open, ``item_invalid``) before every item has
    paid ``max_attempts`` calls.
    """
    whys = set(verdict.retry.values())
    if verdict.completed or verdict.split or len(whys) != 1 or len(verdict.retry) < 2:  # one item says little
        return verdict
    ((kind, reason),) = whys
    if kind is not FailureKind.ITEM_INVALID:
        return verdict
    return replace(verdict, streak=AllInvalid(reason))


def _split_or_retry(
    split_round: int, items: Sequence[Started], problem: str
) -> tuple[dict[int, tuple[FailureKind, str]], tuple[tuple[int, ...], ...]]:
    """A wholly invalid answer: split into halves once, then single items, then plain re-attempts.

    An item with no attempt left is re-attempted (the bound makes it give up), never split again.
    """
    can_split = splitting.can_split(split_round, items)
    alive = [item.id for item in items if item.attempts_left > 0]
    retry = {item.id: (FailureKind.BATCH_INVALID, problem) for item in items
             if item.attempts_left <= 0 or not can_split}
    return retry, splitting.halves_then_singles(split_round, alive) if can_split and alive else ()


def _check(
    item_id: int, result: Any, check: Check, completed: list[int], retry: dict[int, tuple[FailureKind, str]]
) -> None:
    """Complete an item whose result is valid; re-attempt it otherwise."""
    problem = check(result)
    if problem is None:
        completed.append(item_id)
    else:
        retry[item_id] = (FailureKind.ITEM_INVALID, problem)


def _lines(items: Sequence[Started], lines: Lines, check: Check, *, rate_limited: int, not_before: float) -> Verdict:
    """A finished task: its answered lines were billed; each item completes, waits or fails on its own."""
    completed: list[int] = []
    retry: dict[int, tuple[FailureKind, str]] = {}
    failed: dict[int, tuple[FailureKind, str, bool]] = {}
    refused: set[int] = set()
    maybe_paid: set[int] = set()
    for item in items:
        error = lines.errors.get(item.key)
        if item.id in lines.results:
            _check(item.id, lines.results[item.id], check, completed, retry)
        elif error is not None and error.kind in TRANSIENT:
            retry[item.id] = (error.kind, error.message)
            if error.refused:
                refused.add(item.id)
        elif error is not None:
            failed[item.id] = (error.kind, error.message, error.retryable)
        elif item.key in lines.answered:
            retry[item.id] = (FailureKind.ITEM_INVALID, "the answer has no usable result for this id")
        else:
            failed[item.id] = (FailureKind.NOT_FOUND, MISSING_LINE, True)
            maybe_paid.add(item.id)
    return Verdict(completed=tuple(completed), retry=retry, failed=failed, maybe_paid=frozenset(maybe_paid),
                   refused=frozenset(refused), not_before=not_before, breaker=after_success, rate_limited=rate_limited)


def _refused_request(
    split_round: int, items: Sequence[Started], exc: BadRequest, *, rate_limited: int, not_before: float
) -> Verdict:
    """A 400 (nothing ran, nothing billed): split to find the item refused; only one alone fails.

    A refusal that is not about the batch's content (an unknown model, say)
    fails the batch at once; the same reason for two batches of the run in a
    row stops it for a person (:func:`runner.rules.streaks.moved`): every
    further call would be refused too.
    """
    refused = frozenset(item.id for item in items)
    if exc.parts and len(items) > 1:  # too large a file: by size, however often it was split
        return Verdict(split=splitting.parts([item.id for item in items], min(exc.parts, len(items))), refused=refused,
                       not_before=not_before, rate_limited=rate_limited)
    if exc.splittable and splitting.can_split(split_round, items):
        return Verdict(split=splitting.halves_then_singles(split_round, [item.id for item in items]), refused=refused,
                       not_before=not_before, rate_limited=rate_limited)
    failed = {item.id: (FailureKind.BAD_REQUEST, exc.message, not exc.splittable) for item in items}
    if exc.too_long:  # about these items alone: it says nothing of the next call
        return Verdict(failed=failed, refused=refused, not_before=not_before, rate_limited=rate_limited)
    return Verdict(failed=failed, refused=refused, not_before=not_before, rate_limited=rate_limited,
                   streak=Refused(exc.reason, exc.message))


def _failed(
    items: Sequence[Started], exc: UpstreamError, *, rate_limited: int, not_before: float, limits: Backoff,
    now: float, jitter: float, started_closed: bool,
) -> Verdict:
    """No usable answer: wait and re-attempt, or fail (and stop the run), by the failure's kind."""
    retry = {item.id: (exc.kind, exc.message) for item in items}
    if exc.kind is FailureKind.TRANSPORT:
        return Verdict(retry=retry, not_before=not_before, rate_limited=rate_limited,
                       breaker=TransportFailure(exc.message, started_closed))
    if exc.kind is FailureKind.RATE_LIMITED:
        rate_limited += 1
        until = now + _rate_limit_wait(exc.retry_after, rate_limited, limits, jitter)
        return Verdict(retry=retry, refused=frozenset(retry), not_before=until, rate_limited=rate_limited,
                       quiet_until=until)
    failed = {item.id: (exc.kind, exc.message, exc.retryable or exc.stops_run) for item in items}
    verdict = Verdict(failed=failed, not_before=not_before, rate_limited=rate_limited)
    return _stopping(verdict, exc.kind, exc.message) if exc.stops_run else verdict


def _stopping(verdict: Verdict, kind: FailureKind, message: str) -> Verdict:
    """``verdict``, and the run stops for a person: every further call would fail alike; the breaker opens."""
    stop = stopping(kind, message)
    return replace(verdict, breaker=Open(kind, stop.reason), stop=stop)


def _rate_limit_wait(retry_after: float | None, in_a_row: int, limits: Backoff, jitter: float) -> float:
    """How long to wait after a 429: the upstream's time, else a back-off doubling with each in a row, jittered."""
    if retry_after is not None:
        return retry_after
    delay = limits.backoff * 2.0 ** min(in_a_row - 1, 30) * (0.5 + jitter)
    return min(delay, limits.max_backoff)
