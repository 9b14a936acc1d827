"""A person's hand on a run, as the store keeps it: the control row, retries, confirmations, and the log of commands.

Each verb is one transaction that logs its command in ``commands``; what a
command does to the control row (pause, resume, step) is the rules' to say
(``change``), and the engine holding the run reads the row on every turn.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import RunError, UnknownStage
from ..model import BreakerState, FailureKind, Retried
from ..rules.breaker import Control
from ..rules.cancelling import BY_A_PERSON, IN_FLIGHT
from .archive import ARCHIVED_KEYS
from .base import StoreBase
from . import fanout, items
from .items import move
from .database import Conn

#: Items of a run (``:run``), all or those whose key is in ``:keys`` (a JSON list; empty: all), with the sub-items
#: of a named parent of a fan-out (a parent's cancel, retry or confirmation is its sub-items' too).
CHOSEN = (
    "items.run_id = :run AND (:keys = '[]' OR items.key IN (@texts(:keys)) "
    "OR items.parent_id IN (SELECT named.id FROM items AS named WHERE named.run_id = :run "
    "AND named.key IN (@texts(:keys))))"
)

#: The keys in ``:keys`` (a JSON list) that no item of the run ``:run`` has.
UNKNOWN_KEYS = """
SELECT given.value AS key FROM @list_of_texts(:keys, given)
WHERE given.value NOT IN (SELECT key FROM items WHERE run_id = :run) ORDER BY key LIMIT 6
"""

#: The failed items a retry takes: of kind ``:kind``, or (none given) any but those a person cancelled,
#: unless their ``:keys`` name them.
RETRIED_KIND = (
    "(items.error_kind = :kind OR (CAST(:kind AS TEXT) IS NULL "
    "AND (:keys != '[]' OR items.error_kind IS DISTINCT FROM 'cancelled')))"
)

#: Items at the stage ``:stage``, or (none given) at any.
AT_STAGE = "(CAST(:stage AS TEXT) IS NULL OR items.stage = :stage)"

#: A run's stages: its job's, in order, then any its items are at that the job no longer has.
STAGES = """
SELECT @field(listed.value, '$.name') AS stage FROM runs, @list_of_json(runs.job, listed, '$.stages')
WHERE runs.id = :run
UNION ALL SELECT DISTINCT stage FROM counts WHERE run_id = :run AND n > 0 AND stage NOT IN (
    SELECT @field(listed.value, '$.name') FROM runs, @list_of_json(runs.job, listed, '$.stages') WHERE runs.id = :run)
"""

#: Items a cancel fails at once: not in flight (pending, queued, waiting, or held for a person's confirmation).
NOT_IN_FLIGHT = "(items.state IN ('pending', 'queued', 'waiting') OR (items.state = 'running' AND items.hold != 'none'))"

LOG_COMMAND = """
INSERT INTO commands (run_id, command, args, created_at, done_at, outcome) VALUES (?, ?, ?, ?, ?, ?)
"""

#: Items of run ``?1`` a person cancelled, not claimed for their compensation (a notebook's ``on_cancel``) since:
#: key, input, and the results of the stages it passed (a JSON object).
UNCOMPENSATED = """
SELECT items.key, (SELECT input FROM inputs WHERE item_id = items.id) AS input,
    (SELECT @object_agg(stage, @json(result)) FROM results WHERE item_id = items.id) AS results
FROM items
WHERE items.run_id = ?1 AND items.state = 'failed' AND items.error_kind = 'cancelled' AND NOT EXISTS (
    SELECT 1 FROM commands, @list_of_texts(commands.args, given, '$.keys') WHERE commands.run_id = ?1
    AND commands.command = 'on_cancel' AND given.value = items.key AND commands.created_at >= items.updated_at)
