"""The run store's schema: every table as it is now, and the tables, indexes and triggers version 1 created.

Tables:

- ``runs``: one row per run (a job by name), its resolved job and its breaker,
  its totals of paid calls (schema v9), the input it was last read from (v10)
  and whether its items are still being added (v11).
- ``items``: one row per item: state, attempts, paid calls, output, its
  charges and share of tokens and cost (v15); narrow, because every state
  change rewrites its row.
- ``ledger``: a run's charges, tokens and cost per stage (v15), moved in the
  transaction of each item's (:mod:`runner.store.ledger`).
- ``inputs``: each item's input as it is sent (its JSON), apart from ``items``
  so that a state change does not rewrite a kilobyte of text (schema v5).
- ``counts``: items per run, group and state, kept by triggers in the same
  transaction as the change, so that status stays cheap at a million items:
  a batch's move is counted from its event (a batch is one group), any other
  change per item.
- ``batches``: the batches formed, their state and upstream task id, and the
  batch a split one came from (``parent_id``).
- ``events``: append-only history, one row per move of some items from one
  state to another, with how many items moved (``items``). A batch's forward
  path (formed: ``queued``; started: ``running``; answered: ``received``;
  ``completed``) is written once per batch and move by the store method that
  makes it, in the same transaction, with ``item_id`` NULL. Every other state
  change (into ``pending``, ``waiting`` or ``failed``) is written per item by
  a trigger, with the batch the item was in, so no other code path can change
  a state that way without a trace. Adding items writes one row for the run
  (``to_state`` pending, ``items`` how many were new). An item's history is
  its own rows plus the rows of every batch it was in.
- ``commands``: what people (CLI, TUI, notebook) ask a run's engine to do.
- ``engines``: the engine holding each run, with its heartbeat.

Only the store's batch methods (``claim_batch``, ``start_batch``,
``record_answer``, ``settle_batch``) move items into queued, running, received
or completed, each logging the move; the tests check after every scenario that
the events and the counts account for every item. A batch's items share its
group: an item's group changes only with its input, which takes it off a
batch's path (``Store.add_items``).

``PRAGMA user_version`` holds the schema version; ``MIGRATIONS[n]`` brings a
store from version ``n`` to ``n + 1``: the first creates the tables below, the
others are :mod:`runner.store.migrations`' (each with its reasons). A
PostgreSQL store starts at :mod:`.schema_postgres`' baseline.
"""

from __future__ import annotations

from .dialect import POSTGRES, SQLITE, statements
from .migrations import UPGRADES

RUNS = """
CREATE TABLE runs (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    job TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    breaker TEXT NOT NULL DEFAULT 'closed',
    breaker_reason TEXT,
    transport_failures INTEGER NOT NULL DEFAULT 0,
    paused INTEGER NOT NULL DEFAULT 0
)
"""

ITEMS = """
CREATE TABLE items (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    key TEXT NOT NULL,
    grp TEXT NOT NULL,
    seq INTEGER NOT NULL,
    input TEXT NOT NULL,
    chars INTEGER NOT NULL,
    fingerprint TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending',
    attempts INTEGER NOT NULL DEFAULT 0,
    paid_calls INTEGER NOT NULL DEFAULT 0,
    batch_id INTEGER,
    not_before REAL,
    output TEXT,
    result TEXT,
    error_kind TEXT,
    error TEXT,
    retryable INTEGER,
    needs_confirmation INTEGER NOT NULL DEFAULT 0,
    updated_at REAL NOT NULL
)
"""

COUNTS = """
CREATE TABLE counts (
    run_id INTEGER NOT NULL,
    grp TEXT NOT NULL,
    state TEXT NOT NULL,
    n INTEGER NOT NULL,
    PRIMARY KEY (run_id, grp, state)
) WITHOUT ROWID
"""

BATCHES = """
CREATE TABLE batches (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    grp TEXT NOT NULL,
    state TEXT NOT NULL,
    size INTEGER NOT NULL,
    chars INTEGER NOT NULL,
    upstream_id TEXT,
    error TEXT,
    created_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL
)
"""

