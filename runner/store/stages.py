"""The store's verbs of stages: the boundary between two stages, and a run whose stages changed sent on again.

The boundary (:func:`pass_on`) is part of a batch's settlement, in its
transaction: each validated result of a pipeline (a job of ``[[stage]]``
tables) saved under its stage in ``results``, with the stage's fingerprint
(a job of one stage keeps its result as the item's output, as before); the items that go on moved to ``pending`` at the next
stage the engine chose (``next_stage``, the rule's answer), the stages they
skipped noted in their history; those that fan out waiting at their join
(:mod:`runner.store.fanout`); the others ``completed``. The counts and
events follow from the moves (``items_change``, ``LOG_BATCH``).

A run started again with changed stages (:class:`Stages`): its completed
items whose results may be stale are read (``stale_items``), the engine asks
:func:`runner.rules.stages.resume_at` where each must go again, and
``rewind`` sends them back there, forgetting the results from that stage on.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

from ..model import Batch, Claim, Settlement
from . import fanout, items
from .connection import SQLiteFile
from .items import move, move_each

if TYPE_CHECKING:
    from ..batch_api import RequestsFile

#: A stage's result saved for each item of ``:ids`` in batch ``:batch`` whose output passed validation.
SAVE_RESULTS = """
INSERT INTO results (item_id, stage, result, fingerprint, at)
SELECT id, stage, output, :fingerprint, :now FROM items
WHERE id IN (SELECT value FROM json_each(:ids)) AND batch_id = :batch AND state = 'received' AND output IS NOT NULL
ON CONFLICT (item_id, stage) DO UPDATE SET result = excluded.result, fingerprint = excluded.fingerprint, at = excluded.at
"""

#: A stage an item skipped (its ``when`` false), in its history: an event that moves nothing.
SKIPPED = """
INSERT INTO events (run_id, item_id, at, from_state, to_state, kind, message, items, stage)
SELECT run_id, id, :now, 'pending', 'pending', 'skipped', 'its when is false: stage skipped', 0, :stage
FROM items WHERE id = :id
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
    conn.executemany(SKIPPED, [{**params, "id": i, "stage": stage}
                               for i, skipped in settlement.skipped.items() for stage in skipped])
    fanout.fan_out(conn, settlement, params)
    done = [i for i in settlement.completed if i not in settlement.next_stage and i not in settlement.fan_out]
    if done:
        move(conn, "complete", where=DONE, params={**params, "ids": json.dumps(done)}, logged_for="batch")


#: Completed items whose results may be stale: one saved under a fingerprint the stage no longer has
#: (``:fingerprints``, stage -> its fingerprint now), or completed before the last stage (``:last``: a stage
#: added at the end, or skipped); and items waiting for a stage the job no longer has. Each with its input
#: and its results (stage -> [result, fingerprint]). Sub-items are left out: a fan-out made again replaces them.
STALE = """
SELECT items.id, (SELECT input FROM inputs WHERE item_id = items.id) AS input,
    (SELECT json_group_object(stage, json_array(json(result), fingerprint)) FROM results
     WHERE item_id = items.id) AS saved
FROM items WHERE run_id = :run AND parent_id IS NULL AND (state = 'completed' AND (stage != :last OR EXISTS (
    SELECT 1 FROM results WHERE item_id = items.id
    AND fingerprint != coalesce(json_extract(:fingerprints, '$."' || stage || '"'), fingerprint)))
    OR state IN ('pending', 'waiting') AND json_extract(:fingerprints, '$."' || stage || '"') IS NULL)
"""

#: An item's results from the stage it goes back to on (``:forget``, a JSON list of stages).
FORGET = "DELETE FROM results WHERE item_id = :id AND stage IN (SELECT value FROM json_each(:forget))"


class Claiming(Protocol):
    """A store that forms batches (``sqlite.Store``), as :meth:`Stages.claim_first` uses it."""

    def write(self) -> AbstractContextManager[sqlite3.Connection]: ...
    def claim_batch(
        self, run_id: int, *, max_items: int, max_chars: int, now: float, file: RequestsFile | None = None,
        stage: str | None = None,
    ) -> Batch | None: ...


class Stages(fanout.FanOuts):
    """The verbs of stages: forming a batch of the first stage with items in line, and a run whose stages changed
    since its items completed."""

    def claim_first(self: Claiming, run_id: int, claims: Sequence[Claim], *, now: float) -> Batch | None:
        """Form a batch of the first of the ``claims``' stages that has items in line (one transaction)."""
        with self.write():
            for claim in claims:
                batch = self.claim_batch(run_id, max_items=claim.max_items, max_chars=claim.max_chars, now=now,
                                         file=claim.file, stage=claim.stage)
                if batch is not None:
                    return batch
        return None


    def stale_items(
        self, run_id: int, fingerprints: Mapping[str, str], *, last: str
    ) -> list[tuple[int, str, dict[str, tuple[Any, str]]]]:
        """Completed items whose results may be stale: (id, input, stage -> (result, fingerprint))."""
        rows = self.rows(STALE, {"run": run_id, "fingerprints": json.dumps(fingerprints), "last": last})
        return [(row["id"], row["input"], {stage: (result, fingerprint) for stage, (result, fingerprint)
                                           in json.loads(row["saved"] or "{}").items()}) for row in rows]

    def rewind(self, moves: Mapping[int, str], stages: Sequence[str], *, now: float) -> None:
        """Send completed items (or items at a stage gone) back to a stage (item id -> stage), pending there,
        their results from it on forgotten (``stages``: the job's, in order), in one transaction."""
        with self.write() as conn:
            move_each(conn, "rewind", where="items.id = :id", values={"stage": "stage = :stage", **items.FRESH_BUDGET},
                      params=[{"id": i, "stage": stage, "now": now} for i, stage in moves.items()])
            conn.executemany(FORGET, [{"id": i, "forget": json.dumps(list(stages[stages.index(stage):]))}
                                      for i, stage in moves.items()])
