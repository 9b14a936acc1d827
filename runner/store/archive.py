"""The archive's verbs: finished items moved whole into the ``archived_`` tables and back, a chunk a transaction.

An item goes with every row that is its own (:data:`OWN_ROWS`) and with its
sub-items (a fan-out's parent and its sub-items are one unit); only a unit
whose every item is finished (``completed`` or ``failed``) goes. Moving rows
changes no item's state, so no move is made and no event written: the rows
are copied and deleted, and what the count triggers did on the way (the
``counts`` a deleted item leaves, the ``passes`` a deleted result leaves, and
back on a restore, with the first ``skipped`` event of each item and stage)
is undone in the same transaction, so that a run's totals count its archived
items as they did (:mod:`runner.store.migrations_archive`). ``archives`` is
the run's summary: how many of its items the archive holds.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import NamedTuple

from ..errors import RunError
from .base import StoreBase
from .database import Conn

#: Each table of an item's own rows, with the column naming its item, in the order they are copied.
OWN_ROWS = {"items": "id", "inputs": "item_id", "results": "item_id", "decisions": "item_id", "events": "item_id"}

#: The ids of a unit's items given (``:ids``), as a condition on ``{column}``.
LISTED = "{column} IN (@ints(:ids))"

#: Up to ``:limit`` units of a run to archive, after the item id ``:after`` (where the chunk before stopped): finished
#: items that are no sub-item, each whose state has a time (``:completed``, ``:failed``: NULL, not that state) it last
#: changed at or before, with no sub-item unfinished.
UNITS_TO_ARCHIVE = """
SELECT id FROM items WHERE run_id = :run AND id > :after AND parent_id IS NULL
AND ((state = 'completed' AND updated_at <= :completed) OR (state = 'failed' AND updated_at <= :failed))
AND NOT EXISTS (SELECT 1 FROM items AS sub WHERE sub.parent_id = items.id
                AND sub.state != 'completed' AND sub.state != 'failed')
ORDER BY id LIMIT :limit
"""

#: Up to ``:limit`` units of a run in the archive: of the keys given (``:keys``, JSON), a sub-item's key naming its
#: parent's unit; or (``ALL_TO_RESTORE``) any, the first in id order (those restored are gone from it).
KEYS_TO_RESTORE = """
SELECT DISTINCT coalesce(parent_id, id) AS id FROM archived_items
WHERE run_id = :run AND key IN (@texts(:keys)) ORDER BY 1 LIMIT :limit
"""
ALL_TO_RESTORE = "SELECT id FROM archived_items WHERE run_id = :run AND parent_id IS NULL ORDER BY id LIMIT :limit"

#: The keys given (``:keys``) that ``{table}`` holds for the run (each looked up on its index of keys).
KEYS_IN = """
SELECT {table}.key FROM @list_of_texts(:keys, given) CROSS JOIN {table}
WHERE {table}.run_id = :run AND {table}.key = given.value
"""

#: The keys given (``:keys``) that the run's archive holds: an input read again leaves them there.
ARCHIVED_KEYS = KEYS_IN.format(table="archived_items")

#: The ids of the archived events of the items given (``:ids``) that events written since have taken.
TAKEN_EVENT_IDS = ("SELECT id FROM archived_events WHERE item_id IN (@ints(:ids)) "
                   "AND id IN (SELECT id FROM events)")

#: A unit: the items given (``:ids``) and their sub-items, at any depth, in ``{table}``.
UNIT = """
WITH RECURSIVE unit (id) AS (
    @ints(:ids)
    UNION SELECT {table}.id FROM {table} JOIN unit ON {table}.parent_id = unit.id
) SELECT id FROM unit
"""

#: The counts of the items given (``:ids``, read from ``{table}``) put back (``:sign`` 1) or taken off (-1).
COUNTS = """
INSERT INTO counts (run_id, stage, grp, state, n)
SELECT run_id, stage, grp, state, :sign * count(*) FROM {table} WHERE id IN (@ints(:ids))
GROUP BY run_id, stage, grp, state
ON CONFLICT (run_id, stage, grp, state) DO UPDATE SET n = counts.n + excluded.n
"""

#: The results passed at each stage of the items given (their own, not a sub-item's inherited ones), put back
#: (``:sign`` 1) or taken off (-1).
PASSED = """
INSERT INTO passes (run_id, stage, passed)
SELECT :run, stage, :sign * count(*) FROM {table} WHERE item_id IN (@ints(:ids))
AND inherited = 0 GROUP BY stage
ON CONFLICT (run_id, stage) DO UPDATE SET passed = passes.passed + excluded.passed
"""

#: What the ``stage_skipped`` trigger counted when the items' events came back: each item's first skip per stage.
SKIPS_RECOUNTED = """
UPDATE passes SET skipped = skipped - (
    SELECT count(DISTINCT item_id) FROM events WHERE kind = 'skipped' AND events.stage = passes.stage
    AND item_id IN (@ints(:ids)))
