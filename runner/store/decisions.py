"""The store's verbs of a person's decisions at a ``decide`` stage: arrival, decide, and decisions kept.

An item that reaches a decide stage waits there (state ``waiting``, hold
``decide``: :func:`runner.store.items.arrive`) from the transaction that
put it there (a boundary, a retry of a rejected item), or, added there or
sent back there as a run starts, from the engine's start; pending there
meanwhile, it is never sent (no batch is formed of a decide stage). A
decision (``Decisions.decide``, one transaction, logged as
the command ``decide``) is applied to the items that wait, as the rule
(:func:`runner.rules.deciding.plan`, passed in) says: an approval saves its
data as the stage's result and moves the item on, a rejection fails it.
A decision for an item still before the stage is kept in ``decisions`` and
applied by the engine at its next turn once the item waits there
(``apply_kept``): the item's arrival is the settlement's transaction, which
knows nothing of the job's rules.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, NamedTuple, Protocol

from ..errors import RunError
from ..model import FailureKind
from ..rules.deciding import REJECTED, At, Plan
from . import items
from .base import StoreBase
from .items import arrive, move_each
from .skips import skip
from .database import Conn

#: Where items stand, with their input and the results of the stages they passed (``{chosen}`` selects them).
AT = """
SELECT items.id, items.key, items.stage, items.state, items.hold, items.error_kind,
    (SELECT input FROM inputs WHERE item_id = items.id) AS input,
    (SELECT coalesce(@object_agg(stage, @json(result)), '{{}}') FROM results WHERE item_id = items.id) AS results,
    items.parent_id IS NOT NULL AS sub_item
    {more}
