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
failed there, or completes those whose stages are all done, saying why). A
sub-item left unsettled at a stage gone goes on inside its fan-out (or
completes), so its parent joins; one whose result of a stage inside its
fan-out is stale goes back there, its parent waiting at its join again
(:func:`runner.store.fanout.reopen`); a parent sent back to its fan-out or
before retires its sub-items in the same transaction.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from ..model import Batch, Claim, Settlement
from . import fanout, items
from .base import StoreBase
from .items import move, move_each
from .skips import skip
from .database import Conn

if TYPE_CHECKING:
    from ..batch_api import RequestsFile
    from ..item_rows import ItemRow
    from .reusing import Reuser

#: A stage's result saved for each item of ``:works`` (item id -> the work its result answers, :mod:`runner.reusing`;
#: null for none) in batch ``:batch`` whose output passed validation, with its work.
SAVE_RESULTS = """
INSERT INTO results (item_id, stage, result, fingerprint, at, work)
SELECT items.id, items.stage, items.output, :fingerprint, :now, worked.value
FROM @object_by_id(:works, worked) JOIN items ON items.id = worked.key
WHERE items.batch_id = :batch AND items.state = 'received' AND items.output IS NOT NULL
ON CONFLICT (item_id, stage) DO UPDATE SET result = excluded.result, fingerprint = excluded.fingerprint, at = excluded.at,
    work = excluded.work
"""

IN_BATCH = "items.id = :id AND items.batch_id = :batch AND items.output IS NOT NULL"
#: The items of batch ``:batch`` a settlement completes, each with the work its result answers (``:works``, item id ->
#: work, null for none; :mod:`runner.reusing`), joined by id: one lookup per item, not a read of the object per item.
WORKED = "FROM @object_by_id(:works, worked)"
DONE = "items.id = worked.key AND items.batch_id = :batch AND items.output IS NOT NULL"

#: The scheduled items of a run whose time came (read on the index of scheduled items).
SCHEDULED_DUE = "items.run_id = :run AND items.not_before <= :now"


def release_due(conn: Conn, run_id: int, now: float) -> None:
    """The run's scheduled items whose time came, pending (one at a decide stage waits for a person there)."""
    if move(conn, "due", where=SCHEDULED_DUE, params={"run": run_id, "now": now}, returning="items.id"):
        items.arrive(conn, run_id, now)


def pass_on(conn: Conn, settlement: Settlement, params: dict[str, Any]) -> None:
    """The boundary, inside the settlement's transaction: each validated result saved under its stage, the
    items that go on pending at their next stage (the stages they skip noted), the others completed."""
    if settlement.fingerprint:  # a pipeline's (a job of one stage keeps its result as the item's output)
        conn.execute(SAVE_RESULTS, {**params, "fingerprint": settlement.fingerprint,
                                    "works": json.dumps({i: settlement.works.get(i) for i in settlement.completed})})
    move_each(conn, "next_stage", where=IN_BATCH, values={"stage": "stage = :stage", **items.FRESH_BUDGET},
              params=[{**params, "id": i, "stage": stage} for i, stage in settlement.next_stage.items()])
    skip(conn, [({**params, "id": i}, each) for i, skipped in settlement.skipped.items() for each in skipped])
    fanout.fan_out(conn, settlement, params)
    if settlement.next_stage:  # those at a decide stage wait there for a person
        (run_id,) = conn.execute("SELECT run_id FROM batches WHERE id = ?", (params["batch"],)).fetchone()
        items.arrive(conn, run_id, params["now"])
    done = [i for i in settlement.completed if i not in settlement.next_stage and i not in settlement.fan_out]
    if done:
        # The work of a one-stage job's result is its item's (a pipeline's is its result's: none here).
        works = {i: None if settlement.fingerprint else settlement.works.get(i) for i in done}
        move(conn, "complete", where=DONE, source=WORKED, values={"work": "work = worked.value"},
             logged_for="batch", params={**params, "works": json.dumps(works)})


