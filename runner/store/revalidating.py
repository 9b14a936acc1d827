"""The store's verbs of a revalidation: a stage's saved outputs read, and the sorting of them applied.

A stage's saved outputs (:meth:`Revalidating.saved_outputs`) are its
validated results (a pipeline's in ``results``; a job of one stage's, a
completed item's ``output``) and the answers kept of the items that failed
(or wait) as invalid there (their ``output``: a failure keeps it).

Applied (:meth:`Revalidating.revalidated`) in transactions of ``CHUNK``
items each, through the one writer of item state: a failed item whose
answer now passes completes its stage as at any boundary (its result saved,
pending at the next stage, or completed past the last: the moves ``rewind``
and ``finish``); a result still valid takes the stage's fingerprint now
(no move); a result now invalid sends its item back to the stage (``rewind``),
its results from there on forgotten; or, as a run revalidates on its own
(no person agreed to a charge again), fails there as invalid, its answer
kept and its results from there on forgotten, for a person's retry (the
move ``refuse_result``). Each item's history says why (an event of kind
``revalidated`` that moves nothing; the move's own event is the change
trigger's). A revalidation against a job the run was not given (a job file
edited, a notebook's ``Run``) saves the run's job with the schemas it checked
against in its last transaction (``job``), so that what runs the run next
checks, and stamps, as the revalidation did.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, NamedTuple, Protocol

from ..model import FailureKind, Skip
from . import items
from .items import move
from .skips import skip
from .stages import FINISH, FORGET, UNLESS_A_PERSONS
from .database import Conn

#: Items per transaction: well under a second of the write lock.
CHUNK = 500

#: Not answered yet at the stage: the item failed (or waits) there as invalid, its answer kept.
REJECTED = ("items.stage = :stage AND items.state IN ('failed', 'waiting') AND items.hold = 'none' "
            "AND items.error_kind IS NOT DISTINCT FROM 'item_invalid' AND items.output IS NOT NULL")

#: Whether ``:staged`` (a pipeline's results) is true, written as a comparison, not a bare parameter.
STAGED = "(CAST(:staged AS INTEGER) = 1)"

#: A stage's saved outputs (``:staged``: a pipeline's results, else a completed item's output), and the answers
#: kept of the items that failed as invalid there; each with its key, its input and its results (a pipeline's).
SAVED = f"""
SELECT items.id, items.key, items.state IN ('queued', 'running', 'received') AS in_flight,
    CASE WHEN {STAGED} THEN results.result WHEN items.state = 'completed' THEN items.output END AS result,
    CASE WHEN {REJECTED} THEN items.output END AS rejected,
    CASE WHEN {STAGED} AND {REJECTED} THEN (SELECT input FROM inputs WHERE item_id = items.id) END AS input,
    CASE WHEN {STAGED} AND {REJECTED} THEN (SELECT @object_agg(stage, @json(result)) FROM results
                                           WHERE item_id = items.id) END AS passed
FROM items LEFT JOIN results ON {STAGED} AND results.item_id = items.id AND results.stage = :stage
WHERE items.run_id = :run AND (results.result IS NOT NULL OR {REJECTED}
                               OR NOT {STAGED} AND items.state = 'completed' AND items.output IS NOT NULL)
