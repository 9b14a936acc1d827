"""A stage an item skips (its ``when`` false, or its fan-out's), noted in its history, and a decision kept for that
stage dropped.

Every boundary that moves an item past stages it skips (a batch's
settlement, a join, an approval) calls :func:`skip` in its transaction: one
``skipped`` event per stage, an event that moves nothing, saying why: the
stage's own ``when`` is false, or it was skipped with the fan-out it lies
inside (the stages up to its join, and the join: their ``when`` was never read). A decision a person
sent early for a decide stage the item now skips can never be applied: it is
deleted, and a ``decision_dropped`` event says so, in the item's history and
the run's log.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..model import Skip
from .database import Conn

#: Why a stage was skipped: its own ``when`` is false; or the fan-out it lies inside was skipped (its ``when``).
WHEN_FALSE = "its when is false: stage skipped"
WITH_FAN_OUT = "skipped with the fan-out '{}', whose when is false"

SKIPPED = """
INSERT INTO events (run_id, item_id, at, from_state, to_state, kind, message, items, stage)
SELECT run_id, id, :now, 'pending', 'pending', 'skipped', :why, 0, :stage
FROM items WHERE id = :id
"""

#: A decision kept for the stage skipped: noted, then deleted.
DROPPED = """
INSERT INTO events (run_id, item_id, at, from_state, to_state, kind, message, items, stage)
SELECT run_id, item_id, :now, 'pending', 'pending', 'decision_dropped',
    'its when is false: the ' || CASE approve WHEN 1 THEN 'approval' ELSE 'rejection' END
    || ' kept for this stage was dropped (never applied)', 0, stage
FROM decisions WHERE item_id = :id AND stage = :stage
"""
FORGET = "DELETE FROM decisions WHERE item_id = :id AND stage = :stage"


def skip(conn: Conn, skipped: Iterable[tuple[Mapping[str, Any], Skip]]) -> None:
    """Each stage an item skips (the item's ``id`` and ``now`` in the mapping beside it): noted with why, and a
    decision kept for it dropped, noted."""
    rows = [{**params, "stage": each.stage, "why": WITH_FAN_OUT.format(each.fan_out) if each.fan_out else WHEN_FALSE}
            for params, each in skipped]
    for statement in (SKIPPED, DROPPED, FORGET):
        conn.executemany(statement, rows)
