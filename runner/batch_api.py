"""The OpenAI Batch API's limits, and the batching a job of kind ``openai-batch`` gets by default.

A runner batch of kind ``openai-batch`` is one upstream batch: a JSONL file of
one request per item, at most ``REQUESTS`` lines and ``FILE_BYTES`` bytes.
The chat's defaults (25 items, 20,000 characters, 2 in flight) would make
10,000 items 400 batches run two at a time, each waiting hours upstream; so
a key the job's ``[batch]`` does not set takes the Batch API's own default:

| key           | default     | why                                                              |
|---------------|-------------|------------------------------------------------------------------|
| `max_items`   | 50,000      | the API's most requests a batch (more is refused: ``JobError``)  |
| `max_chars`   | 50,000,000  | 200 MB at 4 bytes a character, the most one takes in the file     |
|               |             | (UTF-8, or an escaped quote): a batch never outgrows its file on  |
|               |             | its items' text alone                                            |
| `concurrency` | 16          | batches wait upstream, not here: a slot costs a poll every        |
|               |             | max(10 s, 10 %), about 90 a day; a batch never mixes groups, so   |
|               |             | a year of monthly groups goes at once, with room. Past that the  |
|               |             | organisation's enqueued-token quota, not the runner, sets the    |
|               |             | pace (a batch refused for it waits and is sent again, unbilled;   |
|               |             | lower ``concurrency`` if that happens)                            |

A key the job sets is kept: a ``max_chars`` given caps a batch's text as it
does a chat call's. The prompt is repeated on every line, so a file may still
pass ``FILE_BYTES``; the provider then refuses it before sending anything
and the batch is split (:func:`too_large`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from typing import TYPE_CHECKING

from .errors import BadRequest, JobError

if TYPE_CHECKING:
    from .jobs import BatchLimits

KIND = "openai-batch"
#: The most requests (lines) one upstream batch may hold.
REQUESTS = 50_000
#: The most bytes its requests file may have (200 MB).
FILE_BYTES = 200_000_000
#: The most bytes one character of an item's text takes in the file.
BYTES_PER_CHAR = 4
#: Upstream batches in flight at once, unless the job says otherwise.
CONCURRENCY = 16
DEFAULTS = {"max_items": REQUESTS, "max_chars": FILE_BYTES // BYTES_PER_CHAR, "concurrency": CONCURRENCY}


def limits_for(kind: str, limits: BatchLimits, *, given: Collection[str], where: str) -> BatchLimits:
    """The job's batching for its provider ``kind``: the keys not ``given`` take the kind's defaults.

    A ``max_items`` over what one upstream batch may hold is a ``JobError`` naming the limit.
    """
    if kind != KIND:
        return limits
    limits = dataclasses.replace(limits, **{key: value for key, value in DEFAULTS.items() if key not in given})
    if limits.max_items > REQUESTS:
        raise JobError(f"{where}: 'max_items' must be at most {REQUESTS:,} for kind {KIND!r} (the Batch API takes "
                       f"at most {REQUESTS:,} requests a batch), not {limits.max_items:,}")
    return limits


def too_large(size: int) -> BadRequest | None:
    """The refusal of a requests file of ``size`` bytes over ``FILE_BYTES`` (split, nothing sent); None if it fits."""
    if size <= FILE_BYTES:
        return None
    return BadRequest(f"the batch's requests file would be {size:,} bytes, over the Batch API's {FILE_BYTES:,}: "
                      "nothing was sent, the batch is split", splittable=True, too_long=True)
