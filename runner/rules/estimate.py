"""The estimate of what a batch will cost, before its answer (or when its answer was lost).

| part   | tokens                                                         | at           |
|--------|----------------------------------------------------------------|--------------|
| input  | the batch's input characters / 4 (no tokenizer is used)        | input price  |
| output | items x the average output tokens per item answered so far in  | output price |
|        | the stage; before any answer, the job's expected_output_tokens |              |

A batch kind's discount applies to both. No price: the cost is unknown
(None), never 0. Used for what is in flight and for every unknown charge
(a call sent whose answer was lost), and by the budget guard.

Pure: the figures come in, the estimate goes out.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..pricing import Price
from ..usage import Usage

#: How input tokens are counted before the upstream says: said with every estimate shown.
COUNTED_BY = "characters / 4"
CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class Seen:
    """What a stage's answers used so far: output tokens over the items they answered (with usage)."""

    output_tokens: int = 0
    items: int = 0

    def per_item(self, expected: int) -> float:
        """The average output tokens per item answered, or ``expected`` before any answer."""
        return self.output_tokens / self.items if self.items else float(expected)


def input_tokens(chars: int) -> int:
    """Input tokens of ``chars`` characters, rounded up."""
    return -(-chars // CHARS_PER_TOKEN)


def tokens(*, chars: int, items: int, seen: Seen, expected_output_tokens: int) -> Usage:
    """The tokens a batch of ``items`` items and ``chars`` input characters is expected to use."""
    return Usage(input=input_tokens(chars), output=round(items * seen.per_item(expected_output_tokens)))


def cost(
    *, chars: int, items: int, seen: Seen, expected_output_tokens: int, price: Price | None, batch: bool
) -> float | None:
    """The estimated USD cost of a batch (or of calls whose answer was lost); None with no price."""
    if price is None:
        return None
    fresh, _, output = price.rates(batch=batch)
    return input_tokens(chars) * fresh + items * seen.per_item(expected_output_tokens) * output
