"""The store's verbs of stages: the boundary between two stages, and a run whose stages changed sent on again.

The boundary (:func:`pass_on`) is part of a batch's settlement, in its
transaction: each validated result of a pipeline (a job of ``[[stage]]``
tables) saved under its stage in ``results``, with the stage's fingerprint
(a job of one stage keeps its result as the item's output, as before); the items that go on moved to ``pending`` at the next
stage the engine chose (``next_stage``, the rule's answer), the stages they
skipped noted in their history (a decision kept for one dropped, noted:
:mod:`runner.store.skips`); those that fan out waiting at their join
(:mod:`runner.store.fanout`); the others ``completed``. The counts and
events follow from the moves (``items_change``, ``LOG_BATCH``).

A run started again with changed stages (:class:`Stages`): its items not in
flight whose results may not stand for the stages now, and those left at a
stage the job no longer has, are read (``stale_items``), the engine asks
:func:`runner.rules.stages.onward` where each must go, and ``rewind`` sends
them there, forgetting the results from that stage on (or keeps them
failed there, or completes those whose stages are all done).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from ..model import Batch, Claim, Settlement
from . import fanout, items
from .connection import SQLiteFile
from .items import move, move_each
from .skips import skip

if TYPE_CHECKING:
    from ..batch_api import RequestsFile
    from ..item_rows import ItemRow

#: A stage's result saved for each item of ``:ids`` in batch ``:batch`` whose output passed validation.
SAVE_RESULTS = """
INSERT INTO results (item_id, stage, result, fingerprint, at)
SELECT id, stage, output, :fingerprint, :now FROM items
WHERE id IN (SELECT value FROM json_each(:ids)) AND batch_id = :batch AND state = 'received' AND output IS NOT NULL
ON CONFLICT (item_id, stage) DO UPDATE SET result = excluded.result, fingerprint = excluded.fingerprint, at = excluded.at
"""

IN_BATCH = "items.id = :id AND items.batch_id = :batch AND items.output IS NOT NULL"
DONE = "items.id IN (SELECT value FROM json_each(:ids)) AND items.batch_id = :batch AND items.output IS NOT NULL"


def pass_on(conn: sqlite3.Connection, settlement: Settlement, params: dict[str, Any]) -> None:
    """The boundary, inside the settlement's transaction: each validated result saved under its stage, the
    items that go on pending at their next stage (the stages they skip noted), the others completed."""
    if settlement.fingerprint:  # a pipeline's (a job of one stage keeps its result as the item's output)
        conn.execute(SAVE_RESULTS, {**params, "ids": json.dumps(settlement.completed),
                                    "fingerprint": settlement.fingerprint})
    move_each(conn, "next_stage", where=IN_BATCH, values={"stage": "stage = :stage", **items.FRESH_BUDGET},
              params=[{**params, "id": i, "stage": stage} for i, stage in settlement.next_stage.items()])
    skip(conn, [{**params, "id": i, "stage": stage} for i, skipped in settlement.skipped.items() for stage in skipped])
    fanout.fan_out(conn, settlement, params)
    if settlement.next_stage:  # those at a decide stage wait there for a person
        (run_id,) = conn.execute("SELECT run_id FROM batches WHERE id = ?", (params["batch"],)).fetchone()
        items.arrive(conn, run_id, params["now"])
    done = [i for i in settlement.completed if i not in settlement.next_stage and i not in settlement.fan_out]
    if done:
        move(conn, "complete", where=DONE, params={**params, "ids": json.dumps(done)}, logged_for="batch")


#: A pipeline's items whose results may not stand for its stages now (``:stages``, a JSON list of [name,
#: fingerprint] in order): any item left at a stage the job no longer has; completed, pending, waiting or failed
#: with a result saved under a fingerprint its stage no longer has, or without a result of a stage before theirs
#: (of any stage, for a completed one: a stage added, a ``when`` widened). Each with its input, its results
#: (stage -> [result, fingerprint]), its state, its failure's kind and its stage. Stage names are compared as
#: values, never spliced into a JSON path. Sub-items are left out: a fan-out made again replaces them.
STALE = """
WITH stage (name, fingerprint, place) AS (
    SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), key FROM json_each(:stages))
SELECT items.id, (SELECT input FROM inputs WHERE item_id = items.id) AS input,
    (SELECT json_group_object(stage, json_array(json(result), fingerprint)) FROM results
     WHERE item_id = items.id) AS saved, items.state, items.error_kind, items.stage
FROM items WHERE run_id = :run AND parent_id IS NULL AND (
    NOT EXISTS (SELECT 1 FROM stage WHERE stage.name = items.stage)
    OR state IN ('completed', 'pending', 'waiting', 'failed') AND (
        EXISTS (SELECT 1 FROM results JOIN stage ON stage.name = results.stage
                WHERE results.item_id = items.id AND results.fingerprint != stage.fingerprint)
        OR EXISTS (SELECT 1 FROM stage
                   WHERE (items.state = 'completed'
                          OR stage.place < (SELECT place FROM stage AS at WHERE at.name = items.stage))
                   AND NOT EXISTS (SELECT 1 FROM results WHERE item_id = items.id AND results.stage = stage.name))))
