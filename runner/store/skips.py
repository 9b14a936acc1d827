"""A stage an item skips (its ``when`` false), noted in its history, and a decision kept for that stage dropped.

Every boundary that moves an item past stages it skips (a batch's
settlement, a join, an approval) calls :func:`skip` in its transaction: one
``skipped`` event per stage, an event that moves nothing. A decision a person
sent early for a decide stage the item now skips can never be applied: it is
deleted, and a ``decision_dropped`` event says so, in the item's history and
the run's log.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping
from typing import Any

SKIPPED = """
INSERT INTO events (run_id, item_id, at, from_state, to_state, kind, message, items, stage)
SELECT run_id, id, :now, 'pending', 'pending', 'skipped', 'its when is false: stage skipped', 0, :stage
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


def skip(conn: sqlite3.Connection, skipped: Iterable[Mapping[str, Any]]) -> None:
    """Each (``id``, ``stage``, ``now``) skipped: noted, and a decision kept for it dropped, noted."""
    rows = list(skipped)
    for statement in (SKIPPED, DROPPED, FORGET):
        conn.executemany(statement, rows)
