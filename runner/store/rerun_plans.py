"""The read model of a re-run's plan: the items ``runner confirm``, ``retry`` or ``revalidate`` would send again,
grouped by what the rule (:mod:`runner.rules.rerun_plan`) splits them by, priced by the run's ledger and job.

Each read groups in SQL (by stage, and by the case or the failure and the
item's record of charges), so a plan of a million items is a few rows; none
writes. The items chosen are exactly those the command takes: the same
conditions as :meth:`runner.store.commands.Commands.confirm` and
``retry_failed``; a key the run does not have, or a stage, is refused as
the command refuses it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from .. import costs
from ..rules.rerun_plan import Group, RerunPlan, Resend, Resent, plan
from ..rules.triage import Left, on_confirm
from . import ledger
from .commands import AT_STAGE, CHOSEN, RETRIED_KIND

if TYPE_CHECKING:
    from .sqlite import Store

#: Held items chosen, by stage and by what their batch knows of its task (what confirming each does).
HELD = f"""
SELECT items.stage, batches.upstream_id IS NOT NULL AS task_saved, coalesce(batches.submits, 0) AS create_sent,
       count(*) AS n, coalesce(sum(items.chars), 0) AS chars
FROM items LEFT JOIN batches ON batches.id = items.batch_id
WHERE {CHOSEN} AND items.hold = 'confirm'
GROUP BY 1, 2, 3
"""

#: The stages of the run ``:run`` that make no call (decide, join): their results were never billed.
NO_CALL = """
SELECT @field(listed.value, '$.name') FROM runs, @list_of_json(runs.job, listed, '$.stages')
WHERE runs.id = :run AND @field(listed.value, '$.kind') IN ('decide', 'join')
"""
#: Whether an item was answered (billed) at the stage it is at: more paid calls than the stages it passed that
#: call (each passed once at least; one passed after an invalid answer counts here too: shown as may-repeat).
ANSWERED_HERE = f"""
items.paid_calls > (SELECT count(*) FROM results WHERE results.item_id = items.id AND results.stage != items.stage
                    AND results.stage NOT IN ({NO_CALL}))
"""

#: Failed items a retry takes, by stage, kind, whether a call of theirs was answered at its stage, or lost, and
#: whether their failure is retryable as it is.
FAILED = f"""
SELECT stage, error_kind AS kind, {ANSWERED_HERE} AS answered, maybe_paid > 0 AS lost,
       coalesce(retryable, 1) AS retryable, count(*) AS n, coalesce(sum(chars), 0) AS chars
FROM items
WHERE items.state = 'failed' AND {CHOSEN} AND {RETRIED_KIND} AND {AT_STAGE}
GROUP BY 1, 2, 3, 4, 5
"""

#: The input characters of some items (``:ids``, a JSON list).
CHARS = "SELECT count(*) AS n, coalesce(sum(chars), 0) AS chars FROM items WHERE id IN (@ints(:ids))"


def confirm_plan(store: Store, name: str, *, keys: Sequence[str] = ()) -> RerunPlan:
    """The plan of ``runner confirm``: the held items (all, or ``keys``) by what confirming each does."""
    run_id = store.run_id(name)
    store.refuse_unknown(run_id, keys)
    rows = store.rows(HELD, {"run": run_id, "keys": json.dumps(list(keys))})
    groups = [Group(row["stage"], Resent(Resend(on_confirm(Left(sent=True, task_id_saved=bool(row["task_saved"]),
                                                                create_sent=bool(row["create_sent"]))).value)),
                    row["n"], row["chars"]) for row in rows]
    return _priced(store, run_id, groups)


def retry_plan(
    store: Store, name: str, *, kind: str | None = None, keys: Sequence[str] = (), stage: str | None = None
) -> RerunPlan:
    """The plan of ``runner retry``: the failed items it takes (all, one ``kind``, ``keys``, one ``stage``)."""
    run_id = store.run_id(name)
    store.refuse_unknown(run_id, keys)
    if stage is not None:
        store.refuse_unknown_stage(run_id, stage)
    rows = store.rows(FAILED, {"run": run_id, "kind": kind, "keys": json.dumps(list(keys)), "stage": stage})
    groups = [Group(row["stage"], Resent(Resend.RETRY, row["kind"], bool(row["answered"]), bool(row["lost"]),
                                         bool(row["retryable"])), row["n"], row["chars"]) for row in rows]
    return _priced(store, run_id, groups)


def revalidate_plan(store: Store, run_id: int, again: Iterable[tuple[str, Sequence[int]]], kept: int) -> RerunPlan:
    """The plan of ``runner revalidate``: per stage, the ids of the items sent again there (a result now
    invalid), and how many other items keep or complete their results with no call."""
    groups = [Group("", Resent(Resend.REVALIDATE_KEPT), kept, 0)]
    for stage, ids in again:
        (row,) = store.rows(CHARS, {"ids": json.dumps(list(ids))})
        groups.append(Group(stage, Resent(Resend.REVALIDATE_AGAIN), row["n"], row["chars"]))
    return _priced(store, run_id, groups)


def _priced(store: Store, run_id: int, groups: Sequence[Group]) -> RerunPlan:
    """The plan of ``groups`` at the run's prices (its saved job) and the output its answers used so far."""
    (run,) = store.rows("SELECT job FROM runs WHERE id = ?", [run_id])
    return plan(groups, costs.estimates(ledger.totals(store, run_id), run["job"]))