FROM items {join} WHERE items.run_id = :run AND {chosen} ORDER BY items.seq
"""

#: The items named by ``:keys`` (a JSON list), or (none named) every item waiting for a decision.
CHOSEN = "(CASE WHEN :keys = '[]' THEN items.hold = 'decide' ELSE items.key IN (@texts(:keys)) END)"

#: Decisions kept for items that now wait at their stage.
KEPT = {"more": ", decisions.approve, decisions.data",
        "join": "JOIN decisions ON decisions.item_id = items.id AND decisions.stage = items.stage",
        "chosen": "items.hold = 'decide'"}
ANY_KEPT = (
    "SELECT 1 FROM decisions JOIN items ON items.id = decisions.item_id AND items.stage = decisions.stage "
    "WHERE decisions.run_id = ? AND items.hold = 'decide' LIMIT 1"
)

#: A decide stage's result: the data a person approved with.
SAVE_RESULT = """
INSERT INTO results (item_id, stage, result, fingerprint, at) VALUES (:id, :at_stage, :data, :fingerprint, :now)
ON CONFLICT (item_id, stage) DO UPDATE SET result = excluded.result, fingerprint = excluded.fingerprint, at = excluded.at, work = NULL
"""

KEEP = """
INSERT INTO decisions (item_id, stage, run_id, approve, data, at) VALUES (:id, :at_stage, :run, :approve, :data, :now)
ON CONFLICT (item_id, stage) DO UPDATE SET approve = excluded.approve, data = excluded.data, at = excluded.at
"""
FORGET = "DELETE FROM decisions WHERE item_id = :id AND stage = :at_stage"

LOG_COMMAND = "INSERT INTO commands (run_id, command, args, created_at, done_at, outcome) VALUES (?, ?, ?, ?, ?, ?)"

REJECT = {"error_kind": f"error_kind = '{FailureKind.REJECTED.value}'", "error": "error = :message",
          "retryable": "retryable = 1"}

#: The rule that says what a decision does to one item: (where it stands, approve, data) -> its plan.
Planner = Callable[[At, bool, Mapping[str, Any]], Plan]


class Decided(NamedTuple):
    """What a decision did: items approved and rejected now, and items it waits for (kept)."""

    approved: int
    rejected: int
    kept: int


class Deciding(Protocol):
    """A store that decides (``sqlite.Store``), as :class:`Decisions` uses it."""

    def write(self) -> AbstractContextManager[Conn]: ...
    def rows(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[dict[str, Any]]: ...
    def refuse_unknown(self, run_id: int, keys: Sequence[str]) -> None: ...


def _at(row: Mapping[str, Any]) -> At:
    return At(row["key"], row["stage"], row["state"], row["hold"], row["error_kind"], json.loads(row["input"]),
              json.loads(row["results"]), bool(row["sub_item"]))


class Decisions(StoreBase):
    """The verbs of a person's decisions."""

    def arrive(self, run_id: int, *, now: float) -> None:
        """Items pending at a decide stage (the first stage, say, as the run starts) wait there for a person."""
        with self.write() as conn:
            arrive(conn, run_id, now)

    def decide(
        self: Deciding, run_id: int, keys: Sequence[str], *, approve: bool, data: Mapping[str, Any],
        plan: Planner, fingerprints: Mapping[str, str], now: float,
    ) -> Decided:
        """Approve (with ``data``) or reject the items of ``keys`` (none: every item waiting for a decision).

        One transaction: those waiting at a decide stage are decided now, those
        before one keep the decision for it; any other item (past it, failed)
        refuses the whole command (``RunError``, saying why), and nothing changes.
        """
        params = {"run": run_id, "keys": json.dumps(list(keys)), "now": now}
        with self.write() as conn:
            self.refuse_unknown(run_id, keys)
            arrive(conn, run_id, now)
            rows = self.rows(AT.format(more="", join="", chosen=CHOSEN), params)
            plans = [(row, plan(_at(row), approve, data)) for row in rows]
            refused = [(row["key"], p.why) for row, p in plans if p.refused]
            if refused:
                shown = "; ".join(f"{key!r}: {why}" for key, why in refused[:3])
                more = f" (and {len(refused) - 3} more)" if len(refused) > 3 else ""
                raise RunError(f"cannot decide {shown}{more}: nothing was changed")
            given = json.dumps(dict(data))
            _apply(conn, run_id, [(row["id"], p, given) for row, p in plans if p.applied], fingerprints, now)
            kept = [{**params, "id": row["id"], "at_stage": p.stage, "approve": int(approve), "data": given}
                    for row, p in plans if not p.applied]
            conn.executemany(KEEP, kept)
            applied = len(plans) - len(kept)
            done = Decided(applied if approve else 0, 0 if approve else applied, len(kept))
            if plans:
                conn.execute(LOG_COMMAND, (run_id, "decide", json.dumps(
                    {"keys": [row["key"] for row, _ in plans], "approve": approve, "data": dict(data)}), now, now,
                    f"{done.approved} approved, {done.rejected} rejected, {done.kept} kept until they arrive"))
        return done

    def apply_kept(self: Deciding, run_id: int, *, plan: Planner, fingerprints: Mapping[str, str], now: float) -> int:
        """Apply the decisions kept for items that now wait at their decide stage (one transaction); how many."""
        if not self.rows(ANY_KEPT, [run_id]):
            return 0
        with self.write() as conn:
            rows = self.rows(AT.format(**KEPT), {"run": run_id})
            decided = []
            for row in rows:
                data = json.loads(row["data"] or "{}")
                decided.append((row["id"], plan(_at(row), bool(row["approve"]), data), json.dumps(data)))
            decided = [(item_id, p, data) for item_id, p, data in decided if p.applied]
            _apply(conn, run_id, decided, fingerprints, now)
        return len(decided)


def _apply(
    conn: Conn, run_id: int, decided: Sequence[tuple[int, Plan, str]], fingerprints: Mapping[str, str],
    now: float,
) -> None:
    """Decisions applied to items waiting at their decide stage: each (item id, its plan, the data as JSON)."""
    params = [{"run": run_id, "now": now, "id": item_id, "at_stage": p.stage, "data": data,
               "fingerprint": fingerprints.get(p.stage or "", ""), "stage": p.goes.stage if p.goes else None,
               "message": REJECTED} for item_id, p, data in decided]
    plans = [p for _, p, _ in decided]
    approved = [each for each, p in zip(params, plans) if p.goes is not None]
    conn.executemany(SAVE_RESULT, approved)
    one = "items.id = :id AND items.stage = :at_stage"
    move_each(conn, "approve", where=f"{one} AND CAST(:stage AS TEXT) IS NOT NULL",
              values={"stage": "stage = :stage", **items.FRESH_BUDGET}, params=approved)
    move_each(conn, "approve_last", where=f"{one} AND CAST(:stage AS TEXT) IS NULL",
              values={"output": "output = :data"}, params=approved)
    skip(conn, [(each, skipped) for each, p in zip(params, plans) if p.goes is not None for skipped in p.goes.skipped])
    move_each(conn, "reject", where=one, values=REJECT,
              params=[each for each, p in zip(params, plans) if p.goes is None])
    conn.executemany(FORGET, params)
    arrive(conn, run_id, now)  # an approval may have moved an item on to another decide stage
