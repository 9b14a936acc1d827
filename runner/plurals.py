"""A count and its noun, as every message spells it (:func:`runner.words.plural`): here apart, with no import, so
that the pure rules (:mod:`runner.rules`) spell counts the same way."""

from __future__ import annotations


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``1 item``, ``0 items``, ``2,400 items``; ``many`` where adding an s is wrong."""
    return f"{count:,} {noun if count == 1 else many or noun + 's'}"
