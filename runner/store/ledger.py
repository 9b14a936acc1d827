"""The ledger inside the caller's transaction: each item's charges and share of a batch's usage, the run's
totals per stage.

A charge is one call an item was in: *billed* (answered), *not billed*
(refused before running) or *unknown* (sent, its answer lost). Each
statement that moves an item's tally moves its run's row for the stage in
``ledger`` in the same transaction, so that the totals are read in
O(stages) (:func:`totals`).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..usage import Usage
from .database import Conn

if TYPE_CHECKING:
    from .base import StoreBase

#: The ``receive`` move's ledger fields: each answered item's share of the batch's tokens and cost, input by
#: its input's size (``:tchars`` the answered items' input), output by its result's (``:olen`` the results'; with
#: no result at all, by input too). A NULL cost (no usage, no price) leaves the item's cost unknown for good.
SHARE_IN = "items.chars * 1.0 / :tchars"
SHARE_OUT = f"CASE WHEN :olen > 0 THEN coalesce(length(answer.output), 0) * 1.0 / :olen ELSE {SHARE_IN} END"
RECEIVE_VALUES = {
    "tokens_in": f"tokens_in = tokens_in + coalesce(@whole(:tin * {SHARE_IN}), 0)",
    "tokens_out": f"tokens_out = tokens_out + coalesce(@whole(:tout * {SHARE_OUT}), 0)",
    "cost": f"cost = cost + :cin * {SHARE_IN} + :cout * {SHARE_OUT}",
}

#: The input characters of a batch's items about to be received (``:answered`` NULL: all of them).
ANSWERED_CHARS = """
SELECT coalesce(sum(chars), 0) FROM items WHERE batch_id = :batch AND state = 'running'
AND (CAST(:answered AS TEXT) IS NULL OR id IN (@ints(:answered)))
"""

ADD = """
INSERT INTO ledger (run_id, stage, billed, not_billed, unknown, unknown_chars, input_tokens, cached_tokens,
                    output_tokens, reasoning_tokens, tokened, cost, uncosted, reused)
SELECT {run}, {stage}, :billed, :not_billed, :unknown, :unknown_chars, :input, :cached, :output, :reasoning,
       :tokened, :cost, :uncosted, :reused {source}
ON CONFLICT (run_id, stage) DO UPDATE SET
    billed = ledger.billed + excluded.billed, not_billed = ledger.not_billed + excluded.not_billed,
    unknown = ledger.unknown + excluded.unknown, unknown_chars = ledger.unknown_chars + excluded.unknown_chars,
    input_tokens = ledger.input_tokens + excluded.input_tokens,
    cached_tokens = ledger.cached_tokens + excluded.cached_tokens,
    output_tokens = ledger.output_tokens + excluded.output_tokens,
    reasoning_tokens = ledger.reasoning_tokens + excluded.reasoning_tokens, tokened = ledger.tokened + excluded.tokened,
    cost = ledger.cost + excluded.cost, uncosted = ledger.uncosted + excluded.uncosted,
    reused = ledger.reused + excluded.reused
"""
ADD_FOR_BATCH = ADD.format(run="run_id", stage="stage", source="FROM batches WHERE id = :batch")
ADD_FOR_STAGE = ADD.format(run=":run", stage=":stage", source="")
ZERO = {"billed": 0, "not_billed": 0, "unknown": 0, "unknown_chars": 0, "input": 0, "cached": 0, "output": 0,
        "reasoning": 0, "tokened": 0, "cost": 0.0, "uncosted": 0, "reused": 0}

def shares(
    conn: Conn, params: Mapping[str, Any], outputs: Mapping[int, str], usage: Usage | None,
    cost: tuple[float, float] | None,
) -> dict[str, Any]:
    """The parameters of :data:`RECEIVE_VALUES` for a batch's answer (``params``: its ``batch`` and ``answered``)."""
    tchars = conn.execute(ANSWERED_CHARS, params).fetchone()[0]
    return {"tchars": max(tchars, 1), "olen": sum(len(output) for output in outputs.values()),
            "tin": usage.input if usage else None, "tout": usage.output if usage else None,
            "cin": cost[0] if cost else None, "cout": cost[1] if cost else None}


