"""The store's verbs of fan-out and join (issue 17, seed 001's WeKnora count).

At a fan-out stage's boundary (:func:`fan_out`, inside the settlement's
transaction, called by :func:`runner.store.stages.pass_on`) each item the
engine fans out moves to ``waiting`` at its join stage (hold ``join``) with
the number of its sub-items in ``sub_items_left``; its sub-items (keys
``parent/0``, ``parent/1``, ...) are added, pending at the stage after the
fan-out, each with its parent's results (the fan-out stage's without its
list) and its own input. Sub-items a parent had from an earlier fan-out are
removed first (:func:`remove_sub_items`), so a fan-out made again replaces
them and never duplicates them; a re-run that sends a parent back to its
fan-out or before retires them at once (:func:`retire_sub_items`), so none
is worked (and paid) in the meantime.

The count-down is the trigger ``sub_item_settles`` (schema 13): each
sub-item's move into ``completed`` or ``failed`` takes one from its parent's
count in the same transaction (a person's retry of a settled sub-item, or a
re-run that sends one again, gives it back, and :func:`reopen` sends its
parent, joined or failed or gone on past its join, back to wait there, its
results from the join on forgotten). A count stands only while its parent
waits at its join: one that loses its sub-items otherwise (its input
changed, its fan-out retired) keeps none. A parent whose count is 0 is read
by :meth:`FanOuts.joinable`, with its sub-items' ends; the engine asks the rule how it ends, and
:meth:`FanOuts.join` makes that end durable in one transaction: the join's
result saved under the join stage, the parent pending at its next stage
(waiting there, at a decide stage), completed, or failed ``sub_item_failed`` (a parent a person retried, pending at
its join, waits there again first).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any, NamedTuple

from ..model import FailureKind, Settlement, Skip
from ..rules.fanout import Settled
from . import items
from .base import StoreBase
from .items import move
from .skips import skip
from .database import Conn

#: A parent of batch ``:batch`` that fans out: waiting at its join, its sub-items yet to settle.
FANNED = "items.id = :id AND items.batch_id = :batch AND items.output IS NOT NULL"

#: A sub-item added: its parent's run, group and order, pending at the stage after the fan-out.
ADD_SUB_ITEM = """
INSERT INTO items (id, run_id, key, grp, seq, chars, fingerprint, updated_at, stage, parent_id)
SELECT :id, run_id, key || '/' || :n, grp, seq, :chars, fingerprint, :now, :first, id FROM items WHERE id = :parent
"""

#: A sub-item's results: its parent's, the fan-out stage's as the engine gave it (``:result``, its list left out),
#: each inherited (its parent passed those stages, once: schema ``migrations_inherited``).
COPY_RESULTS = """
INSERT INTO results (item_id, stage, result, fingerprint, at, inherited)
SELECT :id, stage, CASE WHEN stage = :stage THEN :result ELSE result END, fingerprint, at, 1 FROM results
WHERE item_id = :parent
"""

#: The sub-items a fan-out added, in their parent's history: one event for them all.
FANNED_OUT = """
INSERT INTO events (run_id, item_id, at, to_state, kind, message, items, stage)
SELECT run_id, id, :now, 'pending', 'fan_out', :n || ' sub-items', :n, :first FROM items WHERE id = :parent AND :n > 0
"""

#: A parent's sub-items leave the store: each an event of minus one item in its state (the history's
#: account stays whole), its paid and maybe-paid calls kept by its parent (``items.KEEP_PAID``: the run's
#: totals stay whole).
REMOVED = """
INSERT INTO events (run_id, item_id, at, to_state, kind, message, items, stage)
SELECT run_id, id, :now, state, 'removed', :why, -1, stage FROM items WHERE parent_id = :parent
"""
#: Why a parent's sub-items were removed: a new fan-out, or a new input, replaces them.
REPLACED = "replaced by its parent's new fan-out or new input"
#: ... or a re-run sent their parent back to its fan-out or before (or its fan-out is gone): retired at once.
RETIRED = ("retired: a re-run sent its parent back to its fan-out or before, or the job no longer fans out there "
           "(a call it had in flight may have been billed, and is never sent again)")
FORGET = [
    "DELETE FROM results WHERE item_id IN (SELECT id FROM items WHERE parent_id = :parent)",
    "DELETE FROM inputs WHERE item_id IN (SELECT id FROM items WHERE parent_id = :parent)",
    "DELETE FROM items WHERE parent_id = :parent",
    items.NO_SUB_ITEMS_LEFT,
]

#: A parent whose sub-items a person's retry or a re-run may send again, the parent then waiting at its join
#: again: not failed by a person (a cancel, a rejection stands) and not in flight at a stage past its join.
REOPENABLE = ("parent.state IN ('completed', 'failed', 'pending', 'waiting') "
              "AND NOT (parent.state = 'failed' AND coalesce(parent.error_kind, '') IN ('cancelled', 'rejected'))")

#: The parents of some sub-items (``:subs``, a JSON list of ids) sent again, not waiting at their join: each with
#: its join stage (the job's first join after the sub-item's stage) and that join's place among the job's stages.
TO_REOPEN = f"""
SELECT parent.id, @field(joins.value, '$.name') AS stage, joins.key AS place
FROM items AS parent JOIN runs ON runs.id = parent.run_id, @list_of_json(runs.job, joins, '$.stages')
WHERE parent.id IN (SELECT parent_id FROM items WHERE id IN (@ints(:subs))
                    AND state NOT IN ('completed', 'failed'))
