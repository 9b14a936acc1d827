"""The nouns every layer shares: the states, the kinds, the moves an item may make, and the batch as formed.

The names of states and kinds are part of the contract (the CLI, the JSON output and the UIs show them).
:data:`MOVES` is the transition table: every move an item may make, from which states to which, and which of
its fields the move sets and clears. The store's one writer of item state (``runner.store.items.move``) makes
each move by this table and no other. The immutable records are named tuples, cheaper to define than
dataclasses (every command's cold start defines them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from .rules.breaker import Control
    from .rules.streaks import Move as StreakMove


class ItemState(StrEnum):
    """Where one item stands. The seven names are part of the contract."""

    PENDING = "pending"
    QUEUED = "queued"
    WAITING = "waiting"
    RUNNING = "running"
    RECEIVED = "received"
    COMPLETED = "completed"
    FAILED = "failed"


#: States in which an item still needs work from some engine.
UNFINISHED = (ItemState.PENDING, ItemState.QUEUED, ItemState.WAITING, ItemState.RUNNING, ItemState.RECEIVED)


class FailureKind(StrEnum):
    """Why an item failed or waits; the names are part of the contract."""

    TRANSPORT = "transport"
    RATE_LIMITED = "rate_limited"
    BATCH_INVALID = "batch_invalid"
    ITEM_INVALID = "item_invalid"
    AUTH = "auth"
    BILLING = "billing"
    PERMISSION = "permission"
    BAD_REQUEST = "bad_request"
    NOT_FOUND = "not_found"
    INPUT_CHANGED = "input_changed"
    STORE = "store"
    #: A person cancelled the item (``runner cancel``): retried only when named.
    CANCELLED = "cancelled"
    #: A person rejected the item at a ``decide`` stage.
    REJECTED = "rejected"
    #: One of the item's sub-items failed (a fan-out joined without ``allow_failures``).
    SUB_ITEM_FAILED = "sub_item_failed"
    #: A Python handler raised ``SkipRetry``: failed at once, never re-attempted by the engine (a person may retry).
    SKIPPED_RETRY = "skipped_retry"
    #: The run's breaker opened at its budget (``[budget]``): the kind of a stop, never of an item's failure.
    BUDGET = "budget"


#: The kinds an item may fail with: ``budget`` is a run's stop alone.
ITEM_FAILURE_KINDS = tuple(kind for kind in FailureKind if kind is not FailureKind.BUDGET)


class BreakerState(StrEnum):
    """The breaker: normal, one batch at a time, or no new batches."""

    CLOSED = "closed"
    PROBING = "probing"
    OPEN = "open"


class BatchState(StrEnum):
    """A batch's life: formed, in flight, then done (whatever its items' fate)."""

    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"


class Hold(StrEnum):
    """Whether a person must look at a sent item before the engine may touch it again."""

    #: Nothing to wait for.
    NONE = "none"
    #: Sent before a crash, its fate unknown: held for a person's confirmation.
    CONFIRM = "confirm"
    #: A person confirmed it: the engine polls (or looks for) its task, sending nothing again.
    CONFIRMED = "confirmed"
    #: Waiting at a ``decide`` stage for a person's approve or reject (no time: not the engine's to try).
    DECIDE = "decide"
    #: A fanned-out item (a parent) waiting at its join stage for its sub-items to settle.
    JOIN = "join"
    #: Scheduled: an item whose input names a time to send it at (``[schedule]``), waiting for that time alone
    #: (no back-off, no failure): told apart from a retry's wait in every count.
    SCHEDULED = "scheduled"


class Move(NamedTuple):
    """An allowed move: items in one of ``origins`` (and ``from_hold``) go to ``to`` (and ``to_hold``).

    ``sets`` and ``clears`` name the item's fields the move writes: every other field keeps its value.
    ``per_batch``: the move is logged once for its batch (the batch path), else once per item.
    """

    origins: frozenset[ItemState]
    to: ItemState
    sets: frozenset[str] = frozenset()
    clears: frozenset[str] = frozenset()
    #: The hold the items must be in (None: any).
    from_hold: Hold | None = None
    #: The hold the move leaves them in (None: as it was).
    to_hold: Hold | None = None
    per_batch: bool = False


def _move(origins: str, to: ItemState, *, sets: str = "", clears: str = "", from_hold: Hold | None = None,
          to_hold: Hold | None = None, per_batch: bool = False) -> Move:
    return Move(frozenset(ItemState(o) for o in origins.split()), to, frozenset(sets.split()),
                frozenset(clears.split()), from_hold, to_hold, per_batch)


#: Every move an item may make. The error fields are ``error_kind``, ``error`` and ``retryable``.
MOVES: dict[str, Move] = {
    # The batch path: formed, started, answered, completed.
    "claim": _move("pending waiting", ItemState.QUEUED, sets="batch_id", per_batch=True),
    "start": _move("queued", ItemState.RUNNING, sets="attempts", from_hold=Hold.NONE, per_batch=True),
    # An answer is kept whatever the hold: the engine that took a run over may hold the items of a
    # batch whose answer then comes to the engine it took the run from.
    "receive": _move("running", ItemState.RECEIVED, sets="output paid_calls refused_streak tokens_in tokens_out cost",
                     clears="work", to_hold=Hold.NONE, per_batch=True),
    # The work a one-stage job's result answers is saved as it completes (``runner.reusing``; a pipeline's with its
    # row of ``results``); every other move that sets or clears the output clears it.
    "complete": _move("received", ItemState.COMPLETED, sets="work", clears="error_kind error retryable",
                      to_hold=Hold.NONE, per_batch=True),
    # Reused (``[cache] reuse``): the validated result of the same work, found at the claim, saved as the answer,
    # with no call and nothing billed; completed (or sent on) from there as any answer is.
    "reuse": _move("pending waiting", ItemState.RECEIVED, sets="batch_id output reused", clears="work",
                   per_batch=True),
    # The boundary between stages: a stage's result saved (in ``results``), the item pending at the next
    # stage, with a fresh budget of attempts and refusals there.
    "next_stage": _move("received", ItemState.PENDING, sets="stage retry_base refused_streak",
                        clears="batch_id output work error_kind error retryable not_before", to_hold=Hold.NONE),
    # A fan-out: the item's result saved, the item waiting at its join stage for as many sub-items as it
    # fanned out to (``sub_items_left``, counted down as each settles); then joined, by one of three ends.
    "fan_out": _move("received", ItemState.WAITING, sets="stage retry_base refused_streak sub_items_left",
                     clears="batch_id output work error_kind error retryable not_before", to_hold=Hold.JOIN),
    "join": _move("waiting", ItemState.PENDING, sets="stage retry_base refused_streak", from_hold=Hold.JOIN,
                  to_hold=Hold.NONE),
    "join_last": _move("waiting", ItemState.COMPLETED, sets="output", clears="work", from_hold=Hold.JOIN,
                       to_hold=Hold.NONE),
    "join_failed": _move("waiting", ItemState.FAILED, sets="error_kind error retryable", from_hold=Hold.JOIN,
                         to_hold=Hold.NONE),
    # A parent a person retried (pending at its join) waits there again before it is joined.
    "rejoin": _move("pending", ItemState.WAITING, to_hold=Hold.JOIN),
    # ... and one whose sub-item was sent again (a person's retry, a re-run's changed stage inside its fan-out),
    # joined, failed or gone on past its join, waits there again, its results from the join on forgotten.
    "reopen": _move("completed failed pending waiting", ItemState.WAITING, sets="stage retry_base refused_streak",
                    clears="batch_id output work error_kind error retryable not_before", to_hold=Hold.JOIN),
    "split": _move("running received", ItemState.QUEUED, sets="batch_id", per_batch=True),
    # A verdict's other ends.
    "retry": _move("running received", ItemState.WAITING, sets="error_kind error retryable not_before",
                   to_hold=Hold.NONE),
    "fail": _move("running received", ItemState.FAILED, sets="error_kind error retryable", to_hold=Hold.NONE),
    "give_up": _move("running received", ItemState.FAILED, sets="error_kind error retryable not_before",
                     to_hold=Hold.NONE),
    "too_large": _move("pending waiting", ItemState.FAILED, sets="error_kind error retryable"),
    # A run started again whose stages changed: an item whose results no longer stand goes to the first stage
    # whose result it lacks or holds stale, pending there with a fresh budget: a completed one, one pending or
    # waiting after a stage that changed, and one left at a stage the job no longer has, whatever it was doing
    # there (its answer, its hold, its failure were that stage's).
    "rewind": _move("completed pending waiting received running failed", ItemState.PENDING,
                    sets="stage retry_base refused_streak",
                    clears="batch_id output work error_kind error retryable not_before", to_hold=Hold.NONE),
    # ... or, when every stage it needs has its result, it completes at the last it passed, that stage's result
    # its output (one completed at a stage gone moves there); counted and logged per item, with why.
    "finish": _move("pending waiting received running failed completed", ItemState.COMPLETED, sets="stage output",
                    clears="batch_id work error_kind error retryable not_before", to_hold=Hold.NONE),
    # ... and a failed item stays failed (a person's retry sends it) at the stage it must go through again: one
    # a person failed at a stage gone, or one failed after a stage whose result went stale.
    "restage": _move("failed", ItemState.FAILED, sets="stage"),
    # ... and a result its stage's changed output schema refuses now fails there as invalid, its answer kept.
    "refuse_result": _move("completed pending waiting failed", ItemState.FAILED, sets="stage output error_kind error "
                           "retryable", clears="batch_id work not_before", to_hold=Hold.NONE),
    # A scheduled item (``[schedule]``): waiting for its time, given again when its input names another; due,
    # pending (the claim makes this move for the items whose time came, before it forms a batch).
    "schedule": _move("pending waiting", ItemState.WAITING, sets="not_before", to_hold=Hold.SCHEDULED),
    "due": _move("waiting", ItemState.PENDING, clears="not_before", from_hold=Hold.SCHEDULED, to_hold=Hold.NONE),
    # Holding for a person, and what a person's confirmation releases.
    "hold": _move("running", ItemState.RUNNING, from_hold=Hold.NONE, to_hold=Hold.CONFIRM),
    "confirm": _move("running", ItemState.RUNNING, from_hold=Hold.CONFIRM, to_hold=Hold.CONFIRMED),
    "resume": _move("running", ItemState.RUNNING, from_hold=Hold.CONFIRMED, to_hold=Hold.NONE),
    "resend": _move("running", ItemState.PENDING, sets="error", clears="batch_id error_kind",
                    from_hold=Hold.CONFIRM, to_hold=Hold.NONE),
    # What an engine gives back: formed but unsent, or started but never sent.
    "unqueue": _move("queued", ItemState.PENDING, clears="batch_id"),
    "unsent": _move("running", ItemState.PENDING, clears="batch_id"),
    # A person's retry of failed items, with a fresh attempt budget.
    "retry_failed": _move("failed", ItemState.PENDING, sets="retry_base refused_streak",
                          clears="batch_id error_kind error retryable not_before", to_hold=Hold.NONE),
    # A new input for an item: an old result never stands for it.
    "input_changed": _move("running received completed", ItemState.FAILED, sets="error_kind error retryable",
                           to_hold=Hold.NONE),
    "input_changed_join": _move("waiting", ItemState.FAILED, sets="error_kind error retryable", from_hold=Hold.JOIN,
                                to_hold=Hold.NONE),
    "input_fixed": _move("failed", ItemState.PENDING, sets="retry_base refused_streak",
                         clears="error_kind error retryable"),
    # A person's cancel: items not in flight fail at once (and a sent one whose engine is gone, or whose
    # call was given back unsent); an item in flight is marked (its error kind ``cancelled``, its state
    # kept) and fails when its batch settles, unless its answer completes it.
    "cancel": _move("pending queued waiting running received", ItemState.FAILED, sets="error_kind error retryable",
                    to_hold=Hold.NONE),
    # An item of an upstream task that may still run (its id saved, or its create sent), cancelled with no
    # engine to poll it (or held for a person): marked, and released to the next engine's poll, which
    # cancels the task upstream and settles the lines it ran.
    "cancel_task": _move("running", ItemState.RUNNING, sets="error_kind error", to_hold=Hold.CONFIRMED),
    "cancel_running": _move("running", ItemState.RUNNING, sets="error_kind error", from_hold=Hold.NONE),
    "cancel_received": _move("received", ItemState.RECEIVED, sets="error_kind error"),
    # A ``decide`` stage: an item pending there waits for a person (no time); an approval saves its data as the
    # stage's result and moves it on (pending at the next stage, or completed past the last, its output the data);
    # a rejection fails it (kind ``rejected``, retryable by a person: it comes back to wait at the stage).
    "await_decision": _move("pending", ItemState.WAITING, clears="batch_id not_before", from_hold=Hold.NONE,
                            to_hold=Hold.DECIDE),
    "approve": _move("waiting", ItemState.PENDING, sets="stage retry_base refused_streak",
                     clears="batch_id output work error_kind error retryable not_before", from_hold=Hold.DECIDE,
                     to_hold=Hold.NONE),
    "approve_last": _move("waiting", ItemState.COMPLETED, sets="output",
                          clears="batch_id work error_kind error retryable not_before", from_hold=Hold.DECIDE,
                          to_hold=Hold.NONE),
    "reject": _move("waiting", ItemState.FAILED, sets="error_kind error retryable", from_hold=Hold.DECIDE,
                    to_hold=Hold.NONE),
}


class Batch(NamedTuple):
    """A batch as formed: its id, group and item count."""

    id: int
    group: str
    size: int
    chars: int
    #: How often the items were split: 0 as formed, 1 halves, 2 single items.
    round: int = 0
    #: Sent before a crash and confirmed by a person: poll its task, send nothing again.
    resume: bool = False
    #: The stage the batch works (every item of a batch is at its stage).
    stage: str = ""
    #: Its items took the results of the same work (``[cache] reuse``), received with no call: validate and settle.
    reused: bool = False


class Claim(NamedTuple):
    """What forming a batch of one stage takes: the stage, its limits, and the requests file its lines must fit."""

    #: None: any stage (a job without ``[[stage]]``, whose one stage is whatever its items are labelled).
    stage: str | None
    max_items: int
    max_chars: int
    #: A :class:`runner.batch_api.RequestsFile` for a stage whose provider sends one, else None.
    file: Any = None
    #: A :class:`runner.reusing.Reuse` for a stage that reuses the results of the same work, else None.
    reuse: Any = None


class StartedItem(NamedTuple):
    """An item marked running, with what must be sent for it."""

    id: int
    key: str
    input: str
    #: Attempts left before this one counts against the bound (a person's retry resets it).
    attempts_left: int
    #: Tries of this item the upstream refused in a row, before this one.
    refused_streak: int = 0
    #: The results of the stages it passed, as a JSON object ``{stage: result}``.
    results: str = "{}"


class Skip(NamedTuple):
    """A stage an item skips: its own ``when`` false, or inside a fan-out whose ``when`` is false (up to the join)."""

    stage: str
    fan_out: str = ""  # the fan-out it was skipped with ("": its own ``when`` is false)


class FanOut(NamedTuple):
    """An item's fan-out, as the engine decided it at the boundary: the sub-items it makes, where they start,
    and the stage where it waits for them."""

    #: The fan-out stage, and the join stage the parent waits at.
    stage: str
    join: str
    #: The stage the sub-items start at (pending there).
    first: str
    #: Each sub-item's input (the parent's, with its element under ``_chunk``), as JSON, in order.
    inputs: tuple[str, ...]
    #: The fan-out stage's result the sub-items keep (its list left out), as JSON.
    result: str


@dataclass
class Settlement:
    """How a batch ends, item by item, as the store applies it in one transaction."""

    #: Items whose saved output passed validation: completed, with that output as their result.
    completed: list[int] = field(default_factory=list)
    #: Of those, the items that go on: item id -> the next stage (pending there); the others completed.
    next_stage: dict[int, str] = field(default_factory=dict)
    #: Item id -> the stages it skips on its way on (their ``when``, or their fan-out's, false): in its history.
    skipped: dict[int, tuple[Skip, ...]] = field(default_factory=dict)
    #: Of the completed, the items that fan out: item id -> its fan-out (waiting at the join, its sub-items added).
    fan_out: dict[int, FanOut] = field(default_factory=dict)
    #: The fingerprint of the batch's stage, saved with each result in a pipeline ("": one stage, no result saved
    #: apart: the item's output is its result).
    fingerprint: str = ""
    #: item id -> the work its result answers (``runner.reusing.work``), saved with it.
    works: dict[int, str] = field(default_factory=dict)
    #: item id -> (kind, message): tried again after ``not_before``.
    retry: dict[int, tuple[FailureKind, str]] = field(default_factory=dict)
    #: item id -> (kind, message, retryable by a person).
    failed: dict[int, tuple[FailureKind, str, bool]] = field(default_factory=dict)
    #: item id -> (kind, message): failed, retryable by a person, their attempts spent (the store adds the tally).
    gave_up: dict[int, tuple[FailureKind, str]] = field(default_factory=dict)
    #: Item ids to send again at once in new, smaller batches (a wholly invalid answer).
    split: list[list[int]] = field(default_factory=list)
    #: Items whose call may have been billed with no answer to show for it.
    maybe_paid: set[int] = field(default_factory=set)
    #: Items whose try the upstream refused before running anything (a 429; nothing billed).
    refused: set[int] = field(default_factory=set)
    #: Items whose call the upstream refused, or a task's line it never ran: a charge not billed each (the ledger).
    not_billed: set[int] = field(default_factory=set)
    not_before: float = 0.0
    #: How this batch moves the breaker, applied to its state inside the same transaction.
    breaker: Callable[[Control], Control] | None = None
    #: No batch starts before this time (a 429's Retry-After): kept by the run's shared queue, if it has one.
    quiet_until: float = 0.0
    #: How this batch moves the run's streaks (``runner.rules.streaks``) in the same transaction, opening its breaker.
    streak: StreakMove | None = None


class Holder(NamedTuple):
    """A worker on a run (an engine holding its lease): its process, host, last heartbeat and token."""

    pid: int
    host: str
    heartbeat_at: float
    token: str = ""


class Case(StrEnum):
    """How a held item can be recovered, and what it may cost."""

    POLL = "poll"
    ADOPT = "adopt"
    RESUBMIT = "resubmit"

    @property
    def warning(self) -> str:
        return {
            Case.POLL: "polls the task already submitted: no new task, no new charge",
            Case.ADOPT: "looks for the task it may have created and polls it (no new charge); "
            "if there is none once a create sent then can no longer land, sends the items again, "
            "which cannot charge twice",
            Case.RESUBMIT: "sends the items again: the first call may have run, so this may run and charge twice",
        }[self]

    @property
    def may_charge_twice(self) -> bool:
        return self is Case.RESUBMIT


class HeldItem(NamedTuple):
    """An item held for a person's confirmation, and why."""

    key: str
    group: str
    case: Case
    task_id: str | None
    attempts: int
    paid_calls: int
    #: ``adopt``: until when the create whose answer was lost may still land upstream.
    lands_by: float | None = None


class Retried(NamedTuple):
    """What a person's retry did: the failed items sent again, and how many of them wait again for a decision
    (rejected at a decide stage, they go back to waiting there, not to ``pending``)."""

    again: int
    deciding: int = 0

    @property
    def pending(self) -> int:
        return self.again - self.deciding
