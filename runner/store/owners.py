"""Who owns a batch: the worker that formed it (``batches.owner``), and what a stopped or dead worker left.

Only a batch's owner starts it (``start_batch``) or gives it back unsent
(``release_queued``). A batch whose owner is no worker of the run (it died,
was found dead and deleted, or left) is anyone's to take over: recovery
(``recover``) takes the unfinished ones, its received answers are validated
by the worker that takes the batch (``take_batch``), and so is a batch
whose sent items a person confirmed: taken by one worker, polled by that one
alone. What the others hold, and a 429's quiet time, are read here too, so
that the gate holds for all workers of a run together.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import NamedTuple

from ..model import BatchState, Holder
from ..rules.streaks import Streaks
from . import items, takeovers
from .database import Conn
from .items import move
from .leases import Leases, forget_dead, holds

#: Whether a batch's owner (``owner``) is no worker now: any worker may take the batch over.
NO_WORKER = "(owner IS NULL OR owner NOT IN (SELECT token FROM workers))"

#: The unfinished batches of run ``:run`` whose owner is no worker now.
ORPHANED = f"SELECT id FROM batches WHERE run_id = :run AND state IN ('queued', 'running') AND {NO_WORKER}"

#: The unfinished batches of run ``:run`` that the worker ``:token`` owns.
OWN = "SELECT id FROM batches WHERE run_id = :run AND state IN ('queued', 'running') AND owner = :token"

#: The items of the batches taken over (``:batches``, a JSON list of ids).
TAKEN = "items.batch_id IN (@ints(:batches))"

#: Received items of run ``:run`` in a done batch whose owner is no worker now: answers saved by a worker that
#: stopped before it validated them.
LEFT_RECEIVED = f"batch_id IN (SELECT id FROM batches WHERE run_id = :run AND state = 'done' AND {NO_WORKER})"

#: Batches of run ``:run`` queued or running, and of those running, that other workers than ``:token`` hold; and
#: how many of the run's workers beat after ``:since`` (by the index on the workers' run), in one read.
ELSEWHERE = """
SELECT count(*) AS held, count(*) FILTER (WHERE state = 'running') AS running,
    (SELECT count(*) FROM workers WHERE run = (SELECT name FROM runs WHERE id = :run) AND heartbeat_at > :since)
    AS live
FROM batches WHERE run_id = :run AND state IN ('queued', 'running') AND owner IS DISTINCT FROM :token
"""


class Elsewhere(NamedTuple):
    """What a worker reads of its run's other workers before it forms or starts batches."""

    #: The other workers' batches queued or running.
    held: int
    #: Of those, the running ones: in flight.
    running: int
    #: How many of the run's workers live (a fresh heartbeat), the one asking among them.
    live: int


