"""Which items of a finished call were *not billed*: the upstream refused the call, or a task's line, before
running anything.

| how the call finished                         | not billed                                        |
|-----------------------------------------------|---------------------------------------------------|
| a refusal (4xx, 429, quota: ``refused``)      | every item of the batch                           |
| a task's lines                                | the items whose line the upstream never ran: an   |
|                                               | expired or cancelled Batch API line, Anthropic's  |
|                                               | errored, canceled and expired lines               |
| an answer, a task never created, a transport  | none (billed, no call at all, or unknown: counted |
| failure                                       | where the answer was lost)                        |

Pure.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import UpstreamError
from .judge import Lines, Started


def not_billed(items: Sequence[Started], finished: object) -> frozenset[int]:
    """The ids of ``items`` whose call ``finished`` refused before running: a charge not billed each."""
    if isinstance(finished, UpstreamError):
        return frozenset(item.id for item in items) if finished.refused and not finished.maybe_billed else frozenset()
    if isinstance(finished, Lines):
        return frozenset(item.id for item in items
                         if (error := finished.errors.get(item.key)) is not None and error.refused)
    return frozenset()