def add_billed(
    conn: Conn, batch_id: int, billed: int, usage: Usage | None, cost: tuple[float, float] | None
) -> None:
    """A batch's answer billed ``billed`` items' calls: its usage and cost on its stage's row."""
    if not billed:
        return
    used = usage or Usage()
    conn.execute(ADD_FOR_BATCH, {
        **ZERO, "batch": batch_id, "billed": billed, "input": used.input, "cached": used.cached_input,
        "output": used.output, "reasoning": used.reasoning, "tokened": billed if usage else 0,
        "cost": sum(cost) if cost else 0.0, "uncosted": 0 if cost else billed,
    })
    if usage is not None:
        conn.execute("UPDATE batches SET usage = :usage WHERE id = :batch",
                     {"batch": batch_id, "usage": json.dumps(usage.as_dict())})


def add_not_billed(conn: Conn, batch_id: int, counted: int) -> None:
    """``counted`` items' calls of a batch the upstream refused before running them: not billed, on its stage's row."""
    if counted:
        conn.execute(ADD_FOR_BATCH, {**ZERO, "batch": batch_id, "not_billed": counted})


def add_unknown(conn: Conn, rows: Sequence[tuple[int, str, int]]) -> int:
    """Items' calls sent with their answer lost (each row: run id, stage, input characters): unknown charges,
    on their stage's row; how many."""
    calls: Counter[tuple[int, str]] = Counter()
    chars: Counter[tuple[int, str]] = Counter()
    for run_id, stage, size in rows:
        calls[run_id, stage] += 1
        chars[run_id, stage] += size
    for (run_id, stage), counted in calls.items():
        conn.execute(ADD_FOR_STAGE, {**ZERO, "run": run_id, "stage": stage, "unknown": counted,
                                     "unknown_chars": chars[run_id, stage]})
    return len(rows)


@dataclass(frozen=True)
class StageLedger:
    """A run's charges at one stage: calls billed, not billed and unknown, the tokens and the cost known."""

    stage: str
    billed: int = 0
    not_billed: int = 0
    unknown: int = 0
    unknown_chars: int = 0
    usage: Usage = Usage()
    #: Billed item-calls with a known usage: the denominator of the average output per item.
    tokened: int = 0
    #: USD of the billed calls whose cost is known.
    cost: float = 0.0
    #: Billed item-calls whose cost is not known (no usage reported, or no price then).
    uncosted: int = 0
    #: Results taken from the same work with no call (``[cache] reuse``): not billed, not a charge.
    reused: int = 0
    #: Batches running now: their items and input characters (what is in flight).
    running_items: int = 0
    running_chars: int = 0


TOTALS = """
SELECT stage, billed, not_billed, unknown, unknown_chars, input_tokens, cached_tokens, output_tokens,
       reasoning_tokens, tokened, cost, uncosted, reused FROM ledger WHERE run_id = ?
"""
#: Batches in flight: started, not yet answered (an answered one, saved with the slot's next start, is spent).
RUNNING = (
    "SELECT stage, sum(size) AS items, sum(chars) AS chars FROM batches WHERE run_id = ? AND state = 'running' "
    "AND answer IS NULL GROUP BY stage"
)


def totals(store: StoreBase, run_id: int) -> list[StageLedger]:
    """The run's ledger per stage, with what is in flight: O(stages + batches running)."""
    running = {row["stage"]: row for row in store.rows(RUNNING, [run_id])}
    rows = {row["stage"]: row for row in store.rows(TOTALS, [run_id])}
    return [_stage(stage, rows.get(stage), running.get(stage)) for stage in sorted(rows.keys() | running.keys())]


def _stage(stage: str, row: Mapping[str, Any] | None, running: Mapping[str, Any] | None) -> StageLedger:
    items, chars = (running["items"], running["chars"]) if running else (0, 0)
    if row is None:
        return StageLedger(stage, running_items=items, running_chars=chars)
    return StageLedger(
        stage, row["billed"], row["not_billed"], row["unknown"], row["unknown_chars"],
        Usage(row["input_tokens"], row["cached_tokens"], row["output_tokens"], row["reasoning_tokens"]),
        tokened=row["tokened"], cost=row["cost"], uncosted=row["uncosted"], reused=row["reused"], running_items=items,
        running_chars=chars,
    )
