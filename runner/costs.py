"""What a run cost, from its ledger and its job's prices: spent, unknown, in flight, and the tokens; USD.

- *spent*: the billed calls at the price of their stage when they were
  answered; unknown (None, with the reason) when a billed call reported no
  usage, was answered before its job had a price, or its model has no price:
  never 0 for what is not known;
- *unknown*: the calls sent whose answer was lost, at their estimate
  (:mod:`runner.rules.estimate`);
- *in flight*: the batches running now, at their estimate.

A view over :class:`runner.store.ledger.StageLedger` rows: no SQL here.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from . import pricing, usage
from .plurals import plural
from .pricing import money
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
    #: The estimated tokens of the batches in flight and of the unknown charges (what a budget of tokens counts).
    tokens_in_flight: int = 0
    tokens_unknown: int = 0

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


@functools.lru_cache(maxsize=16)
def terms(job_json: str) -> Mapping[str, Terms]:
    """Each stage's terms from a run's saved job, read as JSON (a status parses no job); "" keys the top level's,
    for a stage the job no longer names. A store that saved no job (schema 8's ``{}``) has none. Parsed once per
    job text (the budget guard asks at every batch start, a view at every poll), so read-only."""
    try:
        data = json.loads(job_json)
    except ValueError:
        return MappingProxyType({})
    saved = [("", data.get("provider"))] + [(s.get("name"), s.get("provider")) for s in data.get("stages") or []]
    return MappingProxyType({
        name: Terms(str(p.get("kind", "openai-chat")), str(p.get("model", "")), MappingProxyType(p.get("price") or {}),
                    int(p.get("expected_output_tokens", 200)))
        for name, p in saved if isinstance(name, str) and isinstance(p, dict)})


@dataclass(frozen=True)
class Estimator:
    """How a stage's calls not answered (in flight, or their answer lost) are estimated: at its price, by what its
    answers used so far (:mod:`runner.rules.estimate`)."""

    price: pricing.Price | None
    batch: bool
    seen: estimate.Seen
    expected: int

    def cost(self, chars: int, items: int) -> float | None:
        return estimate.cost(chars=chars, items=items, seen=self.seen, price=self.price, batch=self.batch,
                             expected_output_tokens=self.expected) if items else 0.0

    def tokens(self, chars: int, items: int) -> int:
        used = estimate.tokens(chars=chars, items=items, seen=self.seen, expected_output_tokens=self.expected)
        return used.input + used.output if items else 0


def estimator(row: StageLedger | None, terms: Terms | None) -> Estimator:
    """The estimator of a stage by its ledger row (None: nothing of it yet) and its provider's terms (None: unknown)."""
    seen = estimate.Seen(row.usage.output, row.tokened) if row is not None else estimate.Seen()
    if terms is None:
        return Estimator(None, False, seen, 200)
    return Estimator(pricing.price_of(terms.price, terms.model), terms.kind in pricing.BATCH_KINDS, seen,
                     terms.expected_output_tokens)


def estimates(rows: Sequence[StageLedger], job_json: str) -> Callable[[str, int, int], float | None]:
    """What calls are estimated to cost at each stage of a run, ``estimate(stage, items, chars)``, from its
    ledger rows and its saved job (a re-run's plan, :mod:`runner.rules.rerun_plan`)."""
    guess = _estimators(rows, job_json)
    return lambda stage, items, chars: guess(stage).cost(chars, items)


def _estimators(rows: Sequence[StageLedger], job_json: str) -> Callable[[str], Estimator]:
    """The estimator of each stage of a run (by its ledger row and its saved job's terms), by stage name."""
    saved = terms(job_json)
    by_stage = {row.stage: row for row in rows}
    return lambda stage: estimator(by_stage.get(stage), saved.get(stage, saved.get("")))


def of_stage(row: StageLedger, terms: Terms | None) -> Cost:
    """One stage's cost: its ledger row at its provider's price (no terms, or no price: unknown)."""
    guess = estimator(row, terms)
    reasons = [] if guess.price is not None else [
        pricing.unpriced(terms.model if terms else "a run whose job is not saved")]
    if guess.price is not None and row.uncosted:
        reasons.extend(uncosted_because(row))
    return Cost(
        spent=row.cost if guess.price is not None and not row.uncosted else (None if row.billed else 0.0),
        unknown=guess.cost(row.unknown_chars, row.unknown), in_flight=guess.cost(row.running_chars, row.running_items),
        tokens=row.usage, billed=row.billed, not_billed=row.not_billed, unknown_calls=row.unknown, reused=row.reused,
        reasons=tuple(reasons) if row.billed or row.unknown or row.running_items else (),
        tokens_in_flight=guess.tokens(row.running_chars, row.running_items),
        tokens_unknown=guess.tokens(row.unknown_chars, row.unknown),
    )


def uncosted_because(row: StageLedger) -> list[str]:
    """Why a priced stage's billed calls have no known cost: no usage reported, or answered (with their usage)
    before the job had a price, whose tokens are not priced after the fact at a price they were not sent at."""
    no_usage = min(row.uncosted, row.billed - row.tokened)
    unpriced = row.uncosted - no_usage
    return ([f"{no_usage} billed item-calls reported no usage"] if no_usage else []) + (
        [f"{unpriced} billed item-calls answered before the job had a price"] if unpriced else [])


def next_batch(rows: Sequence[StageLedger], job_json: str, stage: str, *, chars: int, items: int) -> tuple[
        float | None, int]:
    """The estimate of a batch about to start at ``stage``: its cost (None: no price) and tokens."""
    guess = _estimators(rows, job_json)(stage)
    return guess.cost(chars, items), guess.tokens(chars, items)


def of_run(rows: Sequence[StageLedger], job_json: str) -> Cost:
    """A run's cost from its ledger rows and its saved job: every stage's added up (unknown if any stage's is),
    each stage's kept, in the job's stage order (then any stage the job no longer names)."""
    saved = terms(job_json)
    order = {name: n for n, name in enumerate(saved)}
    stages = {row.stage: of_stage(row, saved.get(row.stage, saved.get("")))
              for row in sorted(rows, key=lambda row: order.get(row.stage, len(order)))}
    parts = list(stages.values())
    return Cost(
        spent=_sum(c.spent for c in parts), unknown=_sum(c.unknown for c in parts),
        in_flight=_sum(c.in_flight for c in parts), tokens=usage.total(c.tokens for c in parts) or Usage(),
        billed=sum(c.billed for c in parts), not_billed=sum(c.not_billed for c in parts),
        unknown_calls=sum(c.unknown_calls for c in parts), reused=sum(c.reused for c in parts),
        reasons=tuple(dict.fromkeys(r for c in parts for r in c.reasons)), stages=stages,
        tokens_in_flight=sum(c.tokens_in_flight for c in parts), tokens_unknown=sum(c.tokens_unknown for c in parts),
    )


def line(cost: Cost) -> str:
    """The cost line of ``runner status``, the TUI and the panel: spent (or why it is unknown), unknown charges,
    in flight, tokens; cached input only when some was."""
    tokens = cost.tokens
    parts = [f"cost unknown: {'; '.join(cost.reasons)}" if cost.reasons else f"cost: {money(cost.spent)} spent"]
    if cost.unknown_calls:
        lost = f"calls of {plural(cost.unknown_calls, 'item')} whose answer was lost"  # each item's, as charges count
        parts.append(f"{money(cost.unknown)} may have been billed ({lost})" if cost.unknown is not None
                     else f"{lost}, may have been billed")
    if cost.in_flight is None or cost.in_flight:
        parts.append(f"{money(cost.in_flight)} in flight" if cost.in_flight is not None else "calls in flight")
    cached = f" ({tokens.cached_input:,} cached)" if tokens.cached_input else ""
    parts.append(f"tokens {tokens.input:,} in{cached} / {tokens.output:,} out")
    if cost.reused:
        parts.append(f"reused {cost.reused:,}, not billed")
    if cost.unknown_calls or cost.in_flight:
        parts.append(f"estimates: tokens as {estimate.COUNTED_BY}")
    return " · ".join(parts)

