"""The one writer of the ``items`` table: every move of an item's state, by the transition table, and its tallies.

:func:`move` makes every state change (and every change of an item's
``hold``). It takes the move's name in :data:`runner.model.MOVES` and what
the caller's verb selects, and builds the one ``UPDATE``: the new state and
hold, an expression for each field the table says the move sets (no more,
no fewer), NULL for each it clears, and the origin states as a condition, so
an item in any other state is left alone. The statements are built once per
shape and kept.

Events: a move on the batch path (``per_batch``) is logged here, once for its
batch, in the same transaction: after the update with the count it made when
the items left one state, before it (one row per state they leave) when they
may leave several. Every other state change is logged per item by the
trigger ``items_change`` (see ``schema``), which also keeps ``counts``.

The other writes here change no state: the tallies of paid, maybe paid and
refused tries (the run's totals of paid and maybe paid calls move with
them: ``add_to_run``), and items added or given a new input.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

from ..model import MOVES, ItemState, Move
from . import ledger
from .database import Conn

#: Items of a batch that moved together; no row when none did.
LOG_BATCH = """
INSERT INTO events (run_id, batch_id, at, from_state, to_state, items, stage)
SELECT run_id, id, :now, :from_state, :to_state, :moved, stage FROM batches WHERE id = :logged_for AND :moved > 0
"""


def move(
    conn: Conn,
    name: str,
    *,
    where: str,
    params: Mapping[str, Any],
    values: Mapping[str, str] | None = None,
    source: str = "",
    origin: ItemState | None = None,
    logged_for: str | None = None,
    returning: str = "",
) -> list[tuple[Any, ...]]:
    """Make the move ``name`` for the items ``where`` selects (joined with ``source``); the rows ``returning`` asks.

    ``values``: field -> SQL expression, for exactly the fields the move
    sets. ``origin`` narrows the move's origin states to one. A move on the
    batch path is logged for the batch whose id is the parameter
    ``logged_for`` names. ``params`` must hold ``now``. Returns the rows
    asked for, or none.
    """
    the_move = MOVES[name]
    origins = _origins(the_move, origin)
    sql = _statement(name, where, tuple(sorted((values or {}).items())), source, origins, returning)
    if the_move.per_batch and len(origins) > 1:
        conn.execute(_log_leaving(where, source, origins), {**params, "logged_for": params[logged_for or ""],
                                                            "to_state": the_move.to})
    cursor = conn.execute(sql, params)
    rows = cursor.fetchall() if returning else []
    if the_move.per_batch and len(origins) == 1:
        conn.execute(LOG_BATCH, {"now": params["now"], "from_state": origins[0], "to_state": the_move.to,
                                 "moved": len(rows) if returning else cursor.rowcount,
                                 "logged_for": params[logged_for or ""]})
    return rows


def move_each(
    conn: Conn, name: str, *, where: str, values: Mapping[str, str], params: list[dict[str, Any]]
) -> None:
    """The move ``name`` (one logged per item) for each of ``params``: one item each, with its own values."""
    the_move = MOVES[name]
    if the_move.per_batch:
        raise ValueError(f"move {name!r} is logged per batch: make it with move()")
    sql = _statement(name, where, tuple(sorted(values.items())), "", tuple(sorted(the_move.origins)), "")
    conn.executemany(sql, params)


def _origins(the_move: Move, origin: ItemState | None) -> tuple[ItemState, ...]:
    if origin is None:
        return tuple(sorted(the_move.origins))
    if origin not in the_move.origins:
        raise ValueError(f"no move from {origin} in {the_move}")
    return (origin,)


@cache
def _statement(
    name: str, where: str, values: tuple[tuple[str, str], ...], source: str, origins: tuple[ItemState, ...],
    returning: str,
) -> str:
    """The ``UPDATE`` of one move for one shape of selection, checked against the transition table."""
    the_move = MOVES[name]
    if {field for field, _ in values} != the_move.sets:
        raise ValueError(f"move {name!r} sets {sorted(the_move.sets)}, not {[field for field, _ in values]}")
    assignments = [f"state = '{the_move.to.value}'", "updated_at = :now"]
    assignments += [expression for _, expression in values]
    assignments += [f"{field} = NULL" for field in sorted(the_move.clears)]
    conditions = [f"({where})", f"items.state IN ({_quoted(origins)})"]
    if the_move.to_hold is not None:
        assignments.append(f"hold = '{the_move.to_hold.value}'")
    if the_move.from_hold is not None:
        conditions.append(f"items.hold = '{the_move.from_hold.value}'")
    sql = f"UPDATE items SET {', '.join(assignments)} {source} WHERE {' AND '.join(conditions)}"
    return f"{sql} RETURNING {returning}" if returning else sql


@cache
def _log_leaving(where: str, source: str, origins: tuple[ItemState, ...]) -> str:
    """The events of a batch-path move whose items may leave several states: one row per state left."""
    return (
        "INSERT INTO events (run_id, batch_id, at, from_state, to_state, items, stage) "
        f"SELECT items.run_id, :logged_for, :now, items.state, :to_state, count(*), items.stage FROM items "
        f"{_from(source)} WHERE ({where}) AND items.state IN ({_quoted(origins)}) "
        "GROUP BY items.run_id, items.stage, items.state"
    )


def _from(source: str) -> str:
    """A ``FROM`` clause of an update, as a join of a select."""
    return source.replace("FROM ", ", ", 1) if source else ""


def _quoted(states: tuple[ItemState, ...]) -> str:
    return ", ".join(f"'{state.value}'" for state in states)


# Tallies: no state changes; a run's totals move with its items' -------------------

#: Each of a batch's items still running may have paid a call with no answer to show.
MAYBE_PAID_RUNNING = (
    "UPDATE items SET maybe_paid = maybe_paid + 1 WHERE batch_id = ? AND state = 'running' "
    "RETURNING run_id, stage, chars"
)

#: Some items of a batch (``:ids``) may have paid a call with no answer to show.
MAYBE_PAID = """
UPDATE items SET maybe_paid = maybe_paid + 1
WHERE id IN (@ints(:ids)) AND batch_id = :batch AND state IN ('running', 'received')
RETURNING run_id, stage, chars
"""

#: The totals of run ``:run`` (or of batch ``:batch``'s run): its items' paid calls and calls that may have been paid.
ADD_TO_RUN = """
UPDATE runs SET paid_calls = paid_calls + :paid_calls, maybe_paid = maybe_paid + :maybe_paid
WHERE id = coalesce(:run, (SELECT run_id FROM batches WHERE id = :batch))
"""


def add_to_run(
    conn: Conn, batch_id: int | None = None, *, run_id: int | None = None, paid_calls: int = 0,
    maybe_paid: int = 0,
) -> None:
    """Move the run's totals with what its (or its batch's) items just gained, in the caller's transaction."""
    if paid_calls or maybe_paid:
        conn.execute(ADD_TO_RUN, {"run": run_id, "batch": batch_id, "paid_calls": paid_calls, "maybe_paid": maybe_paid})


