"""What a run cost, from its ledger and its job's prices: spent, unknown, in flight, and the tokens; USD.

- *spent*: the billed calls at the price of their stage when they were
  answered; unknown (None, with the reason) when a billed call reported no
  usage or its model has no price: never 0 for what is not known;
- *unknown*: the calls sent whose answer was lost, at their estimate
  (:mod:`runner.rules.estimate`);
- *in flight*: the batches running now, at their estimate.

A view over :class:`runner.store.ledger.StageLedger` rows: no SQL here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import pricing, usage
from .rules import estimate
from .usage import Usage

if TYPE_CHECKING:
    from .store.ledger import StageLedger


@dataclass(frozen=True)
class Cost:
    """A run's (or one stage's) cost: each figure None when unknown, ``reasons`` saying why."""

    spent: float | None = 0.0
    unknown: float | None = 0.0
    in_flight: float | None = 0.0
    tokens: Usage = Usage()
    billed: int = 0
    not_billed: int = 0
    unknown_calls: int = 0
    #: Results taken from the same work with no call (``[cache] reuse``): not billed.
    reused: int = 0
    reasons: tuple[str, ...] = ()
    stages: dict[str, Cost] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        """``runner status --json``'s ``cost``."""
        data: dict[str, Any] = {
            "spent": self.spent, "unknown": self.unknown, "in_flight": self.in_flight,
            "currency": pricing.CURRENCY, "tokens": self.tokens.as_dict(),
            "charges": {"billed": self.billed, "not_billed": self.not_billed, "unknown": self.unknown_calls},
            "reason": "; ".join(self.reasons) or None, "estimated_by": estimate.COUNTED_BY,
        }
        if len(self.stages) > 1:
            data["stages"] = {name: stage.as_json() for name, stage in self.stages.items()}
        return data


def _sum(figures: Iterable[float | None]) -> float | None:
    total = 0.0
    for figure in figures:
        if figure is None:
            return None
        total += figure
    return total


@dataclass(frozen=True)
class Terms:
    """What a stage's provider charges by, as its job was saved: its kind, model and price (``[provider]``)."""

    kind: str
    model: str
    price: Mapping[str, Any] = field(default_factory=dict)
    expected_output_tokens: int = 200


def terms(job_json: str) -> dict[str, Terms]:
    """Each stage's terms from a run's saved job, read as JSON (a status parses no job); "" keys the top level's,
    for a stage the job no longer names. A store that saved no job (schema 8's ``{}``) has none."""
    try:
        data = json.loads(job_json)
    except ValueError:
        return {}
    saved = [("", data.get("provider"))] + [(s.get("name"), s.get("provider")) for s in data.get("stages") or []]
    return {name: Terms(str(p.get("kind", "openai-chat")), str(p.get("model", "")), p.get("price") or {},
                        int(p.get("expected_output_tokens", 200)))
            for name, p in saved if isinstance(name, str) and isinstance(p, dict)}


def of_stage(row: StageLedger, terms: Terms | None) -> Cost:
    """One stage's cost: its ledger row at its provider's price (no terms, or no price: unknown)."""
    price = pricing.price_of(terms.price, terms.model) if terms is not None else None
    reasons = [] if price is not None else [pricing.unpriced(terms.model if terms else "a run whose job is not saved")]
    if price is not None and row.uncosted:
        reasons.append(f"{row.uncosted} billed item-calls reported no usage")
    seen = estimate.Seen(row.usage.output, row.tokened)
    batch = terms is not None and terms.kind in pricing.BATCH_KINDS
    expected = terms.expected_output_tokens if terms is not None else 200

    def guess(chars: int, items: int) -> float | None:
        return estimate.cost(chars=chars, items=items, seen=seen, price=price, batch=batch,
                             expected_output_tokens=expected) if items else 0.0

    return Cost(
        spent=row.cost if price is not None and not row.uncosted else (None if row.billed else 0.0),
        unknown=guess(row.unknown_chars, row.unknown), in_flight=guess(row.running_chars, row.running_items),
        tokens=row.usage, billed=row.billed, not_billed=row.not_billed, unknown_calls=row.unknown, reused=row.reused,
        reasons=tuple(reasons) if row.billed or row.unknown or row.running_items else (),
    )


def of_run(rows: Sequence[StageLedger], job_json: str) -> Cost:
    """A run's cost from its ledger rows and its saved job: every stage's added up (unknown if any stage's is),
    each stage's kept."""
    saved = terms(job_json)
    stages = {row.stage: of_stage(row, saved.get(row.stage, saved.get(""))) for row in rows}
    parts = list(stages.values())
    return Cost(
        spent=_sum(c.spent for c in parts), unknown=_sum(c.unknown for c in parts),
        in_flight=_sum(c.in_flight for c in parts), tokens=usage.total(c.tokens for c in parts) or Usage(),
        billed=sum(c.billed for c in parts), not_billed=sum(c.not_billed for c in parts),
        unknown_calls=sum(c.unknown_calls for c in parts), reused=sum(c.reused for c in parts),
        reasons=tuple(dict.fromkeys(r for c in parts for r in c.reasons)), stages=stages,
    )


def money(figure: float | None) -> str:
    """A figure as the views show it: ``$0.0123``, or ``unknown``."""
    if figure is None:
        return "unknown"
    return f"${figure:,.4f}" if figure < 100 else f"${figure:,.2f}"


def line(cost: Cost) -> str:
    """The cost line of ``runner status``, the TUI and the panel: spent, unknown, in flight, tokens."""
    tokens = cost.tokens
    parts = [f"cost: {money(cost.spent)} spent" if cost.spent is not None else "cost: spent unknown"]
    if cost.unknown_calls:
        lost = f"{cost.unknown_calls:,} calls sent, answer lost"
        parts.append(f"{money(cost.unknown)} may have been billed ({lost})" if cost.unknown is not None
                     else f"{lost} (cost unknown)")
    if cost.in_flight is None or cost.in_flight:
        parts.append(f"{money(cost.in_flight)} in flight" if cost.in_flight is not None else "in flight: cost unknown")
    parts.append(f"tokens {tokens.input:,} in ({tokens.cached_input:,} cached) / {tokens.output:,} out")
    if cost.reused:
        parts.append(f"reused {cost.reused:,}, not billed")
    text = " · ".join(parts)
    if cost.reasons:
        text += f" ({'; '.join(cost.reasons)})"
    if cost.unknown_calls or cost.in_flight:
        text += f"; estimates: tokens as {estimate.COUNTED_BY}"
    return text
