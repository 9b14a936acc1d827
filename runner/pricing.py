"""What tokens cost: a job's ``price`` for its provider, or the built-in table of common models; USD.

``[provider] price = { input = 0.15, cached_input = 0.075, output = 0.60,
per = 1_000_000, batch_discount = 0.5 }`` (a stage's ``[stage.provider]``
inherits it, as every provider key) overrides the table below. A model in
neither has no price: its cost is unknown, shown as unknown, never 0. The
batch kinds (``openai-batch``, ``anthropic-batch``) take ``batch_discount``
off (0.5 unless given). Cached input, not given, costs as input.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import JobError
from .job_values import shown
from .usage import Usage

CURRENCY = "USD"
#: When the figures of :data:`BUILT_IN` were taken from the providers' price pages (per million tokens).
TAKEN = "2025-10"
#: The provider kinds that pay the batch price (``batch_discount`` off).
BATCH_KINDS = ("openai-batch", "anthropic-batch")
KEYS = ("input", "cached_input", "output", "per", "batch_discount")


@dataclass(frozen=True)
class Price:
    """USD per ``per`` tokens; ``cached_input`` None: as ``input``; ``batch_discount`` the part the batch kinds
    take off (None: 0.5)."""

    input: float
    output: float
    cached_input: float | None = None
    per: float = 1_000_000
    batch_discount: float | None = None

    def rates(self, *, batch: bool) -> tuple[float, float, float]:
        """USD per token of input, cached input and output, the batch discount taken off for ``batch``."""
        factor = (1 - (0.5 if self.batch_discount is None else self.batch_discount)) if batch else 1.0
        cached = self.input if self.cached_input is None else self.cached_input
        return (self.input * factor / self.per, cached * factor / self.per, self.output * factor / self.per)

    def cost(self, usage: Usage, *, batch: bool) -> tuple[float, float]:
        """What ``usage`` cost: its input part (cached input at its rate) and its output part."""
        fresh, cached, output = self.rates(batch=batch)
        return ((usage.input - usage.cached_input) * fresh + usage.cached_input * cached, usage.output * output)


#: Standard (not batch) prices, USD per million tokens, of models whose figures are sure, as of :data:`TAKEN`.
BUILT_IN: dict[str, Price] = {
    "gpt-4o-mini": Price(0.15, 0.60, 0.075),
    "gpt-4o": Price(2.50, 10.00, 1.25),
    "gpt-4.1": Price(2.00, 8.00, 0.50),
    "gpt-4.1-mini": Price(0.40, 1.60, 0.10),
    "gpt-4.1-nano": Price(0.10, 0.40, 0.025),
    "o3-mini": Price(1.10, 4.40, 0.55),
    "o4-mini": Price(1.10, 4.40, 0.275),
    "claude-3-5-haiku-latest": Price(0.80, 4.00, 0.08),
    "claude-haiku-4-5": Price(1.00, 5.00, 0.10),
    "claude-sonnet-4-0": Price(3.00, 15.00, 0.30),
    "claude-sonnet-4-5": Price(3.00, 15.00, 0.30),
    "claude-opus-4-1": Price(15.00, 75.00, 1.50),
}


def read(table: Mapping[str, Any], where: str) -> Price | None:
    """A job's ``price`` table as a Price (None for an empty one), or a plain JobError naming the bad value."""
    if not table:
        return None
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise JobError(f"{where}: price has no key {unknown[0]!r} (keys: {', '.join(KEYS)})")
    for key in ("input", "output"):
        if key not in table:
            raise JobError(f"{where}: price needs {key!r} (USD per 'per' tokens)")
    values: dict[str, float] = {}
    for key, value in table.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < float("inf"):
            raise JobError(f"{where}: price {key!r} must be a number at least 0, not {shown(value)}")
        values[key] = float(value)
    if values.get("per", 1) <= 0:
        raise JobError(f"{where}: price 'per' must be more than 0")
    if values.get("batch_discount", 0) > 1:
        raise JobError(f"{where}: price 'batch_discount' is the part taken off: at most 1")
    return Price(**values)


def price_of(price: Mapping[str, Any], model: str) -> Price | None:
    """A provider's price: the job's ``price`` table, else the built-in one's for ``model`` (exactly, or a dated
    snapshot of it such as ``gpt-4o-mini-2024-07-18``)."""
    given = read(price, "[provider]")
    if given is not None:
        return given
    if model in BUILT_IN:
        return BUILT_IN[model]
    base = model.rsplit("-", 3)[0] if model.count("-") >= 3 and model[-10:].replace("-", "").isdigit() else model
    return BUILT_IN.get(base)


def charged(price: Price | None, usage: Usage | None, *, kind: str) -> tuple[float, float] | None:
    """What a call reporting ``usage`` cost at ``price`` for a provider of ``kind``: input and output parts; None
    when either is unknown."""
    if price is None or usage is None:
        return None
    return price.cost(usage, batch=kind in BATCH_KINDS)


def money(figure: float | None) -> str:
    """A figure as the views show it: ``$0.0123``, or ``unknown``."""
    if figure is None:
        return "unknown"
    return f"${figure:,.4f}" if figure < 100 else f"${figure:,.2f}"


def unpriced(model: str) -> str:
    """Why a provider's cost is unknown: no price for its model."""
    return f"no price for {model} ([provider] price)"
