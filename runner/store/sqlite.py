"""The SQLite run store: the verbs of a run and of a batch's path, each one transaction that decides nothing.

A verb makes durable what a rule decided (a verdict, a person's command):
it names the items and the move, and :func:`runner.store.items.move` makes
it by the transition table. ``advance`` is the fused commit of a slot: the
previous batch saved, the next started and one more formed, in one
transaction. The person's commands are in ``commands``, the workers in
``leases``, what a batch's owner may do and what a stopped one left in
``owners``; the file, its transactions and reads in ``connection``.

Time is passed in (``now``, seconds since the epoch), never read here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..model import Batch, BatchState, Claim, FailureKind, ItemState, Settlement, StartedItem
from ..rules import forming
from ..usage import Usage
from . import decisions, items, ledger, reusing, settling, stages, views
from .items import move
from .archive import Archive
from .budgets import Budgets
from .owners import LEFT_RECEIVED, Owners
from .priorities import Priorities
from .queues import Queues
from .revalidating import Revalidating
from .runs import Runs
from .settling import ERROR, IN_BATCH, LISTED_SOURCE
from .tasks import NOTE, Tasks

if TYPE_CHECKING:
    from ..batch_api import RequestsFile

#: An item's input, in a RETURNING clause of an update of ``items``.
INPUT_OF_ITEM = "(SELECT input FROM inputs WHERE item_id = items.id)"

#: A started item as the engine needs it, in a RETURNING clause (the attempts bound ``:max_attempts``).
STARTED_ITEM = (
    f"id, key, {INPUT_OF_ITEM}, :max_attempts - (attempts - refused - retry_base), refused_streak, "
    "(SELECT coalesce(@object_agg(stage, @json(result)), '{}') FROM results WHERE item_id = items.id)"
)


#: The answered items of a batch (``:answered``, or all when NULL) still running, each with its result in
#: ``:outputs`` (item id -> output), or none: the answer held none of theirs, and they paid all the same.
ANSWERED = """
FROM (SELECT running.id, @member(:outputs, running.id) AS output FROM items AS running
      WHERE running.batch_id = :batch AND running.state = 'running'
      AND (CAST(:answered AS TEXT) IS NULL OR running.id IN (@ints(:answered)))) AS answer