def count_maybe_paid(conn: Conn, batch_id: int, ids: Iterable[int] | None = None) -> int:
    """A batch's items still running (or those of ``ids`` running or received) may have paid a call; how many."""
    if ids is None:
        rows = conn.execute(MAYBE_PAID_RUNNING, (batch_id,)).fetchall()
    else:
        rows = conn.execute(MAYBE_PAID, {"batch": batch_id, "ids": json.dumps(list(ids))}).fetchall()
    counted = ledger.add_unknown(conn, rows)
    add_to_run(conn, batch_id, maybe_paid=counted)
    return counted


#: Items of a batch (``:ids``) refused before anything ran: one call not billed each.
NOT_BILLED = """
UPDATE items SET not_billed = not_billed + 1
WHERE id IN (@ints(:ids)) AND batch_id = :batch
"""


def count_not_billed(conn: Conn, batch_id: int, ids: Iterable[int]) -> None:
    """Items of a batch whose call the upstream refused before running it: a charge not billed each, on the
    ledger too."""
    refused = conn.execute(NOT_BILLED, {"batch": batch_id, "ids": json.dumps(list(ids))}).rowcount
    ledger.add_not_billed(conn, batch_id, refused)


#: Items (``{where}`` narrows them) whose call is a line of an upstream task that may still run, and bill, as they
#: leave it (a call's was counted when its engine's recovery held it): each counted as maybe paid.
TASK_LINES = """
UPDATE items SET maybe_paid = maybe_paid + 1
WHERE {where} AND state = 'running' AND batch_id IN (SELECT id FROM batches WHERE submits = 1)
RETURNING run_id, stage, chars
"""