AND {REOPENABLE} AND parent.hold != 'join'
AND joins.key = (SELECT min(later.key) FROM @list_of_json(runs.job, later, '$.stages')
                 WHERE @field(later.value, '$.kind') = 'join' AND later.key > (
                     SELECT min(at.key) FROM items AS sub, @list_of_json(runs.job, at, '$.stages')
                     WHERE sub.parent_id = parent.id AND sub.id IN (@ints(:subs))
                     AND @field(at.value, '$.name') = sub.stage))
"""
#: A parent's results from its join on (``:place``), forgotten as it waits there again: they came of the old join.
FORGET_FROM_JOIN = """
DELETE FROM results WHERE item_id = :id AND stage IN (
    SELECT @field(later.value, '$.name') FROM items JOIN runs ON runs.id = items.run_id,
    @list_of_json(runs.job, later, '$.stages') WHERE items.id = :id AND later.key >= :place)
"""
#: Why a parent waits at its join again, in its history after the move's own event.
REOPENED = """
INSERT INTO events (run_id, item_id, at, from_state, to_state, kind, message, items, stage)
SELECT run_id, id, :now, state, state, 'reopened', :why, 0, stage FROM items WHERE id = :id
"""
SENT_AGAIN = ("a sub-item was sent again: the parent waits at its join again, and goes through the stages after it "
              "again once its sub-items settle")

#: Parents ready to join: at a join stage (``:joins``, a JSON list), every sub-item settled; waiting there,
#: or pending (a person retried the parent). Each with its input, results and sub-items' ends, in order.
JOINABLE = """
SELECT items.id, items.stage, (SELECT input FROM inputs WHERE item_id = items.id) AS input,
    (SELECT @object_agg(stage, @json(result)) FROM results WHERE item_id = items.id) AS results,
    (SELECT @array_agg(@array(sub.key, sub.state, sub.output, sub.error_kind, sub.error))
     FROM (SELECT * FROM items AS sub WHERE sub.parent_id = items.id ORDER BY sub.id) AS sub) AS subs
FROM items WHERE run_id = :run AND sub_items_left = 0
AND (hold = 'join' OR state = 'pending' AND stage IN (@texts(:joins)))
"""

#: How many parents of a run wait for their sub-items.
WAITING = "SELECT count(*) AS n FROM items WHERE run_id = ? AND hold = 'join'"

#: A join's result, under the join stage.
SAVE_RESULT = """
INSERT INTO results (item_id, stage, result, fingerprint, at) VALUES (:id, :stage, :result, :fingerprint, :now)
ON CONFLICT (item_id, stage) DO UPDATE SET result = excluded.result, fingerprint = excluded.fingerprint, at = excluded.at, work = NULL
"""
#: The parent still at its join, every sub-item settled.
AT_JOIN = "items.id = :id AND items.stage = :stage AND items.sub_items_left = 0"


def fan_out(conn: Conn, settlement: Settlement, params: Mapping[str, Any]) -> None:
    """Each fanned-out item of the settlement waiting at its join, its sub-items (made again) pending."""
    for parent, fan in settlement.fan_out.items():
        moved = move(conn, "fan_out", where=FANNED, returning="id", params={**params, "id": parent, "join": fan.join,
                                                                            "left": len(fan.inputs)},
                     values={"stage": "stage = :join", "sub_items_left": "sub_items_left = :left",
                             **items.FRESH_BUDGET})
        if not moved:
            continue
        remove_sub_items(conn, parent, params["now"])
        (last,) = conn.execute(items.LAST_ID).fetchone()
        for n, text in enumerate(fan.inputs):
            sub = {"id": last + 1 + n, "n": n, "parent": parent, "now": params["now"], "first": fan.first}
            conn.execute(ADD_SUB_ITEM, {**sub, "chars": len(text)})
            conn.execute(items.SAVE_INPUT, (sub["id"], text))
            conn.execute(COPY_RESULTS, {**sub, "stage": fan.stage, "result": fan.result})
        conn.execute(FANNED_OUT, {"parent": parent, "now": params["now"], "n": len(fan.inputs), "first": fan.first})


def remove_sub_items(conn: Conn, parent: int, now: float, why: str = REPLACED) -> None:
    """A parent's sub-items removed (its fan-out is made again, or its input changed), accounted for."""
    conn.execute(REMOVED, {"parent": parent, "now": now, "why": why})
    conn.execute(items.KEEP_PAID, {"parent": parent})
    for statement in FORGET:
        conn.execute(statement, {"parent": parent})