class Owners(Leases):
    """The verbs of batches' owners: recover, release, take; what the others hold."""

    def recover(
        self, run_id: int, *, now: float, lives: Callable[[Holder], bool] | None = None,
        lease: tuple[str, str] | None = None,
    ) -> int:
        """Take over what dead workers left: unsent items go back to pending, sent ones are held; how many batches.

        The run's workers ``lives`` says are dead are deleted first (none
        without it); then the unfinished batches whose owner is no worker are
        taken over. Items ``queued``, or ``running`` in a batch whose call
        intent was never written or whose task's create was never sent, return to pending. Other ``running`` items
        may have reached the upstream: held for a person, never re-sent on their own, a call's (not a task's, whose
        answer may still come) counted as maybe paid; those a person cancelled in flight fail instead (and so do
        their unsent ones), but for those of an upstream task that may still run: released to be polled (and
        cancelled upstream) at once. ``received`` items keep their output for local validation. With a ``lease``
        (run name, token), a worker cut short holds its own calls, only while it is still one of the run's. Each
        worker found dead leaves an event that says what became of its batches (:mod:`runner.store.takeovers`).
        """
        params: dict[str, object] = {"run": run_id, "now": now}
        with self.write() as conn:
            if lease is not None and not holds(conn, lease):
                return 0
            dead: list[Holder] = []
            if lease is None and lives is not None:
                (name,) = conn.execute("SELECT name FROM runs WHERE id = ?", (run_id,)).fetchone()
                dead = forget_dead(conn, name, lives)
            chosen = OWN if lease is not None else ORPHANED
            taken = [batch_id for (batch_id,) in conn.execute(chosen, {**params, "token": lease and lease[1]})]
            if taken or dead:
                _take_over(conn, run_id, {**params, "batches": json.dumps(taken)}, dead, now=now)
        return len(taken)

    def release_queued(self, run_id: int, *, lease: tuple[str, str], now: float) -> None:
        """Return the worker ``lease``'s (run name, token) formed but unsent batches' items to pending, as it stops."""
        params = {"run": run_id, "token": lease[1], "now": now}
        with self.write() as conn:
            queued = "SELECT id FROM batches WHERE run_id = :run AND state = 'queued' AND owner = :token"
            move(conn, "unqueue", where=f"items.batch_id IN ({queued})", params=params)
            conn.execute(
                "UPDATE batches SET state = :done, finished_at = :now, error = 'not sent: the engine stopped' "
                f"WHERE id IN ({queued})", {**params, "done": BatchState.DONE},
            )

    def take_batch(self, batch_id: int, *, token: str) -> bool:
        """Make the worker ``token`` the owner of a batch no worker owns now (or it already does); whether it is."""
        with self.write() as conn:
            taken = conn.execute(f"UPDATE batches SET owner = :token WHERE id = :batch AND (owner = :token OR "
                                 f"{NO_WORKER}) RETURNING id", {"batch": batch_id, "token": token}).fetchone()
        return taken is not None

    def elsewhere(self, run_id: int, *, token: str, since: float) -> Elsewhere:
        """The run's batches other workers than ``token`` hold, and how many of its workers beat after ``since``, in
        one read (in the caller's transaction, when there is one)."""
        (row,) = self.rows(ELSEWHERE, {"run": run_id, "token": token, "since": since})
        return Elsewhere(int(row["held"]), int(row["running"]), int(row["live"]))

    def quiet_until(self, run_id: int) -> float:
        """Until when a 429's Retry-After holds back every worker of the run (0: never)."""
        (row,) = self.rows("SELECT quiet_until FROM runs WHERE id = ?", [run_id])
        return float(row["quiet_until"])

    def streaks(self, run_id: int) -> Streaks:
        """What the answers and refusals of all the run's workers said in a row (``runner.rules.streaks``)."""
        (row,) = self.rows("SELECT last_refusal, all_invalid, last_invalid FROM runs WHERE id = ?", [run_id])
        return Streaks(row["last_refusal"], int(row["all_invalid"]), row["last_invalid"])


def _take_over(conn: Conn, run_id: int, params: dict[str, object], dead: list[Holder], *, now: float) -> None:
    """Recovery's moves over the items of the batches taken over, and those batches done, in the caller's
    transaction; then an event for each worker found ``dead``: what became of its batches."""
    before = takeovers.holdings(conn, str(params["batches"]))
    move(conn, "unqueue", where=TAKEN, params=params)
    move(conn, "unsent", params=params, where=(
        f"{TAKEN} AND items.batch_id IN (SELECT id FROM batches WHERE intent_at IS NULL "
        "OR (submits = 1 AND lands_by IS NULL AND upstream_id IS NULL))"))
    items.count_maybe_paid_held(conn, run_id, batches=str(params["batches"]))
    items.cancel_tasks(conn, f"{TAKEN} AND items.error_kind IS NOT DISTINCT FROM 'cancelled' "
                       "AND items.hold = 'none'", params)
    items.fail_left_cancelled(conn, TAKEN, params)
    move(conn, "hold", where=TAKEN, params=params)
    conn.execute("UPDATE batches SET state = :done, finished_at = :now, error = 'left by a stopped engine' "
                 "WHERE id IN (@ints(:batches))", {**params, "done": BatchState.DONE})
    after = takeovers.holdings(conn, str(params["batches"]))
    takeovers.tell(conn, run_id, dead, before, after, now=now)