def count_task_lines(conn: Conn, where: str, params: Mapping[str, Any]) -> None:
    """Count as maybe paid the items ``where`` selects whose call is a line of an upstream task that may still
    run, their run's totals with them, in the caller's transaction."""
    lines = conn.execute(TASK_LINES.format(where=where), params).fetchall()
    if lines:
        add_to_run(conn, run_id=lines[0][0], maybe_paid=ledger.add_unknown(conn, lines))


#: A parent's sub-items about to be removed (``:parent``): their paid, maybe-paid and not billed calls kept by the
#: parent.
KEEP_PAID = """
UPDATE items SET
    paid_calls = paid_calls + (SELECT coalesce(sum(paid_calls), 0) FROM items AS sub WHERE sub.parent_id = :parent),
    maybe_paid = maybe_paid + (SELECT coalesce(sum(maybe_paid), 0) FROM items AS sub WHERE sub.parent_id = :parent),
    not_billed = not_billed + (SELECT coalesce(sum(not_billed), 0) FROM items AS sub WHERE sub.parent_id = :parent)
WHERE id = :parent
"""
#: A parent's sub-items removed (``:parent``): its count of them cleared, unless it waits at its join (a fan-out
#: made again sets its own count).
NO_SUB_ITEMS_LEFT = "UPDATE items SET sub_items_left = NULL WHERE id = :parent AND hold != 'join'"

#: Calls a dead engine sent with no answer saved (the items the recovery is about to hold, of batches that
#: are calls, not tasks whose answer may still be fetched), or only those a person cancelled (``:cancelled``):
#: each may have been billed.
MAYBE_PAID_HELD = """
UPDATE items SET maybe_paid = maybe_paid + 1
WHERE run_id = :run AND state = 'running' AND hold = 'none' AND (:cancelled = 0 OR error_kind = 'cancelled')
    AND batch_id IN (SELECT id FROM batches WHERE run_id = :run AND submits = 0
                     AND (CAST(:batches AS TEXT) IS NULL OR id IN (@ints(:batches))))
RETURNING run_id, stage, chars
"""


def count_maybe_paid_held(
    conn: Conn, run_id: int, *, cancelled: bool = False, batches: str | None = None
) -> int:
    """Before a recovery holds (or a cancel fails) a dead engine's sent calls (of ``batches``, a JSON list of ids;
    None: every batch of the run): count each as maybe billed."""
    held = conn.execute(MAYBE_PAID_HELD, {"run": run_id, "cancelled": int(cancelled), "batches": batches}).fetchall()
    counted = ledger.add_unknown(conn, held)
    add_to_run(conn, run_id=run_id, maybe_paid=counted)
    return counted


# A ``decide`` stage: an item pending there waits for a person -------------------

#: The run's ``decide`` stages, from its saved job.
DECIDE_STAGES = (
    "SELECT @field(listed.value, '$.name') FROM runs, @list_of_json(runs.job, listed, '$.stages') "
    "WHERE runs.id = :run AND @field(listed.value, '$.kind') = 'decide'"
)

#: Items of run ``:run`` pending at a decide stage: they wait there for a person.
ARRIVED = f"items.run_id = :run AND items.state = 'pending' AND items.stage IN ({DECIDE_STAGES})"