def retire_sub_items(conn: Conn, parent: int, now: float) -> None:
    """A parent a re-run sent back to its fan-out or before (or whose fan-out is gone): its sub-items removed now,
    whatever their state, rather than worked (and paid) until its new fan-out replaces them. Those held for a
    person are never sent again; those of an upstream task that may still run are counted as maybe paid (the
    task runs on: other items may share it)."""
    items.count_task_lines(conn, "parent_id = :parent", {"parent": parent})
    remove_sub_items(conn, parent, now, RETIRED)


def reopen(conn: Conn, subs: Collection[int], now: float) -> int:
    """The parents of sub-items sent again (``subs``, now unsettled) wait at their join again, in the caller's
    transaction: joined, failed (not by a person) or gone on past it, their results from the join on forgotten
    (the join is made again, so what came after it is done again). Their count of sub-items left is the
    trigger's (each sub-item sent again gave one back). How many."""
    if not subs:
        return 0
    rows = conn.execute(TO_REOPEN, {"subs": json.dumps(list(subs))}).fetchall()
    for parent, stage, place in rows:
        params = {"id": parent, "stage": stage, "place": place, "now": now, "why": SENT_AGAIN}
        move(conn, "reopen", where="items.id = :id", values={"stage": "stage = :stage", **items.FRESH_BUDGET},
             params=params)
        conn.execute(FORGET_FROM_JOIN, params)
        conn.execute(REOPENED, params)
    return len(rows)


class Parent(NamedTuple):
    """A parent ready to join: every sub-item settled."""

    id: int
    stage: str
    input: str
    results: dict[str, Any]
    subs: tuple[Settled, ...]


class Joined(NamedTuple):
    """How a parent's join ends, as the engine decided it."""

    id: int
    stage: str
    #: The join's result, as JSON, saved under the join stage.
    result: str
    fingerprint: str
    #: The stage it goes on to (pending there); None: completed, or failed when ``failure`` says why.
    next_stage: str | None
    failure: str | None = None
    skipped: tuple[Skip, ...] = ()


class FanOuts(StoreBase):
    """The verbs of joins: the parents ready to join, and their joins made."""

    def joinable(self, run_id: int, joins: Sequence[str]) -> list[Parent]:
        """The run's parents whose sub-items have all settled, at one of the ``joins`` stages."""
        rows = self.rows(JOINABLE, {"run": run_id, "joins": json.dumps(list(joins))})
        return [Parent(row["id"], row["stage"], row["input"], json.loads(row["results"] or "{}"),
                       tuple(Settled(*sub) for sub in json.loads(row["subs"]))) for row in rows]

    def waiting_for_sub_items(self, run_id: int) -> int:
        """How many of the run's parents wait at a join for their sub-items."""
        return int(self.rows(WAITING, [run_id])[0]["n"])

    def join(self, joined: Sequence[Joined], *, now: float) -> None:
        """Each parent's join made, in one transaction: its result saved, the parent moved on, completed or
        failed (``sub_item_failed``). A parent no longer at its join, every sub-item settled, is left alone."""
        with self.write() as conn:
            for end in joined:
                params = {"id": end.id, "stage": end.stage, "now": now}
                move(conn, "rejoin", where=AT_JOIN, params=params)
                if end.failure is not None:
                    move(conn, "join_failed", where=AT_JOIN, params={**params, "message": end.failure}, values={
                        "error_kind": f"error_kind = '{FailureKind.SUB_ITEM_FAILED.value}'",
                        "error": "error = :message", "retryable": "retryable = 1"})
                    continue
                if end.next_stage is None:
                    moved = move(conn, "join_last", where=AT_JOIN, values={"output": "output = :result"},
                                 params={**params, "result": end.result}, returning="items.id")
                else:
                    moved = move(conn, "join", where=AT_JOIN, values={"stage": "stage = :next", **items.FRESH_BUDGET},
                                 params={**params, "next": end.next_stage}, returning="items.id")
                if moved:  # not one a person cancelled (or whose sub-item was retried) since it was read
                    conn.execute(SAVE_RESULT, {**params, "result": end.result, "fingerprint": end.fingerprint})
                    skip(conn, [({"id": end.id, "now": now}, each) for each in end.skipped])
            if any(end.next_stage is not None for end in joined):  # those now at a decide stage wait for a person
                (run_id,) = conn.execute("SELECT run_id FROM items WHERE id = ?", (joined[0].id,)).fetchone()
                items.arrive(conn, run_id, now)