"""

#: Items next in line at one stage (``{stage}``: a condition on it; without, the first stage in the index's order),
#: due waiting ones first, the highest priority first (the claim index's order; the waits of a back-off read from
#: their own index, so that the scheduled items, waiting too, are never passed over one by one). On PostgreSQL the
#: rows read are locked for the claim (``claim_lock``: another claimer skips them).
CLAIM_DUE_WAITING = """
SELECT id, grp, chars, length(key), stage FROM items @indexed_by(items_backing_off)
WHERE run_id = :run AND state = 'waiting' AND not_before <= :now AND hold = 'none' {stage}
ORDER BY stage, priority DESC, grp, seq LIMIT :limit @claim_lock()
"""

CLAIM_PENDING = """
SELECT id, grp, chars, length(key), stage FROM items
WHERE run_id = :run AND state = 'pending' {stage}
ORDER BY stage, priority DESC, grp, seq LIMIT :limit @claim_lock()
"""

#: The batch ``:batch`` is the worker ``:token``'s, still one of run ``:run``'s.
OWNED = ("EXISTS (SELECT 1 FROM batches JOIN workers ON workers.token = batches.owner "
         "WHERE batches.id = :batch AND batches.owner = :token AND workers.run = :run)")

#: Claimed at one stage, or (None) at the stage of the first item in line.
AT_STAGE = {True: "AND stage = :stage", False: ""}


class Store(Runs, Tasks, Priorities, Queues, Budgets, Owners, stages.Stages, decisions.Decisions, Revalidating, Archive):
    """One run store in a SQLite file: ``Store(path)`` writes (creating it unless ``create=False``).

    ``Store(path, read_only=True)`` opens an existing store for a view (status,
    failures, the TUI, the panel): on a connection that cannot write, so it
    works on a read-only file or folder, on a full disk and while another
    process holds the write lock. It is never created or migrated: a store
    of an older schema is refused with the command that upgrades it.
    """

    # A batch's path -------------------------------------------------------

    def claim_batch(
        self, run_id: int, *, max_items: int, max_chars: int, now: float, file: RequestsFile | None = None,
        stage: str | None = None, reuse: reusing.Reuser | None = None, released: bool = False,
        owner: str | None = None,
    ) -> Batch | None:
        """Form the next batch of one stage and group (due waiting items first) and mark it queued.

        ``stage``: of that stage (None: the stage of the first item in line).
        The scheduled items whose time came are pending first; the items of
        the highest priority are taken first, the batch of their group.

        With a requests ``file``, the batch's lines (each its item and the
        prompt) fit in it too. An item larger than ``max_chars`` on its own,
        or whose line alone outgrows the file, can never be sent within the
        limit: it fails as bad_request, with no call. With ``reuse``, the items
        chosen whose same work has a result that stands take it, received in a
        batch of their own that makes no call (``Batch.reused``), formed in place
        of this one: the others are chosen again by the next claim. ``released``:
        the caller made the scheduled items due in this transaction (``release_due``).
        """
        with self.write() as conn:
            params = {"run": run_id, "now": now, "limit": max_items + forming.OTHERS, "stage": stage}
            at = AT_STAGE[stage is not None]
            if not released:
                stages.release_due(conn, run_id, now)
            while True:
                origin = ItemState.WAITING
                candidates = conn.execute(CLAIM_DUE_WAITING.format(stage=at), params).fetchall()
                if not candidates:
                    origin = ItemState.PENDING
                    candidates = conn.execute(CLAIM_PENDING.format(stage=at), params).fetchall()
                if not candidates:
                    return None
                stage_of = candidates[0][4]
                candidates = [row[:4] for row in candidates if row[4] == stage_of]
                group, chosen, chars = forming.fill(candidates, max_chars, file, max_items)
                if chosen and reuse is not None and (taken := reusing.take(conn, run_id, stage_of, chosen, origin,
                                                                          reuse, now, owner)):
                    return taken
                if chosen:
                    break
                message = forming.too_large(candidates[0], max_chars, file)
                item_id = candidates[0][0]
                move(conn, "too_large", where="items.id = :id", values=ERROR,
                     params={"id": item_id, "kind": FailureKind.BAD_REQUEST, "message": message, "retryable": 0, "now": now})
            (batch_id,) = conn.execute(
                "INSERT INTO batches (run_id, grp, state, size, chars, created_at, stage, owner) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (run_id, group, BatchState.QUEUED, len(chosen), chars, now, stage_of, owner),
            ).fetchone()
            move(conn, "claim", where="items.id = listed.value", source=LISTED_SOURCE, origin=origin,
                 values={"batch_id": "batch_id = :batch"}, logged_for="batch",
                 params={"batch": batch_id, "ids": json.dumps(chosen), "now": now})
        return Batch(id=int(batch_id), group=group, size=len(chosen), chars=chars, stage=stage_of)

    def start_batch(
        self,
        batch_id: int,
        *,
        lease: tuple[str, str],
        max_attempts: int,
        now: float,
        step: bool = False,
        intent: bool = True,
    ) -> list[StartedItem]:
        """Mark a queued batch's items running, attempts + 1, before any upstream call; they are sent in the
        order they were added (their ids': PostgreSQL returns updated rows in no order).

        Nothing starts unless the worker ``lease`` (run name, token) owns the
        batch and is still one of the run's. ``step`` spends one of the steps a person allowed while
        the run is held, if any item starts. ``intent``: the call follows at once (a provider that
        submits writes its intent later, just before its upload).
        """
        with self.write() as conn:
            rows = move(
                conn, "start", where=f"{IN_BATCH} AND {OWNED}",
                values={"attempts": "attempts = attempts + 1"}, returning=STARTED_ITEM, logged_for="batch",
                params={"batch": batch_id, "run": lease[0], "token": lease[1], "max_attempts": max_attempts, "now": now},
            )
            conn.execute(
                "UPDATE batches SET state = ?, started_at = ?, intent_at = ?, submits = ? WHERE id = ?",
                (BatchState.RUNNING, now, now if intent else None, int(not intent), batch_id),
            )
            if step and rows:  # a batch none of whose items started (all cancelled meanwhile) spends no step
                conn.execute(
                    "UPDATE runs SET steps = steps - 1 "
                    "WHERE id = (SELECT run_id FROM batches WHERE id = ?) AND steps > 0",
                    (batch_id,),
                )
        return sorted((StartedItem(*row) for row in rows), key=lambda item: item.id)

    def count_request_retry(self, batch_id: int) -> None:
        """One more request retry inside the batch's attempt."""
        with self.write() as conn:
            conn.execute("UPDATE batches SET retries = retries + 1 WHERE id = ?", (batch_id,))

    def count_maybe_paid(self, batch_id: int) -> None:
        """A call of this batch was sent and its answer lost: each item may have paid for it."""
        with self.write() as conn:
            items.count_maybe_paid(conn, batch_id)

    def note(self, batch_id: int, *, kind: str, message: str, now: float) -> None:
        """A line in the batch's history that moves no item (an engine error's traceback, say)."""
        with self.write() as conn:
            conn.execute(NOTE, {"batch": batch_id, "state": ItemState.RUNNING, "items": 0,
                                "kind": kind, "message": message, "now": now})

    def hold(self, batch_id: int, *, now: float) -> None:
        """Hold a batch's sent items for a person: their task's fate cannot be known now.

        Those a person cancelled are held too, marked: their task may still
        run and bill; a confirmation (or a cancel again) has it polled, and
        cancelled upstream if they all were.
        """
        with self.write() as conn:
            move(conn, "hold", where=IN_BATCH, params={"batch": batch_id, "now": now})

    def resumable(self, run_id: int) -> list[Batch]:
        """Batches whose sent items a person confirmed: poll (or look for) their task."""
        # From the few running items to their batches (CROSS JOIN keeps that order),
        # never from every batch the run has formed.
        rows = self.rows(
            "SELECT b.id, b.grp, count(*) AS size, sum(i.chars) AS chars, b.round, b.stage "
            "FROM items i CROSS JOIN batches b "
            "WHERE b.id = i.batch_id AND i.run_id = ? AND i.state = 'running' AND i.hold = 'confirmed' "
            "GROUP BY b.id ORDER BY b.id",
            [run_id],
        )
        return [Batch(r["id"], r["grp"], r["size"], r["chars"], r["round"], resume=True, stage=r["stage"]) for r in rows]

    def resume_batch(
        self, batch_id: int, *, lease: tuple[str, str], max_attempts: int, now: float
    ) -> list[StartedItem]:
        """Take back a confirmed batch's running items, with no new attempt (nothing is sent again).

        Only the worker ``lease`` (run name, token) that took the batch (``take_batch``) takes them back.
        """
        with self.write() as conn:
            rows = move(conn, "resume", where=f"{IN_BATCH} AND {OWNED}", returning=STARTED_ITEM,
                        params={"batch": batch_id, "run": lease[0], "token": lease[1], "max_attempts": max_attempts,
                                "now": now})
            conn.execute("UPDATE batches SET state = ?, finished_at = NULL WHERE id = ?", (BatchState.RUNNING, batch_id))
        return [StartedItem(*row) for row in rows]

    def record_answer(
        self,
        batch_id: int,
        outputs: Mapping[int, str],
        *,
        raw: str,
        now: float,
        answered: Iterable[int] | None = None,
        usage: Usage | None = None,
        cost: tuple[float, float] | None = None,
    ) -> None:
        """Save an answer as it came back (``raw``) and the ``answered`` items (default all) as received.

        Each answered item paid the call and becomes received, with its
        result in ``outputs`` if the answer held a usable one, else none (it
        is judged for that): whatever the answer's shape, it is saved before
        anything is validated, and no paid answer is left running. The
        call's ``usage`` and ``cost`` (its input and output parts; None:
        unknown) are saved with it, each item's share with the item
        (:mod:`runner.store.ledger`).
        """
        params = {
            "batch": batch_id, "now": now, "raw": raw, "outputs": json.dumps(outputs),
            "answered": None if answered is None else json.dumps(list(answered)),
        }
        with self.write() as conn:
            params |= ledger.shares(conn, params, outputs, usage, cost)
            paid = move(conn, "receive", where="items.id = answer.id", source=ANSWERED, params=params,
                        logged_for="batch", returning="items.id",
                        values={"output": "output = answer.output", "paid_calls": "paid_calls = paid_calls + 1",
                                "refused_streak": "refused_streak = 0", **ledger.RECEIVE_VALUES})
            items.add_to_run(conn, batch_id, paid_calls=len(paid))
            ledger.add_billed(conn, batch_id, len(paid), usage, cost)
            conn.execute("UPDATE batches SET answer = :raw WHERE id = :batch", params)

    def received_items(
        self, run_id: int, *, max_attempts: int, stage: str | None = None, batch: int | None = None,
        left: bool = False,
    ) -> list[tuple[int, str | None, StartedItem]]:
        """Items (of ``stage``, or all; of ``batch``, or any; ``left`` by a worker that stopped before it validated
        them, or any) whose output is saved but not yet validated: (batch id, its output, the item)."""
        rows = self.rows(
            f"SELECT batch_id, output, {STARTED_ITEM} FROM items WHERE run_id = :run AND state = 'received' "
            "AND (CAST(:stage AS TEXT) IS NULL OR stage = :stage) "
            "AND (CAST(:batch AS BIGINT) IS NULL OR batch_id = :batch)" + (f" AND {LEFT_RECEIVED}" if left else ""),
            {"run": run_id, "max_attempts": max_attempts, "stage": stage, "batch": batch},
        )
        return [(row.pop("batch_id"), row.pop("output"), StartedItem(*row.values())) for row in rows]

    def settle_batch(self, batch_id: int, settlement: Settlement, *, now: float) -> list[Batch]:
        """Apply a batch's verdict and release it: completed, re-attempted, split, failed or given up.

        Returns the new batches a split formed, already queued.
        """
        with self.write() as conn:
            return settling.settle(conn, self, batch_id, settlement, now)

    def advance(
        self,
        run_id: int,
        batch: Batch,
        *,
        settled: tuple[Batch, Settlement] | None,
        lease: tuple[str, str],
        max_attempts: int,
        now: float,
        step: bool,
        intent: bool,
        claims: Sequence[Claim] = (),
    ) -> tuple[list[StartedItem], list[Batch]]:
        """A slot's one commit: its previous batch saved, ``batch`` started (or taken back), the next formed.

        ``settled``: the slot's previous batch and its settlement. With
        ``claims``, one more batch is formed to wait for a slot, of the first
        of their stages that has items in line (``claim_batch``). Returns the
        items to send and the batches formed (by a split, or the claim).
        """
        formed = []
        with self.write() as conn:
            if settled is not None:
                formed += settling.settle(conn, self, settled[0].id, settled[1], now)
            if batch.resume:
                started = self.resume_batch(batch.id, lease=lease, max_attempts=max_attempts, now=now)
            else:
                started = self.start_batch(
                    batch.id, lease=lease, max_attempts=max_attempts, now=now, step=step, intent=intent
                )
            if started:  # (none started: the lease is another engine's; it forms the run's batches now)
                queued = self.claim_first(run_id, claims, now=now, owner=lease[1])
                formed += [queued] if queued is not None else []
        return started, formed

    # What the engine reads of a run (the UIs read ``views`` themselves) -----------

    def unfinished(self, run_id: int) -> int:
        return views.unfinished(self, run_id)

    def next_due(self, run_id: int, *, skip: Sequence[str] = ()) -> float | None:
        return views.next_due(self, run_id, skip=skip)

    def status(self, name: str, *, now: float) -> dict[str, Any]:
        return views.status(self, name, now=now)
