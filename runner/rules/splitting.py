"""How a batch is split to find the items at fault: halves once, then single items; a file too large, by size."""

from __future__ import annotations

from collections.abc import Sequence, Sized


def can_split(split_round: int, items: Sized) -> bool:
    """Whether a batch can still be split to find the items at fault: halves once, then single items."""
    return split_round < 2 and len(items) > 1


def halves_then_singles(split_round: int, ids: Sequence[int]) -> tuple[tuple[int, ...], ...]:
    """``ids`` in halves when the batch was never split, else one by one."""
    return parts(ids, 2) if split_round == 0 else parts(ids, len(ids))


def parts(ids: Sequence[int], count: int) -> tuple[tuple[int, ...], ...]:
    """``ids`` in ``count`` runs of as near the same length as can be (the first ones longer); none of none."""
    if not ids:
        return ()
    size, extra = divmod(len(ids), count)
    bounds = [n * size + min(n, extra) for n in range(count + 1)]
    return tuple(tuple(ids[start:end]) for start, end in zip(bounds, bounds[1:]) if end > start)