def arrive(conn: Conn, run_id: int, now: float) -> set[int]:
    """Items of the run pending at a decide stage (a boundary, a retry, a rewind put them there) wait there for a
    person (state ``waiting``, hold ``decide``), in the caller's transaction; their ids."""
    return {row[0] for row in move(conn, "await_decision", where=ARRIVED, params={"run": run_id, "now": now},
                                      returning="id")}


# A person's cancel of items in flight: marked by their error kind, failed when their batch settles -----

#: Items of batch ``?`` that a person cancelled while it was in flight.
CANCELLED_IN_BATCH = "SELECT id FROM items WHERE batch_id = ? AND state IN ('running', 'received') AND error_kind = 'cancelled'"

#: A cancel's failure: kind ``cancelled``, the message ``:message``, retryable by a person.
CANCELLED = {"error_kind": "error_kind = 'cancelled'", "error": "error = :message", "retryable": "retryable = 1"}

#: The mark of an item cancelled in flight (its state kept).
CANCEL_MARK = {"error_kind": "error_kind = 'cancelled'", "error": "error = :message"}

#: What a stopped engine left of the cancelled items (``:where`` narrows them): sent, running with no
#: holder, or given back unsent: they fail now (the received ones are validated, then settle as a batch;
#: those of an upstream task that may still run are released to poll it first: :func:`cancel_tasks`).
LEFT_CANCELLED = "items.error_kind = 'cancelled' AND items.state IN ('pending', 'running') AND items.hold = 'none'"

#: Why an item cancelled in flight failed without its batch's end: its engine stopped first.
ENGINE_GONE = "cancelled by a person; its call was in flight when its engine stopped (it may have been billed)"


#: A running item whose batch made an upstream task (its id saved) or sent its create (the task may exist, its
#: id lost): that task may run, and bill, whatever becomes of the item here.
TASK_MAY_RUN = (
    "items.state = 'running' AND items.batch_id IN (SELECT id FROM batches "
    "WHERE upstream_id IS NOT NULL OR (submits = 1 AND lands_by IS NOT NULL))"
)

#: Why an item cancelled in an upstream task that may still run is not failed yet.
TASK_TO_CANCEL = ("cancelled by a person; its upstream task is cancelled (the lines it ran are billed and kept) "
                  "when an engine next polls it")


def cancel_tasks(conn: Conn, where: str, params: Mapping[str, Any]) -> list[int]:
    """Mark the items of an upstream task that may still run (``where`` narrows them) cancelled, and release them
    to the next engine's poll, which cancels their task upstream (``runner.tasks``); their ids.

    Failing them instead would leave the task running and billing upstream,
    unknown here, and a retry would pay for them twice.
    """
    return [item_id for (item_id,) in move(
        conn, "cancel_task", values=CANCEL_MARK, params={**params, "message": TASK_TO_CANCEL}, returning="id",
        where=f"{where} AND {TASK_MAY_RUN} "
              "AND NOT (items.hold = 'confirmed' AND items.error_kind IS NOT DISTINCT FROM 'cancelled')",
    )]


def cancelled_in(conn: Conn, batch_id: int) -> list[int]:
    """The items of a batch that a person cancelled while it was in flight, read in the caller's transaction."""
    return [item_id for (item_id,) in conn.execute(CANCELLED_IN_BATCH, (batch_id,))]


#: Why an item cancelled in flight failed at the stage after the one its batch's answer completed.
STAGE_DONE = "cancelled by a person; its batch finished, and its result of the stage before is kept"


def cancel_moved_on(conn: Conn, ids: list[int], params: Mapping[str, Any]) -> None:
    """Fail cancelled items that their batch's answer has just moved on to their next stage, where they stand."""
    if ids:
        move(conn, "cancel", where="items.id IN (@ints(:ids)) AND items.state = 'pending'",
             values=CANCELLED, params={**params, "ids": json.dumps(ids), "message": STAGE_DONE})


def fail_left_cancelled(conn: Conn, where: str, params: Mapping[str, Any]) -> list[int]:
    """Fail the cancelled items a stopped engine left (``where`` narrows them); their ids."""
    return [item_id for (item_id,) in move(conn, "cancel", where=f"{where} AND {LEFT_CANCELLED}", values=CANCELLED,
                                           params={**params, "message": ENGINE_GONE}, returning="id")]


