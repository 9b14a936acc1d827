"""A run copied whole from one store to another (``runner copy``, issue 20), a chunk of rows at a time.

Every row of the run goes: its ``runs`` row, its batches (with their own
events and the duplicates found of them), its items with their inputs,
results, decisions and events, its commands, its ledger, counts and passes,
its archive (the ``archived_`` tables and ``archives``), and the row of the
shared queue it names when the destination has none. What only an engine
writes stays behind (:data:`LEFT`): a copy has no engine.

Ids are the destination's own. Each space of ids (runs, batches, items with
the archived ones, events with the archived ones) is moved past the
destination's highest by one offset, so every reference (an item's batch and
parent, a batch's parent, an event's item and batch, ...) follows with no
map held in memory, and rows keep their order. The count triggers fire as
the rows go in; the run's ``counts`` and ``passes`` are then written as the
source keeps them, so the destination's totals are the source's.

The run is one transaction on the destination (a crash leaves all of it or
none), read from the source in one read transaction (the run as it was at
one moment), :data:`CHUNK_ROWS` rows at a time: a run of a million items is
never held in memory whole.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

from ..errors import RunError
from .archive import OWN_ROWS
from .base import StoreBase
from .database import Conn
from .queues import QUEUE_ROW, RUN_QUEUE, queue_row

#: Rows read from the source at a time (items: with their own rows).
CHUNK_ROWS = 1000

#: Each table copied, and the space of ids (``runs``, ``batches``, ``items``, ``events``) that each column holding
#: an id is in; a space None: the column is left out, the destination numbers the row. An ``archived_`` table is
#: renumbered as its table.
RENUMBERED: dict[str, dict[str, str | None]] = {
    "runs": {"id": None},
    "queues": {},
    "batches": {"id": "batches", "run_id": "runs", "parent_id": "batches"},
    "items": {"id": "items", "run_id": "runs", "batch_id": "batches", "parent_id": "items"},
    "inputs": {"item_id": "items"},
    "results": {"item_id": "items"},
    "decisions": {"item_id": "items", "run_id": "runs"},
    "events": {"id": "events", "run_id": "runs", "item_id": "items", "batch_id": "batches"},
    "commands": {"id": None, "run_id": "runs"},
    "duplicates": {"id": None, "run_id": "runs", "batch_id": "batches"},
    "ledger": {"run_id": "runs"},
    "counts": {"run_id": "runs"},
    "passes": {"run_id": "runs"},
    "archives": {"run_id": "runs"},
}

#: The tables of a run's workers, its setup and its engine's hold in a shared queue: a copy has no engine.
LEFT = ("workers", "setups", "queue_holds")

#: The tables copied, each in full (every table of a store is copied or :data:`LEFT`).
COPIED = (*RENUMBERED, *(f"archived_{table}" for table in OWN_ROWS))

#: The run's first id in each space it numbers (NULL: none), in the source.
FIRST_IDS = """
SELECT (SELECT min(id) FROM batches WHERE run_id = :run) AS batches,
    (SELECT min(id) FROM (SELECT min(id) AS id FROM items WHERE run_id = :run
        UNION ALL SELECT min(id) FROM archived_items WHERE run_id = :run) AS firsts) AS items,
    (SELECT min(id) FROM (SELECT min(id) AS id FROM events WHERE run_id = :run
        UNION ALL SELECT min(id) FROM archived_events WHERE run_id = :run) AS firsts) AS events
"""

#: The highest id of each space (0: none), in the destination.
LAST_IDS = """
SELECT (SELECT coalesce(max(id), 0) FROM batches) AS batches,
    (SELECT coalesce(max(id), 0) FROM (SELECT max(id) AS id FROM items
        UNION ALL SELECT max(id) FROM archived_items) AS lasts) AS items,
    (SELECT coalesce(max(id), 0) FROM (SELECT max(id) AS id FROM events
        UNION ALL SELECT max(id) FROM archived_events) AS lasts) AS events
"""

#: Up to ``:limit`` of the run's rows of ``{table}`` after the id ``:after``, in id order (``{only}``: a condition).
#: ``run_id + 0``: read along the ids, not the index of the run's rows, which SQLite would read whole and sort for
#: each chunk (a million items: a million chunks' worth of rows).
BY_ID = "SELECT {columns} FROM {table} WHERE run_id + 0 = :run AND id > :after{only} ORDER BY id LIMIT :limit"

#: The rows of ``{table}`` of the run's items (of ``{items}``) whose id is over ``:after`` and at most ``:last``.
OF_ITEMS = ("SELECT {columns} FROM {table} WHERE {column} IN "
            "(SELECT id FROM {items} WHERE run_id + 0 = :run AND id > :after AND id <= :last)")

#: The run's rows of a table of its own totals (a few per stage and group).
OF_RUN = "SELECT {columns} FROM {table} WHERE run_id = :run"

#: The columns of a table, in order.
COLUMNS = "@columns_of(?)"


class Copied(NamedTuple):
    """What one run's copy wrote: its items (live and archived), batches and events."""

    run: str
    items: int
    archived: int
    batches: int
    events: int


class Shifts(dict[str, int]):
    """What each space's ids move by, from the source's to the destination's."""

    def row(self, table: str, row: Mapping[str, Any], columns: list[str]) -> tuple[Any, ...]:
        """A source row of ``table`` as the destination takes it: its columns (those numbered there left out), each
        id moved."""
        spaces = RENUMBERED[table.removeprefix("archived_")]
        return tuple(_moved(row[column], self.get(spaces.get(column) or "", 0)) for column in columns)


def _moved(value: Any, shift: int) -> Any:
    return value + shift if shift and value is not None else value


