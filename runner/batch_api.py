"""The OpenAI Batch API's limits, and the batching a job of kind ``openai-batch`` gets by default.

(A job of kind ``anthropic-batch`` gets the same defaults from Anthropic's Message Batches API's own limits,
100,000 requests or 256 MB a batch: see :data:`KINDS`.)

A runner batch of kind ``openai-batch`` is one upstream batch: a JSONL file of
one request per item, at most ``REQUESTS`` lines and ``FILE_BYTES`` bytes.
The chat's defaults (25 items, 20,000 characters, 2 in flight) would make
10,000 items 400 batches run two at a time, each waiting hours upstream; so
a key the job's ``[batch]`` does not set takes the Batch API's own default:

| key           | default     | why                                                              |
|---------------|-------------|------------------------------------------------------------------|
| `max_items`   | 50,000      | the API's most requests a batch (more is refused: ``JobError``)  |
| `max_chars`   | 50,000,000  | 200 MB at 4 bytes a character; the file's own bound (below) is   |
|               |             | the one that binds                                               |
| `concurrency` | 16          | batches wait upstream, not here: a slot costs a poll every        |
|               |             | max(10 s, 10 %), about 90 a day; a batch never mixes groups, so   |
|               |             | a year of monthly groups goes at once, with room. Past that the  |
|               |             | organisation's enqueued-token quota, not the runner, sets the    |
|               |             | pace (a batch refused for it waits and is sent again, unbilled;   |
|               |             | lower ``concurrency`` if that happens)                            |

A key the job sets is kept: a ``max_chars`` given caps a batch's items' text
as it does a chat call's. Whatever the keys, a batch is formed so that its
requests file fits in ``FILE_BYTES`` (:class:`RequestsFile`): each item
counts as its whole line, the prompt, model and schema repeated on every line
(``line_bytes``, measured on the job's own prompt) plus ``BYTES_PER_CHAR``
bytes a character of the item (UTF-8, or a quote escaped twice: the item's
JSON inside the user message's string) and of its key again (the line's
``custom_id``). Only a key holding control characters (six bytes each as
``\\u00XX``) can make its line larger; a file that comes out larger is
refused before anything is sent and split by size, into as many parts as
it needs (:meth:`RequestsFile.refusal`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

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


class KindLimits(NamedTuple):
    """A submitting provider kind's own batching: the API's bounds and the defaults a job's ``[batch]`` may leave."""

    #: The API's name, as messages say it.
    api: str
    #: The most requests one upstream batch may hold.
    requests: int
    #: The most bytes its requests (a file, or a create's body) may have.
    file_bytes: int
    concurrency: int = CONCURRENCY

    def defaults(self) -> dict[str, int]:
        return {"max_items": self.requests, "max_chars": self.file_bytes // BYTES_PER_CHAR,
                "concurrency": self.concurrency}


#: Every kind with batching of its own (Anthropic's Message Batches: :mod:`runner.providers.anthropic_batch`).
KINDS: dict[str, KindLimits] = {
    KIND: KindLimits("Batch API", REQUESTS, FILE_BYTES),
    "anthropic-batch": KindLimits("Message Batches API", 100_000, 256_000_000),
}


def limits_for(kind: str, limits: BatchLimits, *, given: Collection[str], where: str) -> BatchLimits:
    """The job's batching for its provider ``kind``: the keys not ``given`` take the kind's defaults.

    A ``max_items`` over what one upstream batch may hold is a ``JobError`` naming the limit.
    """
    own = KINDS.get(kind)
    if own is None:
        return limits
    defaults: dict[str, Any] = {key: value for key, value in own.defaults().items() if key not in given}
    limits = dataclasses.replace(limits, **defaults)
    if limits.max_items > own.requests:
        raise JobError(f"{where}: 'max_items' must be at most {own.requests:,} for kind {kind!r} (the {own.api} "
                       f"takes at most {own.requests:,} requests a batch), not {limits.max_items:,}")
    return limits


@dataclass(frozen=True)
class RequestsFile:
    """How much of a requests file each item of a batch may take, so that the batch's file fits ``file_bytes``."""

    #: The bytes of one line besides its item: the prompt, the model, the schema, the line's own keys.
    line_bytes: int
    #: The most bytes the file may have (``FILE_BYTES``, as it is when the file is sized).
    file_bytes: int = dataclasses.field(default_factory=lambda: FILE_BYTES)
    #: The API whose bound it is, and what it calls the requests, as a refusal says them.
    api: str = "the Batch API"
    what: str = "requests file"

    def bytes_for(self, chars: int, key_chars: int) -> int:
        """The most bytes the line of an item of ``chars`` characters takes, its key of ``key_chars``.

        The key is in the line twice: in the item (counted in ``chars``) and as its ``custom_id``.
        """
        return self.line_bytes + BYTES_PER_CHAR * (chars + key_chars)

    def fits(self, size: int) -> bool:
        """Whether a file whose lines take at most ``size`` bytes in all fits."""
        return size <= self.file_bytes

    def refusal(self, size: int) -> BadRequest | None:
        """The refusal of a requests file of ``size`` bytes that does not fit; None if it fits.

        Nothing was sent: the batch is split into as many parts as its size needs
        (``BadRequest.parts``), each split again by its own size if still too large.
        """
        if self.fits(size):
            return None
        parts = math.ceil(size / self.file_bytes)
        return BadRequest(f"the batch's {self.what} would be {size:,} bytes, over {self.api}'s "
                          f"{self.file_bytes:,}: nothing was sent, the batch is split in {parts}",
                          splittable=True, too_long=True, parts=parts)
