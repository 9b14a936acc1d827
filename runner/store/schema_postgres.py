"""The run store's schema on PostgreSQL: a baseline, SQLite's tables at its schema version 23, written for PostgreSQL.

A PostgreSQL store starts at the baseline (there are no older ones); the
migrations after it (``migrations.UPGRADES`` from ``BASELINE``) run on both
databases: portable statements, or ``Dialects`` with each its own. The
tables, columns and indexes are SQLite's (a test compares a fresh store of
each), typed as PostgreSQL types them: SQLite's INTEGER (64-bit) is BIGINT,
its REAL (an 8-byte float: epoch seconds) DOUBLE PRECISION, and text compares
bytewise (``COLLATE "C"``), as in SQLite. The schema version is the one row
of ``store_version``. SQLite numbers a row inserted without an id after the
highest id (its rowid); so does ``next_id`` here. The triggers that keep the
counts are in :mod:`.schema_postgres_triggers`.
"""

from __future__ import annotations

from .schema_postgres_triggers import TRIGGERS

#: The SQLite schema version the baseline is.
BASELINE = 23

#: The version table, read before anything else.
VERSION = "CREATE TABLE store_version (version BIGINT NOT NULL)"

_TABLES = [
    """
CREATE TABLE runs (
    id BIGINT PRIMARY KEY, name TEXT NOT NULL UNIQUE, job TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL, updated_at DOUBLE PRECISION NOT NULL,
    breaker TEXT NOT NULL DEFAULT 'closed', breaker_reason TEXT,
    transport_failures BIGINT NOT NULL DEFAULT 0, paused BIGINT NOT NULL DEFAULT 0,
    steps BIGINT NOT NULL DEFAULT 0, nonce TEXT NOT NULL DEFAULT '', breaker_kind TEXT,
    paid_calls BIGINT NOT NULL DEFAULT 0, maybe_paid BIGINT NOT NULL DEFAULT 0, input_path TEXT,
    input_size BIGINT, input_mtime_ns BIGINT, input_hash TEXT, input_read_at DOUBLE PRECISION,
    preparing BIGINT NOT NULL DEFAULT 0, budget TEXT
)
""",
    """
CREATE TABLE batches (
    id BIGINT PRIMARY KEY, run_id BIGINT NOT NULL REFERENCES runs(id), grp TEXT NOT NULL,
    state TEXT NOT NULL, size BIGINT NOT NULL, chars BIGINT NOT NULL, upstream_id TEXT,
    error TEXT, created_at DOUBLE PRECISION NOT NULL, started_at DOUBLE PRECISION,
    finished_at DOUBLE PRECISION, round BIGINT NOT NULL DEFAULT 0, retries BIGINT NOT NULL DEFAULT 0,
    intent_at DOUBLE PRECISION, submits BIGINT NOT NULL DEFAULT 0, parent_id BIGINT REFERENCES batches(id),
    answer TEXT, lands_by DOUBLE PRECISION, stage TEXT NOT NULL DEFAULT '',
    usage TEXT, results_expire DOUBLE PRECISION
)
""",
    """
CREATE TABLE items (
    id BIGINT PRIMARY KEY, run_id BIGINT NOT NULL REFERENCES runs(id), key TEXT NOT NULL,
    grp TEXT NOT NULL, seq BIGINT NOT NULL, chars BIGINT NOT NULL,
    fingerprint TEXT NOT NULL, state TEXT NOT NULL DEFAULT 'pending',
    attempts BIGINT NOT NULL DEFAULT 0, paid_calls BIGINT NOT NULL DEFAULT 0, batch_id BIGINT,
    not_before DOUBLE PRECISION, output TEXT, error_kind TEXT, error TEXT,
    retryable BIGINT, updated_at DOUBLE PRECISION NOT NULL, retry_base BIGINT NOT NULL DEFAULT 0,
    maybe_paid BIGINT NOT NULL DEFAULT 0, refused BIGINT NOT NULL DEFAULT 0,
    refused_streak BIGINT NOT NULL DEFAULT 0, hold TEXT NOT NULL DEFAULT 'none',
    stage TEXT NOT NULL DEFAULT '', parent_id BIGINT REFERENCES items(id), sub_items_left BIGINT,
    not_billed BIGINT NOT NULL DEFAULT 0, tokens_in BIGINT NOT NULL DEFAULT 0,
    tokens_out BIGINT NOT NULL DEFAULT 0, cost DOUBLE PRECISION DEFAULT 0, priority BIGINT NOT NULL DEFAULT 0,
    work TEXT, reused BIGINT NOT NULL DEFAULT 0
)
""",
    """
CREATE TABLE inputs (
    item_id BIGINT PRIMARY KEY REFERENCES items(id), input TEXT NOT NULL
)
""",
    """
CREATE TABLE events (
    id BIGINT PRIMARY KEY, run_id BIGINT NOT NULL, item_id BIGINT, batch_id BIGINT, at DOUBLE PRECISION NOT NULL,
    from_state TEXT, to_state TEXT NOT NULL, kind TEXT,
    message TEXT, items BIGINT NOT NULL DEFAULT 1, stage TEXT NOT NULL DEFAULT '',
    to_stage TEXT
)
""",
    """
CREATE TABLE commands (
    id BIGINT PRIMARY KEY, run_id BIGINT NOT NULL REFERENCES runs(id), command TEXT NOT NULL,
    args TEXT NOT NULL DEFAULT '{}', created_at DOUBLE PRECISION NOT NULL, done_at DOUBLE PRECISION,
    outcome TEXT
)
""",
    """
CREATE TABLE engines (
    run TEXT PRIMARY KEY, token TEXT NOT NULL, pid BIGINT NOT NULL,
    host TEXT NOT NULL, started_at DOUBLE PRECISION NOT NULL, heartbeat_at DOUBLE PRECISION NOT NULL
)
""",
    """
CREATE TABLE counts (
    run_id BIGINT NOT NULL, stage TEXT NOT NULL, grp TEXT NOT NULL,
    state TEXT NOT NULL, n BIGINT NOT NULL, PRIMARY KEY (run_id, stage, grp, state)
)
""",
    """
CREATE TABLE duplicates (
    id BIGINT PRIMARY KEY, run_id BIGINT NOT NULL REFERENCES runs(id),
    batch_id BIGINT NOT NULL REFERENCES batches(id), upstream_id TEXT NOT NULL,
    found_at DOUBLE PRECISION NOT NULL, cancelled BIGINT NOT NULL, message TEXT NOT NULL,
    UNIQUE (batch_id, upstream_id)
)
""",
    """
CREATE TABLE decisions (
    item_id BIGINT NOT NULL REFERENCES items(id), stage TEXT NOT NULL,
    run_id BIGINT NOT NULL REFERENCES runs(id), approve BIGINT NOT NULL, data TEXT,
    at DOUBLE PRECISION NOT NULL, PRIMARY KEY (item_id, stage)
)
""",
    """
CREATE TABLE results (
    item_id BIGINT NOT NULL REFERENCES items(id), stage TEXT NOT NULL,
    result TEXT NOT NULL, fingerprint TEXT NOT NULL, at DOUBLE PRECISION NOT NULL,
    work TEXT, inherited BIGINT NOT NULL DEFAULT 0, PRIMARY KEY (item_id, stage)
)
""",
    """
CREATE TABLE passes (
    run_id BIGINT NOT NULL, stage TEXT NOT NULL, passed BIGINT NOT NULL DEFAULT 0,
    skipped BIGINT NOT NULL DEFAULT 0, PRIMARY KEY (run_id, stage)
)
""",
    """
CREATE TABLE ledger (
    run_id BIGINT NOT NULL, stage TEXT NOT NULL, billed BIGINT NOT NULL DEFAULT 0,
    not_billed BIGINT NOT NULL DEFAULT 0, unknown BIGINT NOT NULL DEFAULT 0,
    unknown_chars BIGINT NOT NULL DEFAULT 0, input_tokens BIGINT NOT NULL DEFAULT 0,
    cached_tokens BIGINT NOT NULL DEFAULT 0, output_tokens BIGINT NOT NULL DEFAULT 0,
    reasoning_tokens BIGINT NOT NULL DEFAULT 0, tokened BIGINT NOT NULL DEFAULT 0,
    cost DOUBLE PRECISION NOT NULL DEFAULT 0, uncosted BIGINT NOT NULL DEFAULT 0, reused BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, stage)
)
""",
    """
CREATE TABLE queues (
    name TEXT PRIMARY KEY, concurrency BIGINT NOT NULL,
    breaker TEXT NOT NULL DEFAULT 'closed', breaker_kind TEXT,
    breaker_reason TEXT, transport_failures BIGINT NOT NULL DEFAULT 0,
    quiet_until DOUBLE PRECISION NOT NULL DEFAULT 0
)
""",
    """
CREATE TABLE queue_holds (
    run_id BIGINT PRIMARY KEY REFERENCES runs(id), queue TEXT NOT NULL REFERENCES queues(name),
    token TEXT NOT NULL, priority BIGINT NOT NULL DEFAULT 0, held BIGINT NOT NULL DEFAULT 0,
    waiting BIGINT NOT NULL DEFAULT 0
)
""",
    """
CREATE TABLE archives (
    run_id BIGINT PRIMARY KEY REFERENCES runs(id), items BIGINT NOT NULL, at DOUBLE PRECISION NOT NULL
)
""",
    """
CREATE TABLE archived_items (
    id BIGINT, run_id BIGINT, key TEXT, grp TEXT, seq BIGINT, chars BIGINT,
    fingerprint TEXT, state TEXT, attempts BIGINT, paid_calls BIGINT, batch_id BIGINT,
    not_before DOUBLE PRECISION, output TEXT, error_kind TEXT, error TEXT,
    retryable BIGINT, updated_at DOUBLE PRECISION, retry_base BIGINT, maybe_paid BIGINT, refused BIGINT,
    refused_streak BIGINT, hold TEXT, stage TEXT, parent_id BIGINT, sub_items_left BIGINT,
    not_billed BIGINT, tokens_in BIGINT, tokens_out BIGINT, cost DOUBLE PRECISION, priority BIGINT,
    work TEXT, reused BIGINT NOT NULL DEFAULT 0
)
""",
    """
CREATE TABLE archived_inputs (
    item_id BIGINT, input TEXT
)
""",
    """
CREATE TABLE archived_results (
    item_id BIGINT, stage TEXT, result TEXT, fingerprint TEXT,
    at DOUBLE PRECISION, work TEXT, inherited BIGINT NOT NULL DEFAULT 0
)
""",
    """
CREATE TABLE archived_decisions (
    item_id BIGINT, stage TEXT, run_id BIGINT, approve BIGINT, data TEXT,
    at DOUBLE PRECISION
)
""",
    """
CREATE TABLE archived_events (
    id BIGINT, run_id BIGINT, item_id BIGINT, batch_id BIGINT, at DOUBLE PRECISION, from_state TEXT,
    to_state TEXT, kind TEXT, message TEXT, items BIGINT,
    stage TEXT, to_stage TEXT
)
""",
]

