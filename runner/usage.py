"""What a call used, in tokens, as the upstream reported it: input, cached input, output and reasoning.

Read at the boundary from each upstream's shape: a chat completion's (and an
OpenAI Batch API line's) ``usage`` (``prompt_tokens``,
``prompt_tokens_details.cached_tokens``, ``completion_tokens``,
``completion_tokens_details.reasoning_tokens``), and an Anthropic message's
(``input_tokens``, ``cache_read_input_tokens``, ``output_tokens``). An
answer with no usage (a Python handler's) has none: its cost is unknown,
never zero.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Usage:
    """Tokens one call (or several, added up) used; ``cached_input`` is part of ``input``,
    ``reasoning`` part of ``output``."""

    input: int = 0
    cached_input: int = 0
    output: int = 0
    reasoning: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.input + other.input, self.cached_input + other.cached_input,
                     self.output + other.output, self.reasoning + other.reasoning)

    def as_dict(self) -> dict[str, int]:
        """The tokens as ``runner status --json`` shows them."""
        return {"input": self.input, "cached_input": self.cached_input, "output": self.output,
                "reasoning": self.reasoning}


def _count(table: Any, key: str) -> int:
    value = table.get(key) if isinstance(table, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def of_openai(body: Any) -> Usage | None:
    """The usage of a chat completion body (a response's or a Batch API line's); None when it has none."""
    usage = body.get("usage") if isinstance(body, dict) else None
    if not isinstance(usage, dict):
        return None
    return Usage(_count(usage, "prompt_tokens"), _count(usage.get("prompt_tokens_details"), "cached_tokens"),
                 _count(usage, "completion_tokens"), _count(usage.get("completion_tokens_details"), "reasoning_tokens"))


def of_anthropic(body: Any) -> Usage | None:
    """The usage of an Anthropic message (a response's or a Message Batches line's); None when it has none.

    Anthropic counts the input read from its cache and written to it apart from ``input_tokens``: all three are
    input here, the read part cached."""
    usage = body.get("usage") if isinstance(body, dict) else None
    if not isinstance(usage, dict):
        return None
    cached = _count(usage, "cache_read_input_tokens")
    whole = _count(usage, "input_tokens") + cached + _count(usage, "cache_creation_input_tokens")
    return Usage(whole, cached, _count(usage, "output_tokens"))


def total(usages: Iterable[Usage | None]) -> Usage | None:
    """The sum of the usages given; None when any is unknown (or none is given)."""
    summed: Usage | None = None
    for usage in usages:
        if usage is None:
            return None
        summed = usage if summed is None else summed + usage
    return summed