#: A pipeline's items whose results may not stand for its stages now (``:stages``, a JSON list of [name,
#: fingerprint, inside] in order: the stages its items pass outside any fan-out, inside 0, then those its
#: sub-items pass inside one, inside 1): a parent (an item of no parent) left at a stage the job no longer has, a
#: sub-item left unsettled at a stage the job (``:names``, every stage's name) no longer has (its parent waits for
#: it at its join); completed, pending, waiting or failed with a result saved under a fingerprint its stage no
#: longer has, or without a result of a stage before theirs (of any stage, for a completed one: a stage added, a
#: ``when`` widened), a parent over the stages outside a fan-out, a sub-item over those inside, whose parent
#: ``fanout.REOPENABLE`` may wait at its join again. Each with its input, its results (stage -> [result,
#: fingerprint]), its state, its failure's kind, its stage and its parent. Stage names are compared as values,
#: never spliced into a JSON path.
STALE = f"""
WITH stage (name, fingerprint, place, inside) AS (
    SELECT @field(listed.value, '$[0]'), @field(listed.value, '$[1]'), listed.key, @truth(listed.value, '$[2]')
    FROM @list_of_json(:stages, listed))
SELECT items.id, (SELECT input FROM inputs WHERE item_id = items.id) AS input,
    (SELECT @object_agg(stage, @array(@json(result), fingerprint)) FROM results
     WHERE item_id = items.id) AS saved, items.state, items.error_kind, items.stage, items.parent_id
FROM items WHERE run_id = :run AND (
    parent_id IS NULL AND NOT EXISTS (SELECT 1 FROM stage WHERE stage.name = items.stage AND NOT stage.inside)
    OR parent_id IS NOT NULL AND state IN ('pending', 'waiting', 'running', 'received')
    AND NOT EXISTS (SELECT 1 FROM @list_of_texts(:names, listed) WHERE listed.value = items.stage)
    OR state IN ('completed', 'pending', 'waiting', 'failed')
    AND (parent_id IS NULL OR parent_id IN (SELECT id FROM items AS parent WHERE {fanout.REOPENABLE})) AND (
        EXISTS (SELECT 1 FROM results JOIN stage ON stage.name = results.stage
                WHERE results.item_id = items.id AND stage.inside = (items.parent_id IS NOT NULL)
                AND results.fingerprint != stage.fingerprint)
        OR EXISTS (SELECT 1 FROM stage
                   WHERE stage.inside = (items.parent_id IS NOT NULL)
                   AND (items.state = 'completed'
                        OR stage.place < (SELECT place FROM stage AS at WHERE at.name = items.stage))
                   AND NOT EXISTS (SELECT 1 FROM results WHERE item_id = items.id AND results.stage = stage.name))))
"""

#: Why a re-run completed an item (``finish``), in its history after the move's own event: an event that moves
#: nothing (the change trigger counts and logs the move).
FINISHED = """
INSERT INTO events (run_id, item_id, at, from_state, to_state, kind, message, items, stage)
SELECT run_id, id, :now, state, state, 'finished', :why, 0, stage FROM items WHERE id = :id
"""
#: Whether an item is at a stage the job (``:names``) no longer has.
GONE = "SELECT stage NOT IN (@texts(:names)) FROM items WHERE id = :id"
NO_STAGE_LEFT = "its stage is no longer in the job, and every stage it needs has its result"
NOT_NEEDED = "every stage it needs has its result: its stage no longer takes it"

#: A completion's values: at its last stage, that stage's result its output (as a batch's completion leaves it).
FINISH = {"stage": "stage = :stage",
          "output": "output = (SELECT result FROM results WHERE results.item_id = items.id AND results.stage = :stage)"}

#: An item a person cancelled in flight at a stage gone, still so.
STILL_CANCELLED = "items.id = :id AND items.error_kind IS NOT DISTINCT FROM 'cancelled'"
#: Why it failed.
CANCELLED_AT_GONE = ("cancelled by a person; its stage is no longer in the job, where its call was in flight "
                     "(it may have been billed)")

#: The items a re-run moves, but not one a person failed since it was read (a cancel, a rejection): that stands.
UNLESS_A_PERSONS = ("items.id = :id AND (items.state != 'failed' OR coalesce(items.error_kind, '') "
                    "NOT IN ('cancelled', 'rejected'))")

#: A completed item's result kept as its first stage's (the stage asks what the old job asked).
KEEP = "INSERT INTO results (item_id, stage, result, fingerprint, at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"

#: An item's results from the stage it goes back to on (``:forget``, a JSON list of stages).
FORGET = "DELETE FROM results WHERE item_id = :id AND stage IN (@texts(:forget))"


class Stale(NamedTuple):
    """An item a re-run may send on: its id, input, results (stage -> (result, fingerprint)), state, failure's
    kind, stage, and its parent's id (a sub-item's)."""

    id: int
    input: str
    saved: dict[str, tuple[Any, str]]
    state: str
    kind: str | None
    stage: str
    parent: int | None = None


class Claiming(Protocol):
    """A store that forms batches (``sqlite.Store``), as :meth:`Stages.claim_first` uses it."""

    def write(self) -> AbstractContextManager[Conn]: ...
    def claim_batch(
        self, run_id: int, *, max_items: int, max_chars: int, now: float, file: RequestsFile | None = None,
        stage: str | None = None, reuse: Reuser | None = None, released: bool = False, owner: str | None = None,
    ) -> Batch | None: ...


