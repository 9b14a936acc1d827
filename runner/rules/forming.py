"""How a batch is formed from the items next in line: the leading ones of one group that fit its limits.

The items next in line come highest priority first (``[batch]
priority_field``, ``runner prioritize``), so the leading items of the first
one's group are its group's highest; those of other groups between them are
passed over, not a reason to end the batch (a batch is one group). The
store reads a few more than a batch holds (:data:`OTHERS`) for them.

A pure rule: the store reads the candidates and writes what is decided here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

#: Items of other groups read beside a batch's worth, to pass over (an item of higher priority in another group).
OTHERS = 64

#: An item next in line: its id, group, characters, and its key's characters.
Candidate = tuple[int, str, int, int]


class RequestsFile(Protocol):
    """The file a batch's lines must fit (:class:`runner.batch_api.RequestsFile`)."""

    def bytes_for(self, chars: int, key_chars: int) -> int:
        """The most bytes the line of an item of ``chars`` characters, its key of ``key_chars``, takes."""
        ...

    def fits(self, size: int) -> bool:
        """Whether lines of ``size`` bytes in all fit."""
        ...


def fill(
    candidates: Sequence[Candidate], max_chars: int, file: RequestsFile | None, max_items: int | None = None
) -> tuple[str, list[int], int]:
    """The leading candidates of the first one's group (those of other groups passed over) that fit in
    ``max_items`` and ``max_chars`` (and their lines in ``file``): the group, their ids and their characters.
    None when the first is too large alone (:func:`too_large`)."""
    group = candidates[0][1]
    chosen: list[int] = []
    chars = size = 0
    for item_id, item_group, item_chars, key_chars in candidates:
        if item_group != group:
            continue
        line = 0 if file is None else file.bytes_for(item_chars, key_chars)
        full = max_items is not None and len(chosen) >= max_items
        if full or chars + item_chars > max_chars or (file is not None and not file.fits(size + line)):
            break
        chosen.append(item_id)
        chars += item_chars
        size += line
    return group, chosen, chars


def too_large(item: Candidate, max_chars: int, file: RequestsFile | None) -> str:
    """Why an item that no batch can hold (``fill`` chose none) fails with no call."""
    _, _, item_chars, key_chars = item
    if item_chars <= max_chars and file is not None:
        return (f"item is {item_chars} characters: its request line may take {file.bytes_for(item_chars, key_chars):,} "
                f"bytes with the prompt, more than a requests file may hold")
    return f"item is {item_chars} characters, over batch.max_chars ({max_chars})"
