"""The names the store, the CLI, the JSON output and the UIs share."""

from __future__ import annotations

from enum import StrEnum


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
UNFINISHED = (
    ItemState.PENDING,
    ItemState.QUEUED,
    ItemState.WAITING,
    ItemState.RUNNING,
    ItemState.RECEIVED,
)


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