"""

#: The items a re-run moves, but not one a person failed since it was read (a cancel, a rejection): that stands.
UNLESS_A_PERSONS = ("items.id = :id AND (items.state != 'failed' OR coalesce(items.error_kind, '') "
                    "NOT IN ('cancelled', 'rejected'))")

#: A completed item's result kept as its first stage's (the stage asks what the old job asked).
KEEP = "INSERT INTO results (item_id, stage, result, fingerprint, at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"

#: An item's results from the stage it goes back to on (``:forget``, a JSON list of stages).
FORGET = "DELETE FROM results WHERE item_id = :id AND stage IN (SELECT value FROM json_each(:forget))"


class Stale(NamedTuple):
    """An item a re-run may send on: its id, input, results (stage -> (result, fingerprint)), state, failure's
    kind and stage."""

    id: int
    input: str
    saved: dict[str, tuple[Any, str]]
    state: str
    kind: str | None
    stage: str


class Claiming(Protocol):
    """A store that forms batches (``sqlite.Store``), as :meth:`Stages.claim_first` uses it."""

    def write(self) -> AbstractContextManager[sqlite3.Connection]: ...
    def claim_batch(
        self, run_id: int, *, max_items: int, max_chars: int, now: float, file: RequestsFile | None = None,
        stage: str | None = None,
    ) -> Batch | None: ...


class Stages(fanout.FanOuts):
    """The verbs of stages: forming a batch of the first stage with items in line, and a run whose stages changed
    since its items went through them."""

    def claim_first(self: Claiming, run_id: int, claims: Sequence[Claim], *, now: float) -> Batch | None:
        """Form a batch of the first of the ``claims``' stages that has items in line (one transaction)."""
        with self.write():
            for claim in claims:
                batch = self.claim_batch(run_id, max_items=claim.max_items, max_chars=claim.max_chars, now=now,
                                         file=claim.file, stage=claim.stage)
                if batch is not None:
                    return batch
        return None


    def stale_items(self, run_id: int, stages: Sequence[tuple[str, str]]) -> list[Stale]:
        """A pipeline's items whose results may not stand for its ``stages`` now ((name, fingerprint), in order),
        and those left at a stage gone (``STALE``)."""
        rows = self.rows(STALE, {"run": run_id, "stages": json.dumps(stages)})
        return [Stale(row["id"], row["input"], {stage: (result, fingerprint) for stage, (result, fingerprint)
                                                in json.loads(row["saved"] or "{}").items()},
                      row["state"], row["error_kind"], row["stage"]) for row in rows]

    def to_pipeline(
        self, name: str, pairs: Sequence[tuple[ItemRow, ItemRow]], *, first: str, kept: str | None, now: float
    ) -> None:
        """A run of one stage given ``[[stage]]`` tables, one chunk of its items (each row under the old job's rule
        and the pipeline's), in one transaction: an item whose input is the same takes the pipeline's fingerprint
        and input; a completed one keeps its output as the ``first`` stage's result when ``kept`` (that stage's
        fingerprint) is given. Items whose input did change are left to the prepare (``input_changed``)."""
        with self.write() as conn:
            for old, new in pairs:
                row = conn.execute(items.TO_PIPELINE, {"name": name, "key": new.key, "old": old.fingerprint,
                                                       "new": new.fingerprint, "chars": new.chars, "now": now}
                                   ).fetchone()
                if row is None:
                    continue
                conn.execute(items.SAVE_INPUT, (row[0], new.input))
                if kept is not None and row[1] == "completed" and row[2] is not None:
                    conn.execute(KEEP, (row[0], first, row[2], kept, now))

    def rewind(
        self, moves: Mapping[int, str], stages: Sequence[str], *, now: float, restage: Mapping[int, str] | None = None,
        finish: Mapping[int, str] | None = None,
    ) -> None:
        """In one transaction: items sent to a stage (item id -> stage), pending there, their results from it on
        forgotten (``stages``: the job's, in order); failed items put at the stage a retry sends them to
        (``restage``), failed still, their results from it on forgotten; items every stage of whose has its
        result completed at a stage (``finish``: the change trigger logs and counts it). An item that moved
        meanwhile (a person's cancel, rejection or retry) is left alone, its results kept."""
        with self.write() as conn:
            for name, where, values, each in [
                ("rewind", UNLESS_A_PERSONS, {"stage": "stage = :stage", **items.FRESH_BUDGET}, moves),
                ("restage", "items.id = :id", {"stage": "stage = :stage"}, restage or {}),
            ]:
                for item_id, stage in each.items():
                    params = {"id": item_id, "stage": stage, "now": now}
                    if move(conn, name, where=where, params=params, returning="items.id", values=values):
                        conn.execute(FORGET, {"id": item_id, "forget": json.dumps(list(stages[stages.index(stage):]))})
            move_each(conn, "finish", where=UNLESS_A_PERSONS, values={"stage": "stage = :stage"},
                      params=[{"id": i, "stage": stage, "now": now} for i, stage in (finish or {}).items()])