WHERE run_id = :run
"""

#: How many of the items given (``:ids``) the archive holds, by state.
BY_STATE = "SELECT state, count(*) FROM archived_items WHERE id IN (@ints(:ids)) GROUP BY state"

#: The run's summary row moved by ``:n`` items (a restore drops it once it counts none).
SUMMARY = """
INSERT INTO archives (run_id, items, at) VALUES (:run, :n, :now)
ON CONFLICT (run_id) DO UPDATE SET items = archives.items + excluded.items, at = excluded.at
"""


class Chunk(NamedTuple):
    """What one chunk of an archive moved: items by state; and the last item id it read, the next one's start."""

    moved: dict[str, int]
    last: int


class Archive(StoreBase):
    """The verbs that archive a run's finished items and restore them."""

    def archive_chunk(
        self, run_id: int, *, before: Mapping[str, float], after: int, limit: int, now: float
    ) -> Chunk:
        """Archive up to ``limit`` units of the run whose item id is over ``after``, in one transaction: how many
        items went, by state (none: none was left), and where the next chunk starts.

        ``before`` maps each state archived (``completed``, ``failed``) to the
        time its items last changed at or before.
        """
        wanted = {"run": run_id, "after": after, "limit": limit, "completed": before.get("completed"),
                  "failed": before.get("failed")}
        with self.write() as conn:
            roots = [row[0] for row in conn.execute(UNITS_TO_ARCHIVE, wanted)]
            ids = _unit(conn, "items", roots)
            if not ids:
                return Chunk({}, after)
            params = {"ids": json.dumps(ids), "run": run_id, "sign": 1}
            for table, column in OWN_ROWS.items():
                conn.execute(self._copy(table, f"archived_{table}", column), params)
            for table, column in reversed(OWN_ROWS.items()):
                conn.execute(f"DELETE FROM {table} WHERE {LISTED.format(column=column)}", params)
            conn.execute(COUNTS.format(table="archived_items"), params)
            conn.execute(PASSED.format(table="archived_results"), params)
            conn.execute(SUMMARY, {"run": run_id, "n": len(ids), "now": now})
            moved = conn.execute(BY_STATE, params).fetchall()
        return Chunk({state: n for state, n in moved}, roots[-1])

    def restore_chunk(self, run_id: int, *, keys: Sequence[str] | None, limit: int, now: float) -> int:
        """Bring back up to ``limit`` archived units of the run (those of ``keys``; None: any), each row as it was,
        in one transaction; how many items came back (0: none was left)."""
        wanted = {"run": run_id, "limit": limit, "keys": None if keys is None else json.dumps(list(keys))}
        with self.write() as conn:
            roots = [row[0] for row in conn.execute(ALL_TO_RESTORE if keys is None else KEYS_TO_RESTORE, wanted)]
            ids = _unit(conn, "archived_items", roots)
            if not ids:
                return 0
            params = {"ids": json.dumps(ids), "run": run_id, "sign": -1}
            for table, column in OWN_ROWS.items():
                if table == "events":  # an event's id taken since (a batch's, say) goes back under a new one
                    params["taken"] = json.dumps([row[0] for row in conn.execute(TAKEN_EVENT_IDS, params)])
                    conn.execute(self._copy("archived_events", "events", column, renumbered="kept"), params)
                    conn.execute(self._copy("archived_events", "events", column, renumbered="new"), params)
                else:
                    conn.execute(self._copy(f"archived_{table}", table, column), params)
            for table, column in reversed(OWN_ROWS.items()):
                conn.execute(f"DELETE FROM archived_{table} WHERE {LISTED.format(column=column)}", params)
            conn.execute(COUNTS.format(table="items"), params)
            conn.execute(PASSED.format(table="results"), params)
            conn.execute(SKIPS_RECOUNTED, params)
            conn.execute(SUMMARY, {"run": run_id, "n": -len(ids), "now": now})
            conn.execute("DELETE FROM archives WHERE run_id = ? AND items = 0", (run_id,))
        return len(ids)

    def refuse_not_archived(self, run_id: int, name: str, keys: Sequence[str]) -> None:
        """A RunError naming the keys given that the run's archive does not hold (saying which the run holds)."""
        given = {"run": run_id, "keys": json.dumps(list(keys))}
        archived = {row["key"] for row in self.rows(ARCHIVED_KEYS, given)}
        missing = [key for key in keys if key not in archived]
        if not missing:
            return
        live = {row["key"] for row in self.rows(KEYS_IN.format(table="items"), given)}
        where = "not archived" if missing[0] in live else "not in the run"
        raise RunError(f"run {name!r}: {len(missing)} of the keys given {'is' if len(missing) == 1 else 'are'} "
                       f"not in its archive ({missing[0]!r}: {where}); nothing was restored")

    def archived_count(self, run_id: int) -> int:
        """How many of the run's items the archive holds."""
        rows = self.rows("SELECT items FROM archives WHERE run_id = ?", [run_id])
        return int(rows[0]["items"]) if rows else 0

    @cached_property
    def _columns(self) -> dict[str, list[str]]:
        """The columns of each table an item's rows are copied to, read from the schema once per store."""
        tables = [*OWN_ROWS, *(f"archived_{table}" for table in OWN_ROWS)]
        return {table: [row["name"] for row in self.rows("@columns_of(?)", [table])]
                for table in tables}

    def _copy(self, source: str, target: str, column: str, *, renumbered: str = "") -> str:
        """The statement copying the rows of the items listed (``:ids``) from ``source`` to ``target``, column by
        column (the target's columns: the two tables have the same). ``renumbered``: ``"kept"`` copies the rows but
        those whose id is listed in ``:taken``, ``"new"`` those alone, each under a new id."""
        names = [name for name in self._columns[target] if not (renumbered == "new" and name == "id")]
        where = LISTED.format(column=column)
        if renumbered:
            where += f" AND id {'NOT ' if renumbered == 'kept' else ''}IN (@ints(:taken))"
        listed, in_order = ", ".join(names), " ORDER BY id" if renumbered == "new" else ""
        return f"INSERT INTO {target} ({listed}) SELECT {listed} FROM {source} WHERE {where}{in_order}"

    def file_size(self) -> int:
        """The store's bytes on disk: its file and its -wal."""
        return self.database.size()

    def vacuum(self) -> None:
        """Give the store's free space back (no transaction may be open): see the database's ``vacuum``."""
        self.database.vacuum()


def _unit(conn: Conn, table: str, roots: list[int]) -> list[int]:
    """The ids of the units of ``roots`` in ``table``: each root and its sub-items."""
    if not roots:
        return []
    return [row[0] for row in conn.execute(UNIT.format(table=table), {"ids": json.dumps(roots)})]
