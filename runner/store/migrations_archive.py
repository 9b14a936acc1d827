"""Schema version 19 (issue 19): the archive, where finished items go whole and come back from.

``runner archive`` moves a run's finished items, every row of each (its
``items`` row, its input, its stages' results, its kept decisions and its own
events), into tables of the same columns named ``archived_<table>`` (made as
copies of the tables' columns, with their types; unique indexes stand for
their keys), so that the live tables (and the indexes every state change
writes) hold only what a run still works on, and a vacuum gives the space back. ``runner restore``
moves them back as they were. The run's totals stay where they are: the
``counts`` of completed and failed items, ``passes``, ``ledger`` and
``runs.paid_calls`` keep counting an archived item (the store's verbs undo
what the count triggers do on the move, :mod:`runner.store.archive`), so that
``runner status`` says the same after an archive; ``archives`` is the run's
summary row: how many of its items are in the archive, and when it last
changed.

An ``archived_<table>`` has its table's columns in its order: a migration that
adds a column to ``items``, ``inputs``, ``results``, ``decisions`` or
``events`` adds it to its archive table too (``tests/runner/store/test_archive_verbs.py``
checks). A batch's own events (``item_id`` NULL) stay: they are the run's, as
the batches are. Item ids are never given again while an archived item holds
one (``items.LAST_ID`` reads both tables), so a restore puts each item back
under its own id. An event's id may be given again (SQLite numbers a new row
after the largest), so ``archived_events.id`` is no key, and an archived
event whose id was taken since comes back under a new one.
"""

from __future__ import annotations

#: The tables of an item's own rows, each copied (its columns, empty) as ``archived_<table>``.
OWN = ("items", "inputs", "results", "decisions", "events")

ARCHIVE = [
    *(f"CREATE TABLE archived_{table} AS SELECT * FROM {table} WHERE false" for table in OWN),
    "CREATE UNIQUE INDEX archived_items_by_id ON archived_items (id)",
    "CREATE UNIQUE INDEX archived_items_by_key ON archived_items (run_id, key)",
    "CREATE INDEX archived_items_by_parent ON archived_items (parent_id) WHERE parent_id IS NOT NULL",
    "CREATE UNIQUE INDEX archived_inputs_by_item ON archived_inputs (item_id)",
    "CREATE UNIQUE INDEX archived_results_by_item ON archived_results (item_id, stage)",
    "CREATE UNIQUE INDEX archived_decisions_by_item ON archived_decisions (item_id, stage)",
    "CREATE INDEX archived_events_by_item ON archived_events (item_id)",
    """
    CREATE TABLE archives (
        run_id INTEGER PRIMARY KEY REFERENCES runs(id),
        items INTEGER NOT NULL,
        at REAL NOT NULL
    )
    """,
]