#: The tables, text compared bytewise (as in SQLite, whatever the database's own collation).
TABLES = [table.replace(" TEXT", ' TEXT COLLATE "C"') for table in _TABLES]

INDEXES = [
    "CREATE UNIQUE INDEX archived_decisions_by_item ON archived_decisions (item_id, stage)",
    "CREATE INDEX archived_events_by_item ON archived_events (item_id)",
    "CREATE UNIQUE INDEX archived_inputs_by_item ON archived_inputs (item_id)",
    "CREATE UNIQUE INDEX archived_items_by_id ON archived_items (id)",
    "CREATE UNIQUE INDEX archived_items_by_key ON archived_items (run_id, key)",
    "CREATE INDEX archived_items_by_parent ON archived_items (parent_id) WHERE parent_id IS NOT NULL",
    "CREATE UNIQUE INDEX archived_results_by_item ON archived_results (item_id, stage)",
    "CREATE INDEX batches_by_state ON batches (run_id, state)",
    "CREATE INDEX commands_open ON commands (run_id, done_at)",
    "CREATE INDEX events_by_batch ON events (batch_id) WHERE item_id IS NULL",
    "CREATE INDEX events_by_item ON events (item_id) WHERE item_id IS NOT NULL",
    "CREATE INDEX events_by_run ON events (run_id, id)",
    "CREATE INDEX items_backing_off ON items (run_id, stage, priority DESC, grp, seq) "
    "WHERE state = 'waiting' AND hold = 'none'",
    "CREATE INDEX items_by_batch ON items (batch_id)",
    "CREATE UNIQUE INDEX items_by_key ON items (run_id, key)",
    "CREATE INDEX items_by_parent ON items (parent_id) WHERE parent_id IS NOT NULL",
    "CREATE INDEX items_by_work ON items (work) WHERE state = 'completed' AND work IS NOT NULL",
    "CREATE INDEX items_deciding ON items (run_id, stage, seq) WHERE hold = 'decide'",
    "CREATE INDEX items_failed ON items (run_id, error_kind, retryable, seq) WHERE state = 'failed'",
    "CREATE INDEX items_held ON items (run_id) WHERE hold = 'confirm'",
    "CREATE INDEX items_joining ON items (run_id) WHERE hold = 'join'",
    "CREATE INDEX items_scheduled ON items (run_id, not_before) WHERE hold = 'scheduled'",
    "CREATE INDEX items_to_claim ON items (run_id, state, stage, priority DESC, grp, seq)",
    "CREATE INDEX queue_holds_by_queue ON queue_holds (queue)",
    "CREATE INDEX results_by_work ON results (work) WHERE work IS NOT NULL",
]

#: The tables whose rows may be inserted without an id: each numbered after the highest, as SQLite's rowid.
NUMBERED = ["runs", "batches", "items", "events", "commands", "duplicates"]

NEXT_ID = [
    f"""
    CREATE FUNCTION next_{table}_id() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF NEW.id IS NULL THEN
            SELECT coalesce(max(id), 0) + 1 INTO NEW.id FROM {table};
        END IF;
        RETURN NEW;
    END $$
    """
    for table in NUMBERED
] + [f"CREATE TRIGGER {table}_next_id BEFORE INSERT ON {table} FOR EACH ROW EXECUTE FUNCTION next_{table}_id()"
     for table in NUMBERED]

#: The baseline, in order: a fresh store's statements.
CREATE = [VERSION, *TABLES, *INDEXES, *NEXT_ID, *TRIGGERS, f"INSERT INTO store_version (version) VALUES ({BASELINE})"]