#: The tries of a batch's items that did not succeed: those the upstream refused (``:refused``,
#: item ids) are counted, in a row too; any other ends a streak of refusals.
COUNT_REFUSED = """
UPDATE items SET
    refused = refused + CASE WHEN id IN (@ints(:refused)) THEN 1 ELSE 0 END,
    refused_streak = CASE WHEN id IN (@ints(:refused)) THEN refused_streak + 1 ELSE 0 END
WHERE batch_id = :batch AND state IN ('running', 'received')
    AND (refused_streak > 0 OR id IN (@ints(:refused)))
"""

# Items added, or given a new input ------------------------------------------

#: The run's items among some keys (``:keys``, a JSON list): key, id and input fingerprint, each found by its
#: key (CROSS JOIN keeps that order: never a scan of the run's items for each key).
KNOWN_KEYS = """
SELECT items.key, items.id, items.fingerprint FROM @list_of_texts(:keys, given) CROSS JOIN items
WHERE items.run_id = :run AND items.key = given.value
"""

#: The highest item id so far, the archive's too: new items are numbered after it (by the one transaction that
#: adds them), so that an archived item comes back under its own id.
LAST_ID = ("SELECT coalesce(max(last), 0) FROM (SELECT max(id) AS last FROM items "
           "UNION ALL SELECT max(id) FROM archived_items) AS lasts")

#: A new item (its state is the moves' to change).
ADD_ITEM = (
    "INSERT INTO items (id, run_id, key, grp, seq, chars, fingerprint, updated_at, stage, priority) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)

#: A known item's new input: its group, order, size and priority (its state is the moves' to change).
NEW_INPUT = ("UPDATE items SET grp = ?, seq = ?, chars = ?, fingerprint = ?, updated_at = ?, stage = ?, priority = ? "
             "WHERE id = ?")

#: Items of ``:ids`` (a JSON list of ids) given their times (``:at``, a JSON list in the same order), pending ones or
#: ones that wait for an older time; ``SCHEDULED_AT`` sets it.
TO_SCHEDULE = ("items.id = listed.value AND (items.state = 'pending' AND items.hold = 'none' "
               "OR items.hold = 'scheduled')")
SCHEDULED_AT = {"not_before": "not_before = CAST(@element(:at, listed.key) AS DOUBLE PRECISION)"}

#: An item of a run of one stage given ``[[stage]]`` tables, its input the same under the old job's rule
#: (``:old``), given the pipeline's fingerprint (``stages.to_pipeline``).
TO_PIPELINE = """
UPDATE items SET fingerprint = :new, chars = :chars, updated_at = :now
WHERE run_id = (SELECT id FROM runs WHERE name = :name) AND key = :key AND fingerprint = :old
RETURNING id, state, output
"""

#: An item's results, all of them: its input changed, so it starts again at the first stage.
FORGET_RESULTS = "DELETE FROM results WHERE item_id = ?"
#: The decisions a person gave for an item's old input, before it reached their stage.
FORGET_DECISIONS = "DELETE FROM decisions WHERE item_id = ?"

#: An item's input, new or given again.
SAVE_INPUT = "INSERT INTO inputs (item_id, input) VALUES (?, ?) ON CONFLICT (item_id) DO UPDATE SET input = excluded.input"

#: A failed item tried again (a person's retry, or a new input): a fresh budget of attempts and refusals.
FRESH_BUDGET = {"retry_base": "retry_base = attempts - refused", "refused_streak": "refused_streak = 0"}

#: A person's priority (``runner prioritize``), no state: the items of run ``:run`` named by ``:keys`` (a JSON
#: list; empty: any) in the group ``:group`` (NULL: any).
PRIORITIZE = """
UPDATE items SET priority = :to
WHERE run_id = :run AND (:keys = '[]' OR key IN (@texts(:keys)))
AND (CAST(:group AS TEXT) IS NULL OR grp = :group)
"""