class Stages(fanout.FanOuts):
    """The verbs of stages: forming a batch of the first stage with items in line, and a run whose stages changed
    since its items went through them."""

    def claim_first(
        self: Claiming, run_id: int, claims: Sequence[Claim], *, now: float, owner: str | None = None
    ) -> Batch | None:
        """Form a batch of the first of the ``claims``' stages that has items in line (one transaction), the worker
        ``owner``'s, the scheduled items whose time came made due once first."""
        with self.write() as conn:
            release_due(conn, run_id, now)
            for claim in claims:
                batch = self.claim_batch(run_id, max_items=claim.max_items, max_chars=claim.max_chars, now=now,
                                         file=claim.file, stage=claim.stage, reuse=claim.reuse, released=True,
                                         owner=owner)
                if batch is not None:
                    return batch
        return None


    def stale_items(
        self, run_id: int, stages: Sequence[tuple[str, str]], names: Sequence[str] | None = None, *,
        inside: Sequence[tuple[str, str]] = (),
    ) -> list[Stale]:
        """A pipeline's items whose results may not stand for its ``stages`` now ((name, fingerprint), in order,
        outside any fan-out), and those left at a stage gone; sub-items whose results may not stand for the stages
        ``inside`` a fan-out ((name, fingerprint), in order), and those left unsettled at a stage not among
        ``names`` (every stage of the job; by default, ``stages``'). See ``STALE``."""
        names = [name for name, _ in stages] if names is None else names
        placed = [[name, fingerprint, 0] for name, fingerprint in stages] + [
            [name, fingerprint, 1] for name, fingerprint in inside]
        rows = self.rows(STALE, {"run": run_id, "stages": json.dumps(placed), "names": json.dumps(list(names))})
        return [Stale(row["id"], row["input"], {stage: (result, fingerprint) for stage, (result, fingerprint)
                                                in json.loads(row["saved"] or "{}").items()},
                      row["state"], row["error_kind"], row["stage"], row["parent_id"]) for row in rows]

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
        finish: Mapping[int, str] | None = None, cancel: Mapping[int, str] | None = None,
        retire: Collection[int] = (),
    ) -> None:
        """In one transaction: items sent to a stage (item id -> stage), pending there, their results from it on
        forgotten (``stages``: the job's, in order); failed items put at the stage a retry sends them to
        (``restage``), failed still, their results from it on forgotten; items every stage of whose has its
        result completed at a stage, its result their output (``finish``: the change trigger logs and counts it,
        and an event that moves nothing says why); items a person cancelled in flight failed ``cancelled``, at
        the stage a retry sends them to (``cancel``). The sub-items of each of ``retire`` that moved are removed
        (:func:`runner.store.fanout.retire_sub_items`). An item that moved meanwhile (a person's cancel,
        rejection or retry) is left alone, its results kept."""
        sent_again: list[int] = []
        with self.write() as conn:
            for name, where, values, each in [
                ("rewind", UNLESS_A_PERSONS, {"stage": "stage = :stage", **items.FRESH_BUDGET}, moves),
                ("restage", "items.id = :id", {"stage": "stage = :stage"}, restage or {}),
                ("finish", UNLESS_A_PERSONS, FINISH, finish or {}),
            ]:
                for item_id, stage in each.items():
                    params = {"id": item_id, "stage": stage, "now": now, "names": json.dumps(list(stages))}
                    gone = conn.execute(GONE, params).fetchone() if name == "finish" else None
                    if move(conn, name, where=where, params=params, returning="items.id", values=values):
                        _moved(conn, name, params, stages, retire)
                        sent_again.append(item_id)
                        if gone is not None:
                            conn.execute(FINISHED, {**params, "why": NO_STAGE_LEFT if gone[0] else NOT_NEEDED})
            for item_id, stage in (cancel or {}).items():
                _cancel(conn, item_id, stage, stages, now)
            fanout.reopen(conn, sent_again, now)


def _moved(conn: Conn, name: str, params: dict[str, Any], stages: Sequence[str],
           retire: Collection[int]) -> None:
    """What follows a re-run's move of one item: its results from its stage on forgotten (not a completion's), its
    sub-items retired when its fan-out no longer stands."""
    if name != "finish":
        conn.execute(FORGET, {**params, "forget": json.dumps(list(stages[stages.index(params["stage"]):]))})
    if params["id"] in retire:
        fanout.retire_sub_items(conn, params["id"], params["now"])


def _cancel(conn: Conn, item_id: int, stage: str, stages: Sequence[str], now: float) -> None:
    """An item a person cancelled in flight, at a stage gone: failed ``cancelled`` now (a call of an upstream task
    that may still run counted as maybe paid), then at the stage a retry sends it to."""
    params = {"id": item_id, "stage": stage, "now": now, "message": CANCELLED_AT_GONE}
    items.count_task_lines(conn, STILL_CANCELLED, params)
    if move(conn, "cancel", where=STILL_CANCELLED, values=items.CANCELLED, params=params, returning="items.id"):
        if move(conn, "restage", where="items.id = :id AND items.stage != :stage", values={"stage": "stage = :stage"},
                params=params, returning="items.id"):
            _moved(conn, "restage", params, stages, ())
