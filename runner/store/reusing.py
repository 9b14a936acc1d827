"""The store's half of unique work (``[cache] reuse``, :mod:`runner.reusing`): the results of the same work found
for the items a claim chose, taken as their answers inside the claim's transaction.

:func:`take` looks each item chosen for a batch up by its work (one read of
a partial index each: ``items_by_work``, ``results_by_work``) and makes the
``reuse`` move for those whose result passes the stage's check now:
``received`` in a batch of their own (of the group they were chosen in),
their output the result, ``reused`` counted on each and on the ledger's row
of the stage, and nothing billed. The others are chosen again by the next
claim (looked up once more). The batch is ``done`` at once (no call is made for it); the engine
settles its items as any saved answer. A settlement saves the work of each
result with it (:func:`runner.store.stages.pass_on`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

from ..model import Batch, BatchState, ItemState
from . import ledger
from .items import move
from .tasks import NOTE
from .database import Conn

#: The items chosen (``:ids``) as their work is made of: key, input, and the results of the stages they passed.
IN_LINE = """
SELECT items.id, items.grp, items.chars, items.key, inputs.input,
       (SELECT coalesce(@object_agg(stage, @json(result)), '{}') FROM results WHERE item_id = items.id)
FROM @list_of_ints(:ids, listed) JOIN items ON items.id = listed.value JOIN inputs ON inputs.item_id = items.id
ORDER BY listed.key
"""

#: The saved results of one work, in any run: a job of one stage's completed output, a pipeline's result.
FOUND = """
SELECT output FROM items WHERE work = :work AND state = 'completed'
UNION ALL SELECT result FROM results WHERE work = :work
LIMIT 8
"""


REUSED = "the result of the same work saved in this store, checked again: no call, not billed"


class Reuser(Protocol):
    """What a claim asks of each item in line (:class:`runner.reusing.Reuse`)."""

    def work(self, key: str, item_input: str, results: str) -> str: ...
    def accepts(self, result: str) -> bool: ...


def take(
    conn: Conn, run_id: int, stage: str, chosen: Sequence[int], origin: ItemState, reuse: Reuser,
    now: float, owner: str | None,
) -> Batch | None:
    """The items ``chosen`` for a batch (one group) whose work has a result that stands, received in a batch of their
    own (the worker ``owner``'s to settle); None when none has."""
    found: dict[int, str] = {}
    group, chars = "", 0
    for item_id, grp, size, key, item_input, results in conn.execute(IN_LINE, {"ids": json.dumps(list(chosen))}):
        result = _found(conn, reuse, reuse.work(key, item_input, results))
        if result is not None:
            found[item_id], group, chars = result, grp, chars + size
    if not found:
        return None
    (batch_id,) = conn.execute(
        "INSERT INTO batches (run_id, grp, state, size, chars, created_at, finished_at, stage, owner) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (run_id, group, BatchState.DONE, len(found), chars, now, now, stage, owner),
    ).fetchone()
    move(conn, "reuse", where="items.id = found.key", source="FROM @object_by_id(:found, found)", origin=origin,
         values={"batch_id": "batch_id = :batch", "output": "output = found.value", "reused": "reused = reused + 1"},
         params={"batch": batch_id, "found": json.dumps(found), "now": now}, logged_for="batch")
    conn.execute(ledger.ADD_FOR_BATCH, {**ledger.ZERO, "batch": batch_id, "reused": len(found)})
    conn.execute(NOTE, {"batch": batch_id, "state": ItemState.RECEIVED, "items": 0, "kind": "reused",
                        "message": REUSED, "now": now})
    return Batch(id=int(batch_id), group=group, size=len(found), chars=chars, stage=stage, reused=True)


def _found(conn: Conn, reuse: Reuser, work: str) -> str | None:
    """The first saved result of ``work`` that passes the stage's check now; None when there is none."""
    for (result,) in conn.execute(FOUND, {"work": work}):
        if reuse.accepts(result):
            return str(result)
    return None