ORDER BY items.id
"""

#: A result still valid, stamped with the stage's fingerprint now (those stamped with another).
RESTAMP = ("UPDATE results SET fingerprint = :fingerprint WHERE item_id = :id AND stage = :stage "
           "AND fingerprint != :fingerprint RETURNING item_id")
#: The answer kept of a failed item, saved as the stage's result.
SAVE_RESULT = """
INSERT INTO results (item_id, stage, result, fingerprint, at)
SELECT id, :stage, output, :fingerprint, :now FROM items WHERE id = :id
ON CONFLICT (item_id, stage) DO UPDATE
SET result = excluded.result, fingerprint = excluded.fingerprint, at = excluded.at, work = NULL
"""
#: The run's job, given the schemas a revalidation checked against.
GIVE_JOB = "UPDATE runs SET job = :job, updated_at = :now WHERE id = :run"
#: Why, in an item's history: an event that moves nothing.
NOTE = """
INSERT INTO events (run_id, item_id, at, from_state, to_state, kind, message, items, stage)
SELECT run_id, id, :now, state, state, 'revalidated', :why, 0, :stage FROM items WHERE id = :id
"""
NOW_VALID = "its saved answer passes the output schema now; stage completed with no call"
STILL_VALID = "its result still passes the output schema; kept, with no call"
NOW_INVALID = ("its result no longer passes the output schema ({why}); sent again: "
               "may repeat a charge (it was answered)")
REFUSED = ("its result no longer passes the output schema ({why}); failed, its answer kept, not sent "
           "again: it was answered, so a person's retry sends it (and may repeat a charge)")
#: A result now refused, failed as invalid (``:kind``), its answer kept: a pipeline's result at the stage (``:staged``),
#: else its output.
REFUSE = {"stage": "stage = :stage", "error_kind": "error_kind = :kind", "error": "error = :error",
          "retryable": "retryable = 1", "output": f"output = CASE WHEN {STAGED} THEN (SELECT result FROM results "
                                                  "WHERE results.item_id = items.id AND results.stage = :stage) "
                                                  "ELSE output END"}
REFUSED_ERROR = "the output schema changed and refuses its saved answer ({why}); a retry sends it again"
#: A job of one stage's completion: its answer is its output, as it is.
ONE_STAGE = {"stage": "stage = :stage", "output": "output = output"}
#: Not in flight (its batch settles it), and not failed by a person (that stands).
AT_REST = f"items.id = :id AND items.state IN ('completed', 'pending', 'waiting', 'failed') AND {UNLESS_A_PERSONS}"


class Onward(NamedTuple):
    """Where an item that completes a stage goes: its next stage (None: completed) and the stages it skips."""

    stage: str | None
    skipped: tuple[Skip, ...] = ()


class SavedRow(NamedTuple):
    """One saved output as read (JSON text), before the rule reads it."""

    id: int
    key: str
    in_flight: bool
    result: str | None
    rejected: str | None
    input: str | None
    passed: str | None


class Writing(Protocol):
    def write(self) -> AbstractContextManager[Conn]: ...
    def rows(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[dict[str, Any]]: ...


class Revalidating:
    """The verbs of a revalidation (mixed into ``sqlite.Store``)."""

    def saved_outputs(self: Writing, run_id: int, stage: str, *, staged: bool) -> list[SavedRow]:
        """A stage's saved outputs (see ``SAVED``), in item order."""
        rows = self.rows(SAVED, {"run": run_id, "stage": stage, "staged": staged})
        return [SavedRow(row["id"], row["key"], bool(row["in_flight"]), row["result"], row["rejected"],
                         row["input"], row["passed"]) for row in rows]

    def revalidated(
        self: Writing, run_id: int, stage: str, *, stages: Sequence[str], fingerprint: str | None,
        complete: Mapping[int, Onward], restamp: Sequence[int], again: Mapping[int, str], now: float,
        refuse: Mapping[int, str] | None = None, job: str | None = None,
    ) -> None:
        """Apply a stage's sorting, ``CHUNK`` items a transaction: ``complete`` (item id -> where it goes),
        ``restamp`` (with ``fingerprint``; None: a job of one stage, whose results carry none), ``again`` (item
        id -> what is wrong now: sent again), ``refuse`` (the same: failed as invalid, not sent). ``stages``: the
        job's, in order. An item that moved meanwhile is left alone. ``job`` (JSON): the run's job from now on,
        saved in the last transaction (one, if there is nothing else to write)."""
        work: list[tuple[str, int, Any]] = [("complete", i, to) for i, to in complete.items()]
        work += [("restamp", i, None) for i in restamp if fingerprint is not None]
        work += [("again", i, why) for i, why in again.items()]
        work += [("refuse", i, why) for i, why in (refuse or {}).items()]
        chunks = [work[start:start + CHUNK] for start in range(0, len(work), CHUNK)] or ([[]] if job else [])
        for at, chunk in enumerate(chunks, 1):
            with self.write() as conn:
                if job is not None and at == len(chunks):
                    conn.execute(GIVE_JOB, {"job": job, "now": now, "run": run_id})
                for what, item_id, detail in chunk:
                    params = {"id": item_id, "stage": stage, "fingerprint": fingerprint, "now": now, "run": run_id}
                    if what == "complete":
                        _complete(conn, params, detail)
                    elif what == "restamp" and conn.execute(RESTAMP, params).fetchall():
                        conn.execute(NOTE, {**params, "why": STILL_VALID})
                    elif what in ("again", "refuse"):
                        _now_invalid(conn, params, stages, detail, send=what == "again")


def _complete(conn: Conn, params: dict[str, Any], to: Onward) -> None:
    """A failed item whose answer now passes: its stage completed, as at a boundary."""
    if not conn.execute(f"SELECT 1 FROM items WHERE items.id = :id AND {REJECTED}", params).fetchone():
        return
    if params["fingerprint"] is None:
        moved = move(conn, "finish", where="items.id = :id", values=ONE_STAGE, params=params, returning="items.id")
    else:
        conn.execute(SAVE_RESULT, params)
        if to.stage is None:
            moved = move(conn, "finish", where="items.id = :id", values=FINISH, params=params, returning="items.id")
        else:
            moved = move(conn, "rewind", where="items.id = :id", values={"stage": "stage = :to", **items.FRESH_BUDGET},
                         params={**params, "to": to.stage}, returning="items.id")
            skip(conn, [(params, each) for each in to.skipped])
            items.arrive(conn, params["run"], params["now"])
    if moved:
        conn.execute(NOTE, {**params, "why": NOW_VALID})


def _now_invalid(conn: Conn, params: dict[str, Any], stages: Sequence[str], why: str, *,
                 send: bool) -> None:
    """A result now invalid: its item sent back to the stage (``send``: a person agreed to a charge again), or else
    failed there as invalid, its answer kept (a later revalidation may complete it); its results from there on
    forgotten."""
    if send:
        moved = move(conn, "rewind", where=AT_REST, values={"stage": "stage = :stage", **items.FRESH_BUDGET},
                     params=params, returning="items.id")
    else:
        moved = move(conn, "refuse_result", where=AT_REST, values=REFUSE, returning="items.id", params={
            **params, "kind": FailureKind.ITEM_INVALID.value, "error": REFUSED_ERROR.format(why=why),
            "staged": params["fingerprint"] is not None})
    if moved:
        conn.execute(FORGET, {**params, "forget": json.dumps(list(stages[stages.index(params["stage"]):]))})
        conn.execute(NOTE, {**params, "why": (NOW_INVALID if send else REFUSED).format(why=why)})