class RunCopy:
    """One run's copy from ``source`` (read, never written) into the destination's open transaction (``conn``)."""

    def __init__(self, source: StoreBase, conn: Conn, columns: dict[str, list[str]], *, chunk_rows: int) -> None:
        self.source = source
        self.conn = conn
        self.columns = columns
        self.chunk_rows = chunk_rows
        self.shifts = Shifts()
        self.run = 0

    def copy(self, name: str) -> Copied:
        """Every row of the run ``name``; refused (RunError) when the destination holds a run of that name."""
        if self.conn.execute("SELECT 1 FROM runs WHERE name = ?", (name,)).fetchone() is not None:
            raise RunError(f"run {name!r} is in the destination already; nothing was copied")
        (run,) = self.source.rows(f"SELECT {self._listed('runs')} FROM runs WHERE name = ?", [name])
        self.run = run["id"]
        self._number(run)
        self._queue()
        batches = self._by_id("batches")
        items, item_events = self._items("items")
        archived, archived_events = self._items("archived_items")
        events = item_events + archived_events + self._by_id("events", only=" AND item_id IS NULL")
        for table in ("commands", "duplicates"):
            self._by_id(table)
        for table in ("ledger", "archives"):
            self._of_run(table)
        for table in ("counts", "passes"):  # as the source keeps them, whatever the triggers counted on the way
            self.conn.execute(f"DELETE FROM {table} WHERE run_id = ?", (self.run + self.shifts["runs"],))
            self._of_run(table)
        return Copied(name, items, archived, batches, events)

    def _number(self, run: dict[str, Any]) -> None:
        """The run's row written, and each space's shift: past the destination's highest id."""
        self._insert("runs", [run])
        (new,) = self.conn.execute("SELECT id FROM runs WHERE name = ?", (run["name"],)).fetchone()
        (first,) = self.source.rows(FIRST_IDS, {"run": self.run})
        cursor = self.conn.execute(LAST_IDS)
        last = dict(zip([column[0] for column in cursor.description], cursor.fetchone()))
        self.shifts.update({space: last[space] + 1 - (first[space] or 0) for space in first})
        self.shifts["runs"] = new - self.run

    def _queue(self) -> None:
        """The shared queue the run names, as the source has it, when the destination has none of that name."""
        (named,) = self.source.rows(RUN_QUEUE, [self.run])
        if named["queue"] and queue_row(self.conn, named["queue"]) is None:
            self._insert("queues", self.source.rows(QUEUE_ROW, [named["queue"]]))

    def _by_id(self, table: str, *, only: str = "") -> int:
        """The run's rows of ``table``, a chunk at a time in id order: how many."""
        return sum(len(chunk) for chunk in self._chunks(table, only=only))

    def _chunks(self, table: str, *, only: str = "") -> Iterator[list[dict[str, Any]]]:
        """Each chunk of the run's rows of ``table`` (in id order), once written."""
        statement = BY_ID.format(columns=self._listed(table), table=table, only=only)
        after = 0
        while chunk := self.source.rows(statement, {"run": self.run, "after": after, "limit": self.chunk_rows}):
            self._insert(table, chunk)
            yield chunk
            after = chunk[-1]["id"]

    def _items(self, items: str) -> tuple[int, int]:
        """The run's items of ``items`` (``items`` or ``archived_items``) a chunk at a time, each chunk with its own
        rows (inputs, results, decisions, events): how many items, and how many events."""
        prefix = items.removesuffix("items")
        count = events = 0
        after = 0
        for chunk in self._chunks(items):
            window = {"run": self.run, "after": after, "last": chunk[-1]["id"]}
            for own, column in OWN_ROWS.items():
                if own != "items":
                    rows = self.source.rows(OF_ITEMS.format(columns=self._listed(prefix + own),
                                                            table=prefix + own, column=column, items=items), window)
                    self._insert(prefix + own, rows)
                    events += len(rows) if own == "events" else 0
            count += len(chunk)
            after = chunk[-1]["id"]
        return count, events

    def _of_run(self, table: str) -> None:
        self._insert(table, self.source.rows(OF_RUN.format(columns=self._listed(table), table=table),
                                             {"run": self.run}))

    def _insert(self, table: str, rows: list[dict[str, Any]]) -> None:
        """Rows of the source's ``table`` written to the destination's, each id moved."""
        if not rows:
            return
        columns = self._kept(table)
        statement = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
        self.conn.executemany(statement, [self.shifts.row(table, row, columns) for row in rows])

    def _kept(self, table: str) -> list[str]:
        """The columns of ``table`` written to the destination: all but the ids it numbers itself."""
        spaces = RENUMBERED[table.removeprefix("archived_")]
        return [column for column in self.columns[table] if column not in spaces or spaces[column] is not None]

    def _listed(self, table: str) -> str:
        """The columns of ``table``, as a SELECT lists them."""
        return ", ".join(self.columns[table])


def columns(store: StoreBase) -> dict[str, list[str]]:
    """The columns of every table copied, in the order ``store`` (the destination) has them."""
    return {table: [row["name"] for row in store.rows(COLUMNS, [table])] for table in COPIED}


def copy_run(source: StoreBase, destination: StoreBase, name: str, *, chunk_rows: int = CHUNK_ROWS) -> Copied:
    """Copy the run ``name`` whole from ``source`` into ``destination``, in one transaction there, read from the
    source in one read transaction, ``chunk_rows`` rows at a time. Refused (RunError, nothing written) when the
    destination holds a run of that name."""
    listed = columns(destination)
    with source.database.reading(), destination.write() as conn:
        copied = RunCopy(source, conn, listed, chunk_rows=chunk_rows).copy(name)
    destination._shrink_wal()
    return copied