ORDER BY items.seq
"""


class Commands(StoreBase):
    """The verbs of a person's commands, and the control row the engine reads."""

    def control(self, run_id: int) -> Control:
        """The run's breaker and a person's controls (read by the engine before every start)."""
        (row,) = self.rows(
            "SELECT breaker, breaker_kind, breaker_reason, transport_failures, paused, steps FROM runs WHERE id = ?",
            (run_id,),
        )
        kind = row["breaker_kind"]
        return Control(BreakerState(row["breaker"]), row["breaker_reason"], row["transport_failures"],
                       bool(row["paused"]), row["steps"], FailureKind(kind) if kind else None)

    def write_control(self, conn: Conn, run_id: int, control: Control) -> None:
        """Write the breaker and controls inside the caller's transaction."""
        conn.execute(
            "UPDATE runs SET breaker = ?, breaker_kind = ?, breaker_reason = ?, transport_failures = ?, "
            "paused = ?, steps = ? WHERE id = ?",
            (control.breaker, control.kind, control.reason, control.transport_failures, int(control.paused),
             control.steps, run_id),
        )

    def open_breaker(self, run_id: int, kind: FailureKind, reason: str) -> None:
        """Open the breaker on its own, keeping a person's pause and steps."""
        with self.write() as conn:
            conn.execute("UPDATE runs SET breaker = 'open', breaker_kind = ?, breaker_reason = ? WHERE id = ?",
                         (kind, reason, run_id))

    def command(self, run_id: int, command: str, change: Callable[[Control], Control], *, now: float) -> Control:
        """A person's ``command`` on the control row, as ``change`` makes it (it may refuse by raising)."""
        with self.write() as conn:
            control = change(self.control(run_id))
            self.write_control(conn, run_id, control)
            conn.execute(LOG_COMMAND, (run_id, command, "{}", now, now,
                                       f"{control.breaker.value}, paused={control.paused}"))
        return control

    def retry_failed(
        self, run_id: int, *, kind: str | None, keys: Sequence[str], now: float, stage: str | None = None
    ) -> Retried:
        """Failed items (all, one kind, some keys, those of one stage) back to pending, each with a fresh attempt
        budget, at the stage where they failed: the results of the stages before it are kept; those rejected at a
        decide stage wait there again for a person (``Retried.deciding``). A retried sub-item's parent that was
        joined or failed waits at its join again (:func:`runner.store.fanout.reopen`).

        Items a person cancelled are retried only when named: by their kind or their keys. A stage the run
        does not have is refused (``UnknownStage``), and nothing changes.
        """
        params = {"run": run_id, "kind": kind, "keys": json.dumps(list(keys)), "now": now, "stage": stage}
        with self.write() as conn:
            self.refuse_unknown(run_id, keys)
            if stage is not None:
                self.refuse_unknown_stage(run_id, stage)
            released = move(conn, "retry_failed", where=f"{CHOSEN} AND {RETRIED_KIND} AND {AT_STAGE}",
                            values=items.FRESH_BUDGET,
                            params=params, returning="id")
            # A retried sub-item's parent, joined or failed by it, waits at its join again.
            fanout.reopen(conn, [item_id for item_id, in released], now)
            deciding = items.arrive(conn, run_id, now)  # a rejected item waits again at its decide stage
            if released:  # a retry that found nothing to retry changed nothing: no command to log
                asked = {"kind": kind, "keys": list(keys), **({"stage": stage} if stage is not None else {})}
                conn.execute(LOG_COMMAND, (run_id, "retry", json.dumps(asked), now, now, f"{len(released)} items"))
        return Retried(len(released), len(deciding & {row[0] for row in released}))

    def stages(self, run_id: int) -> list[str]:
        """The run's stages: its job's, in order, then any its items are at that the job no longer has."""
        return [row["stage"] for row in self.rows(STAGES, {"run": run_id})]

    def refuse_unknown_stage(self, run_id: int, stage: str) -> None:
        """Refuse a stage the run does not have (``UnknownStage`` naming those it has); a read, in any transaction."""
        known = self.stages(run_id)
        if stage not in known:
            (run,) = self.rows("SELECT name FROM runs WHERE id = ?", [run_id])
            raise UnknownStage(f"run {run['name']!r} has no stage {stage!r}; its stages: {', '.join(known)}")

    def refuse_unknown(self, run_id: int, keys: Sequence[str]) -> None:
        """Refuse keys that no item of the run has (``RunError`` naming the first of them, and saying when one is in
        the run's archive); a read, in any transaction."""
        unknown = [row["key"] for row in self.rows(UNKNOWN_KEYS, {"run": run_id, "keys": json.dumps(list(keys))})]
        if unknown:
            (run,) = self.rows("SELECT name FROM runs WHERE id = ?", [run_id])
            listed = ", ".join(repr(key) for key in unknown[:5]) + (", ..." if len(unknown) > 5 else "")
            archived = self.rows(ARCHIVED_KEYS, {"run": run_id, "keys": json.dumps(unknown)})
            why = f" ({archived[0]['key']!r} is archived: runner restore brings it back)" if archived else ""
            raise RunError(f"run {run['name']!r} has no item{'s' if len(unknown) > 1 else ''} {listed}{why}: "
                           "nothing was changed")

    def held_items(self, run_id: int) -> list[dict[str, Any]]:
        """The items held for a person, in order, with what their batch knows of its task."""
        return self.rows(
            "SELECT i.key, i.grp, b.upstream_id, b.submits, b.lands_by, i.attempts, i.paid_calls FROM items i "
            "LEFT JOIN batches b ON b.id = i.batch_id "
            "WHERE i.run_id = ? AND i.hold = 'confirm' ORDER BY i.seq",
            [run_id],
        )

    def confirm(self, run_id: int, *, keys: Sequence[str], now: float) -> tuple[int, int, int]:
        """Release held items (all, or ``keys``): (to poll their saved task, to look for it, sent again)."""
        params = {"run": run_id, "keys": json.dumps(list(keys)), "now": now,
                  "again": "confirmed by a person: sent again, may charge twice"}
        with self.write() as conn:
            self.refuse_unknown(run_id, keys)
            polled = move(conn, "confirm", params=params, returning="id", where=(
                f"{CHOSEN} AND items.batch_id IN (SELECT id FROM batches WHERE upstream_id IS NOT NULL)"))
            adopted = move(conn, "confirm", params=params, returning="id", where=(
                f"{CHOSEN} AND items.batch_id IN (SELECT id FROM batches WHERE submits = 1)"))
            resent = move(conn, "resend", where=CHOSEN, values={"error": "error = :again"}, params=params,
                          returning="id")
            if polled or adopted or resent:  # a confirm that released nothing changed nothing: no command to log
                outcome = f"{len(polled)} to poll, {len(adopted)} to look for, {len(resent)} sent again"
                conn.execute(LOG_COMMAND, (run_id, "confirm", params["keys"], now, now, outcome))
        return len(polled), len(adopted), len(resent)


    def cancel(self, run_id: int, *, keys: Sequence[str], now: float, engine_alive: bool) -> tuple[int, int]:
        """Fail unfinished items (all, or ``keys``) as ``cancelled``: (failed now, failing when their batch ends).

        Items not in flight fail at once. An item in flight (running, or
        received and not yet validated) is marked, and fails when its batch
        settles, unless its answer completes it (``rules.cancelling``). With
        no ``engine_alive`` to settle them: a sent call fails now, counted as
        maybe billed; a saved answer stays received, validated by the next
        engine (recovery); an upstream task that may still run (and so one
        held for a person) is released to the next engine's poll, which
        cancels it upstream and settles the lines it ran. One transaction,
        logged as the command ``cancel``.
        """
        params = {"run": run_id, "keys": json.dumps(list(keys)), "now": now}
        with self.write() as conn:
            self.refuse_unknown(run_id, keys)
            failed = move(conn, "cancel", where=f"{CHOSEN} AND {NOT_IN_FLIGHT} AND NOT ({items.TASK_MAY_RUN})",
                          values=items.CANCELLED, params={**params, "message": BY_A_PERSON}, returning="id")
            # A live engine polls its own tasks in flight (and cancels them upstream); no other engine polls one.
            later = items.cancel_tasks(conn, f"{CHOSEN} AND items.hold != 'none'" if engine_alive else CHOSEN, params)
            unmarked = f"{CHOSEN} AND items.error_kind IS DISTINCT FROM 'cancelled'"
            later += [item_id for name in ("cancel_running", "cancel_received") for (item_id,) in move(
                conn, name, where=unmarked, values=items.CANCEL_MARK, params={**params, "message": IN_FLIGHT},
                returning="id")]
            left: list[int] = []
            if not engine_alive:
                items.count_maybe_paid_held(conn, run_id, cancelled=True)
                left = items.fail_left_cancelled(conn, CHOSEN, params)
            now_failed, finishing = len(failed) + len(left), len(set(later) - set(left))
            if now_failed or finishing:  # a cancel that found nothing unfinished changed nothing: no command to log
                conn.execute(LOG_COMMAND, (run_id, "cancel", json.dumps({"keys": list(keys)}), now, now,
                                           f"{now_failed} failed, {finishing} when their batch ends"))
        return now_failed, finishing

    def claim_compensations(self, run_id: int, *, now: float) -> tuple[int, list[dict[str, Any]]]:
        """Claim the cancelled items not compensated since they were cancelled, for a person's ``on_cancel``:
        the command ``on_cancel`` logged for them (its id; :meth:`compensated` ends it) and their rows (key,
        input, results). One transaction: no item is claimed twice for one cancel, by this process or another.
        """
        with self.write() as conn:
            due = self.rows(UNCOMPENSATED, [run_id])
            if not due:
                return 0, []
            (command_id,) = conn.execute(
                f"{LOG_COMMAND} RETURNING id",
                (run_id, "on_cancel", json.dumps({"keys": [row["key"] for row in due]}), now, None,
                 f"{len(due)} items claimed, not yet ended"),
            ).fetchone()
        return int(command_id), due

    def compensated(self, command_id: int, *, called: int, errors: int, now: float) -> None:
        """End the claim ``command_id``: ``on_cancel`` ran for its ``called`` items, ``errors`` of them raised."""
        with self.write() as conn:
            conn.execute("UPDATE commands SET done_at = ?, outcome = ? WHERE id = ?",
                         (now, f"{called} items, {errors} raised", command_id))