EVENTS = """
CREATE TABLE events (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL,
    item_id INTEGER,
    batch_id INTEGER,
    at REAL NOT NULL,
    from_state TEXT,
    to_state TEXT NOT NULL,
    kind TEXT,
    message TEXT
)
"""

COMMANDS = """
CREATE TABLE commands (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    command TEXT NOT NULL,
    args TEXT NOT NULL DEFAULT '{}',
    created_at REAL NOT NULL,
    done_at REAL,
    outcome TEXT
)
"""

ENGINES = """
CREATE TABLE engines (
    run_id INTEGER PRIMARY KEY REFERENCES runs(id),
    token TEXT NOT NULL,
    pid INTEGER NOT NULL,
    host TEXT NOT NULL,
    started_at REAL NOT NULL,
    heartbeat_at REAL NOT NULL
)
"""

INDEXES = [
    "CREATE UNIQUE INDEX items_by_key ON items (run_id, key)",
    "CREATE INDEX items_to_claim ON items (run_id, state, grp, seq)",
    "CREATE INDEX items_by_batch ON items (batch_id)",
    "CREATE INDEX batches_by_state ON batches (run_id, state)",
    "CREATE INDEX events_by_item ON events (item_id)",
    "CREATE INDEX events_by_run ON events (run_id, id)",
    "CREATE INDEX commands_open ON commands (run_id, done_at)",
]

# The counts table follows every insert, state or group change and delete of an
# item; the events table gets a row for every insert and state change (version
# 5 replaces the insert and event triggers).
TRIGGERS = [
    """
    CREATE TRIGGER items_count_insert AFTER INSERT ON items BEGIN
        INSERT INTO counts (run_id, grp, state, n) VALUES (NEW.run_id, NEW.grp, NEW.state, 1)
        ON CONFLICT (run_id, grp, state) DO UPDATE SET n = n + 1;
        INSERT INTO events (run_id, item_id, at, to_state)
        VALUES (NEW.run_id, NEW.id, NEW.updated_at, NEW.state);
    END
    """,
    """
    CREATE TRIGGER items_count_update AFTER UPDATE OF state, grp ON items
    WHEN OLD.state IS NOT NEW.state OR OLD.grp IS NOT NEW.grp BEGIN
        UPDATE counts SET n = n - 1
        WHERE run_id = OLD.run_id AND grp = OLD.grp AND state = OLD.state;
        INSERT INTO counts (run_id, grp, state, n) VALUES (NEW.run_id, NEW.grp, NEW.state, 1)
        ON CONFLICT (run_id, grp, state) DO UPDATE SET n = n + 1;
    END
    """,
    """
    CREATE TRIGGER items_event AFTER UPDATE OF state ON items
    WHEN OLD.state IS NOT NEW.state BEGIN
        INSERT INTO events (run_id, item_id, batch_id, at, from_state, to_state, kind, message)
        VALUES (NEW.run_id, NEW.id, NEW.batch_id, NEW.updated_at, OLD.state, NEW.state,
                NEW.error_kind, NEW.error);
    END
    """,
    """
    CREATE TRIGGER items_count_delete AFTER DELETE ON items BEGIN
        UPDATE counts SET n = n - 1
        WHERE run_id = OLD.run_id AND grp = OLD.grp AND state = OLD.state;
    END
    """,
]

#: The tables as version 1 created them; :mod:`runner.store.migrations` has every change since.
CREATE = [RUNS, ITEMS, COUNTS, BATCHES, EVENTS, COMMANDS, ENGINES, *INDEXES, *TRIGGERS]

#: ``MIGRATIONS[n]`` takes a store at version ``n`` to version ``n + 1`` (a SQLite file).
MIGRATIONS: list[list[str]] = [CREATE, *(statements(upgrade, SQLITE) for upgrade in UPGRADES)]

SCHEMA_VERSION = len(MIGRATIONS)


def postgres_migrations(version: int) -> list[list[str]]:
    """The migrations that take a PostgreSQL store at ``version`` (the baseline or later) to ``SCHEMA_VERSION``."""
    return [statements(upgrade, POSTGRES) for upgrade in UPGRADES[version - 1:]]
