"""A batch's verdict applied, inside the caller's transaction: the store's half of "judge, then advance".

The judge decided each item's end (:class:`runner.model.Settlement`);
:func:`settle` makes it durable: the boundary between stages
(:func:`runner.store.stages.pass_on`), re-attempts, failures and give-ups
each by their move, a person's cancel that came meanwhile, the run's
streaks' move (a stop they call for opens the breaker), the breaker's move
(and a 429's quiet time: to the run's shared queue, if it has one), and the
smaller batches a split formed (:func:`split_batch`).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..model import Batch, BatchState, Settlement
from ..rules import cancelling
from ..rules.breaker import Open
from . import items, queues, stages, streaks
from .items import move, move_each
from .database import Conn

if TYPE_CHECKING:
    from .sqlite import Store

IN_BATCH = "items.batch_id = :batch"
#: The items of a JSON list ``:ids`` still in batch ``:batch`` (``+batch_id``: no scan of the batch for each).
LISTED = "items.id = listed.value AND +items.batch_id = :batch"
LISTED_SOURCE = "FROM @list_of_ints(:ids, listed)"

#: What a give-up adds to the judge's message: the item's tally, as it stands.
TALLY = (
    "error = :message || '; attempts: ' || attempts || CASE WHEN refused > 0 THEN ', refused: ' || refused "
    "ELSE '' END || ', paid calls: ' || paid_calls "
    "|| CASE WHEN maybe_paid > 0 THEN ', maybe paid: ' || maybe_paid ELSE '' END || ')'"
)
ERROR = {"error_kind": "error_kind = :kind", "error": "error = :message", "retryable": "retryable = :retryable"}


def settle(conn: Conn, store: Store, batch_id: int, settlement: Settlement, now: float) -> list[Batch]:
    """A batch's verdict applied inside the caller's transaction; the batches a split formed.

    Each move touches only items still in this batch's hands: an item whose
    input changed meanwhile keeps the failure that says so. Items a person
    cancelled meanwhile end as :func:`runner.rules.cancelling.settled` says.
    """
    params: dict[str, Any] = {"batch": batch_id, "now": now}
    # A person's cancel may have come while the batch was in flight: read in this transaction, so none is missed.
    cancelled = items.cancelled_in(conn, batch_id)
    settlement = cancelling.settled(settlement, cancelled)
    if settlement.maybe_paid:
        items.count_maybe_paid(conn, batch_id, settlement.maybe_paid)
    if settlement.not_billed:
        items.count_not_billed(conn, batch_id, settlement.not_billed)
    if settlement.refused or settlement.retry or settlement.failed or settlement.gave_up:
        conn.execute(items.COUNT_REFUSED, {**params, "refused": json.dumps(list(settlement.refused))})
    if settlement.completed:
        stages.pass_on(conn, settlement, params)
        # A cancelled item whose answer completed its stage keeps that (paid) result, and goes no further.
        items.cancel_moved_on(conn, [i for i in cancelled if i in settlement.next_stage], params)
    one = f"items.id = :id AND {IN_BATCH}"
    move_each(conn, "retry", where=one, values={**ERROR, "not_before": "not_before = :not_before"}, params=[
        {**params, "id": i, "kind": kind, "message": message, "retryable": 1, "not_before": settlement.not_before}
        for i, (kind, message) in settlement.retry.items()])
    move_each(conn, "fail", where=one, values=ERROR, params=[
        {**params, "id": i, "kind": kind, "message": message, "retryable": retryable}
        for i, (kind, message, retryable) in settlement.failed.items()])
    move_each(conn, "give_up", where=one, values={**ERROR, "error": TALLY, "not_before": "not_before = :not_before"},
              params=[{**params, "id": i, "kind": kind, "message": message, "retryable": 1,
                       "not_before": settlement.not_before} for i, (kind, message) in settlement.gave_up.items()])
    conn.execute("UPDATE batches SET state = ?, finished_at = ? WHERE id = ?", (BatchState.DONE, now, batch_id))
    if settlement.streak is not None and (stop := streaks.move(conn, batch_id, settlement.streak)) is not None:
        settlement = replace(settlement, breaker=Open(stop.kind, stop.reason))
    if settlement.breaker is not None or settlement.quiet_until:  # else no breaker, quiet time or queue moves: no read
        (run_id,) = conn.execute("SELECT run_id FROM batches WHERE id = ?", (batch_id,)).fetchone()
        if settlement.quiet_until:  # every worker of the run holds back
            conn.execute("UPDATE runs SET quiet_until = ? WHERE id = ? AND quiet_until < ?",
                         (settlement.quiet_until, run_id, settlement.quiet_until))
        if (queue := queues.queue_of(conn, run_id)) is not None:  # what one run of a shared queue saw holds all back
            queues.settled(conn, queue, settlement)
        elif settlement.breaker is not None:
            before = store.control(run_id)
            control = settlement.breaker(before)
            if control != before:
                store.write_control(conn, run_id, control)
    return [split_batch(conn, batch_id, ids, now) for ids in settlement.split if ids]


def split_batch(conn: Conn, parent: int, ids: list[int], now: float) -> Batch:
    """A new queued batch of some of a batch's items, one round of splitting further, that knows its parent."""
    members = json.dumps(ids)
    (batch_id, group, chars, round_, stage) = conn.execute(
        "INSERT INTO batches (run_id, grp, state, size, chars, round, parent_id, created_at, stage, owner) "
        "SELECT run_id, grp, ?, ?, (SELECT sum(chars) FROM items WHERE id IN (@ints(?))), "
        "round + 1, id, ?, stage, owner FROM batches WHERE id = ? RETURNING id, grp, chars, round, stage",
        (BatchState.QUEUED, len(ids), members, now, parent),
    ).fetchone()
    move(conn, "split", where=LISTED, source=LISTED_SOURCE, values={"batch_id": "batch_id = :new_batch"},
         params={"batch": parent, "new_batch": batch_id, "ids": members, "now": now}, logged_for="new_batch")
    return Batch(id=batch_id, group=group, size=len(ids), chars=chars, round=round_, stage=stage)
