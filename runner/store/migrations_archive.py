"""Schema version 19 (issue 19): the archive, where finished items go whole and come back from.

``runner archive`` moves a run's finished items, every row of each (its
``items`` row, its input, its stages' results, its kept decisions and its own
events), into tables of the same columns named ``archived_<table>``, so that
the live tables (and the indexes every state change writes) hold only what a
run still works on, and a vacuum gives the space back. ``runner restore``
moves them back as they were. The run's totals stay where they are: the
``counts`` of completed and failed items, ``passes``, ``ledger`` and
``runs.paid_calls`` keep counting an archived item (the store's verbs undo
what the count triggers do on the move, :mod:`runner.store.archive`), so that
``runner status`` says the same after an archive; ``archives`` is the run's
summary row: how many of its items are in the archive, and when it last
changed.

An ``archived_<table>`` has its table's columns in its order: a migration that
adds a column to ``items``, ``inputs``, ``results``, ``decisions`` or
``events`` adds it to its archive table too (``tests/runner/store/test_archive.py``
checks). A batch's own events (``item_id`` NULL) stay: they are the run's, as
the batches are. Item ids are never given again while an archived item holds
one (``items.LAST_ID`` reads both tables), so a restore puts each item back
under its own id.
"""

from __future__ import annotations

ARCHIVE = [
    """
    CREATE TABLE archived_items (
        id INTEGER PRIMARY KEY,
        run_id INTEGER NOT NULL,
        key TEXT NOT NULL,
        grp TEXT NOT NULL,
        seq INTEGER NOT NULL,
        chars INTEGER NOT NULL,
        fingerprint TEXT NOT NULL,
        state TEXT NOT NULL,
        attempts INTEGER NOT NULL,
        paid_calls INTEGER NOT NULL,
        batch_id INTEGER,
        not_before REAL,
        output TEXT,
        error_kind TEXT,
        error TEXT,
        retryable INTEGER,
        updated_at REAL NOT NULL,
        retry_base INTEGER NOT NULL,
        maybe_paid INTEGER NOT NULL,
        refused INTEGER NOT NULL,
        refused_streak INTEGER NOT NULL,
        hold TEXT NOT NULL,
        stage TEXT NOT NULL,
        parent_id INTEGER,
        sub_items_left INTEGER,
        not_billed INTEGER NOT NULL,
        tokens_in INTEGER NOT NULL,
        tokens_out INTEGER NOT NULL,
        cost REAL,
        priority INTEGER NOT NULL
    )
    """,
    "CREATE UNIQUE INDEX archived_items_by_key ON archived_items (run_id, key)",
    "CREATE INDEX archived_items_by_parent ON archived_items (parent_id) WHERE parent_id IS NOT NULL",
    "CREATE TABLE archived_inputs (item_id INTEGER PRIMARY KEY, input TEXT NOT NULL)",
    """
    CREATE TABLE archived_results (
        item_id INTEGER NOT NULL,
        stage TEXT NOT NULL,
        result TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        at REAL NOT NULL,
        PRIMARY KEY (item_id, stage)
    ) WITHOUT ROWID
    """,
    """
    CREATE TABLE archived_decisions (
        item_id INTEGER NOT NULL,
        stage TEXT NOT NULL,
        run_id INTEGER NOT NULL,
        approve INTEGER NOT NULL,
        data TEXT,
        at REAL NOT NULL,
        PRIMARY KEY (item_id, stage)
    ) WITHOUT ROWID
    """,
    """
    CREATE TABLE archived_events (
        id INTEGER NOT NULL,
        run_id INTEGER NOT NULL,
        item_id INTEGER,
        batch_id INTEGER,
        at REAL NOT NULL,
        from_state TEXT,
        to_state TEXT NOT NULL,
        kind TEXT,
        message TEXT,
        items INTEGER NOT NULL,
        stage TEXT NOT NULL,
        to_stage TEXT
    )
    """,
    "CREATE INDEX archived_events_by_item ON archived_events (item_id)",
    """
    CREATE TABLE archives (
        run_id INTEGER PRIMARY KEY REFERENCES runs(id),
        items INTEGER NOT NULL,
        at REAL NOT NULL
    )
    """,
]
