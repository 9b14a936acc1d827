"""The store's migrations: what each schema version after the first changed, and why, in order.

Version 1 is the tables of :mod:`runner.store.schema` as first written;
``UPGRADES[n - 1]`` takes a store at version ``n`` to version ``n + 1``. To
change the schema, add a list of statements here (or in a module of its own,
as :mod:`.migrations_stages` and :mod:`.migrations_ledger`), under a comment that
says what the version changes and why, and append it to ``UPGRADES``:
``schema.SCHEMA_VERSION`` follows, and a store opened by this runner is
brought up to it in one transaction. From version 23 on (PostgreSQL's
baseline, :mod:`.schema_postgres`) a migration runs on both databases: a list
of statements both take (BIGINT, DOUBLE PRECISION, TEXT: SQLite reads them as
its INTEGER, REAL and TEXT), or ``Dialects(sqlite=[...], postgres=[...])``. A migration rewrites old columns as new
ones; it moves no item from one state to another.
"""

from __future__ import annotations

from .dialect import Dialects
from .migrations_budget import BUDGET
from .migrations_ledger import LEDGER, RESULTS_EXPIRE
from .migrations_stages import DECISIONS, FAN_OUT, PASSES, STAGES
from .migrations_queue import PRIORITIES_AND_SCHEDULES
from .migrations_shared_queues import SHARED_QUEUES
from .migrations_archive import ARCHIVE
from .migrations_reuse import REUSE
from .migrations_inherited import INHERITED_RESULTS
from .migrations_workers import HOLDS_BY_WORKER, STREAKS, WORKERS

# Version 2: the lease is held by run name, taken before the run row exists;
# a partial index counts the items held for confirmation; a person's controls:
# ``steps`` is how many batches may start while
# the run is paused or its breaker open; ``retry_base`` is the attempt count at a
# person's last retry, so a retried item gets a fresh budget; a batch's ``round``
# counts how often it was split, ``retries`` its request retries.
CONTROLS = [
    "DROP TABLE engines",
    """
    CREATE TABLE engines (
        run TEXT PRIMARY KEY,
        token TEXT NOT NULL,
        pid INTEGER NOT NULL,
        host TEXT NOT NULL,
        started_at REAL NOT NULL,
        heartbeat_at REAL NOT NULL
    )
    """,
    "CREATE INDEX items_held ON items (run_id) WHERE needs_confirmation = 1",
    "ALTER TABLE runs ADD COLUMN steps INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE items ADD COLUMN retry_base INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE batches ADD COLUMN round INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE batches ADD COLUMN retries INTEGER NOT NULL DEFAULT 0",
]

# Version 3: when a batch's items were committed to go upstream (a call about to
# be made, or a submit's intent written before its upload), so that recovery
# tells items that were never sent from those that may have been; ``submits``
# marks a batch sent as a task (found again by its reference) rather than a call;
# a run's ``nonce`` makes those references unique across stores that reuse a name.
# ``maybe_paid`` counts calls sent whose answer was lost (a read timeout, a
# dropped connection): the upstream may have run and billed them.
INTENTS = [
    "ALTER TABLE batches ADD COLUMN intent_at REAL",
    "ALTER TABLE batches ADD COLUMN submits INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE runs ADD COLUMN nonce TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE items ADD COLUMN maybe_paid INTEGER NOT NULL DEFAULT 0",
]

# Version 4: failures by kind read from an index of the failed items alone, so
# that a UI's refresh stays cheap at a million items.
FAILED_INDEX = ["CREATE INDEX items_failed ON items (run_id, error_kind, retryable, seq) WHERE state = 'failed'"]

# Version 5: items' inputs in a table of their own. A state change rewrites the
# item's row; with the input in it (up to kilobytes), that cost twice the CPU and
# disk writes of the narrow row (bench/store.py).
INPUTS = [
    "CREATE TABLE inputs (item_id INTEGER PRIMARY KEY REFERENCES items(id), input TEXT NOT NULL)",
    "INSERT INTO inputs (item_id, input) SELECT id, input FROM items",
    "ALTER TABLE items DROP COLUMN input",
]

# Version 6: a batch's forward path is logged once per batch and move (see the
# docstring of schema) and counted the same way: items no longer get an event when
# added or when they enter queued, running, received or completed, and the
# counts of such a move follow its batch's event (a batch is one group). One
# trigger counts and logs every other change per item. ``events.items`` says how
# many items a row moved (1 for the rows written before); the item index holds
# item rows only and a batch index the batch rows, for an item's history; a
# split batch knows its parent. (The trigger's WHEN spells out each state: a
# NOT IN list of more than two builds a table on every row it is tested on.)
BATCH_EVENTS = [
    "ALTER TABLE events ADD COLUMN items INTEGER NOT NULL DEFAULT 1",
    "ALTER TABLE batches ADD COLUMN parent_id INTEGER REFERENCES batches(id)",
    "DROP TRIGGER items_count_insert",
    """
    CREATE TRIGGER items_count_insert AFTER INSERT ON items BEGIN
        INSERT INTO counts (run_id, grp, state, n) VALUES (NEW.run_id, NEW.grp, NEW.state, 1)
        ON CONFLICT (run_id, grp, state) DO UPDATE SET n = n + 1;
    END
    """,
    "DROP TRIGGER items_count_update",
    "DROP TRIGGER items_event",
    """
    CREATE TRIGGER items_change AFTER UPDATE OF state, grp ON items
    WHEN NEW.state != 'queued' AND NEW.state != 'running' AND NEW.state != 'received' AND NEW.state != 'completed'
    AND (OLD.state IS NOT NEW.state OR OLD.grp IS NOT NEW.grp) BEGIN
        INSERT INTO counts (run_id, grp, state, n)
        VALUES (OLD.run_id, OLD.grp, OLD.state, -1), (NEW.run_id, NEW.grp, NEW.state, 1)
        ON CONFLICT (run_id, grp, state) DO UPDATE SET n = n + excluded.n;
        INSERT INTO events (run_id, item_id, batch_id, at, from_state, to_state, kind, message, items)
        SELECT NEW.run_id, NEW.id, coalesce(NEW.batch_id, OLD.batch_id), NEW.updated_at, OLD.state, NEW.state,
               NEW.error_kind, NEW.error, 1
        WHERE OLD.state IS NOT NEW.state;
    END
    """,
    """
    CREATE TRIGGER events_count_batch AFTER INSERT ON events
    WHEN NEW.item_id IS NULL AND NEW.batch_id IS NOT NULL BEGIN
        UPDATE counts SET n = n - NEW.items
        WHERE run_id = NEW.run_id AND grp = (SELECT grp FROM batches WHERE id = NEW.batch_id)
        AND state = NEW.from_state;
        INSERT INTO counts (run_id, grp, state, n)
        SELECT NEW.run_id, grp, NEW.to_state, NEW.items FROM batches WHERE id = NEW.batch_id
        ON CONFLICT (run_id, grp, state) DO UPDATE SET n = n + excluded.n;
    END
    """,
    "DROP INDEX events_by_item",
    "CREATE INDEX events_by_item ON events (item_id) WHERE item_id IS NOT NULL",
    "CREATE INDEX events_by_batch ON events (batch_id) WHERE item_id IS NULL",
]

# Version 7: what keeps a paid answer and a lost create from costing twice.
# ``batches.answer`` is the raw answer as it came back (a call's content as
# received, JSON-encoded unless it was text; a task's answered lines as an object
# of key -> content), saved in the transaction that makes its items received, so
# that no answer's shape can lose it. ``lands_by``, written as a task's create is
# sent, is until when that create may still land upstream if its answer is lost
# (the provider's ``timeout`` plus its ``create_margin``, as they were then; the
# batches submitted before take ten minutes after their intent). ``items.refused`` counts the tries the upstream refused before running
# anything (a 429, a 400 found by splitting): they cost nothing and do not count
# against ``max_attempts``, which now bounds the tries that may have cost
# (``retry_base`` counts those, no longer all tries, at a person's last retry);
# ``refused_streak`` counts the refusals in a row, bounded by ``max_refusals``.
# ``duplicates``: an upstream task found carrying a batch's reference beside the
# one the batch kept (a create sent twice, by a proxy's own retry or a create that
# landed late), with whether its cancel was accepted: it may have billed the lines
# it ran.
ANSWERS = [
    "ALTER TABLE batches ADD COLUMN answer TEXT",
    "ALTER TABLE batches ADD COLUMN lands_by REAL",
    "UPDATE batches SET lands_by = intent_at + 600 WHERE submits = 1",
    "ALTER TABLE items ADD COLUMN refused INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE items ADD COLUMN refused_streak INTEGER NOT NULL DEFAULT 0",
    """
    CREATE TABLE duplicates (
        id INTEGER PRIMARY KEY,
        run_id INTEGER NOT NULL REFERENCES runs(id),
        batch_id INTEGER NOT NULL REFERENCES batches(id),
        upstream_id TEXT NOT NULL,
        found_at REAL NOT NULL,
        cancelled INTEGER NOT NULL,
        message TEXT NOT NULL,
        UNIQUE (batch_id, upstream_id)
    )
    """,
]

# Version 8: the shape of the core (issue 14). A sent item's wait for a person
# is a named ``hold`` ('none', 'confirm': held for a person's confirmation,
# 'confirmed': the engine polls or looks for its task), no longer the integers
# 0, 1 and 2 of ``needs_confirmation`` inside ``running``. ``items.result`` is
# gone: it was a copy of ``output`` made on completion, and a completed item's
# output is its result (a store whose result differs keeps the result; the old
# result of an item failed since as ``input_changed`` is dropped: it never
# stood for the item's new input, and the item's history keeps its moves). Why a
# breaker opened is a kind (``runs.breaker_kind``, a failure kind) beside its
# reason, read from the reason's leading kind in older stores, so that exit
# codes come from the kind, never from the sentence.
SHAPE = [
    "ALTER TABLE items ADD COLUMN hold TEXT NOT NULL DEFAULT 'none'",
    "UPDATE items SET hold = CASE needs_confirmation WHEN 1 THEN 'confirm' ELSE 'confirmed' END "
    "WHERE needs_confirmation IN (1, 2)",
    "DROP INDEX items_held",
    "ALTER TABLE items DROP COLUMN needs_confirmation",
    "CREATE INDEX items_held ON items (run_id) WHERE hold = 'confirm'",
    "UPDATE items SET output = result WHERE state = 'completed' AND result IS NOT NULL AND output IS NOT result",
    "ALTER TABLE items DROP COLUMN result",
    "ALTER TABLE runs ADD COLUMN breaker_kind TEXT",
    """
    UPDATE runs SET breaker_kind = CASE
        WHEN breaker_reason LIKE '% consecutive transport failures%' THEN 'transport'
        ELSE substr(breaker_reason, 1, instr(breaker_reason, ':') - 1) END
    WHERE breaker != 'closed' AND (breaker_reason LIKE '% consecutive transport failures%'
        OR substr(breaker_reason, 1, instr(breaker_reason, ':') - 1) IN (
            'transport', 'rate_limited', 'batch_invalid', 'item_invalid', 'auth', 'billing', 'permission',
            'bad_request', 'not_found', 'input_changed', 'store'))
    """,
]

# Version 9: a run's totals of its items' ``paid_calls`` and ``maybe_paid``, moved by the statements
# that move an item's, in the same transaction (status stays cheap at a million items); filled once.
PAID_TOTALS = [
    "ALTER TABLE runs ADD COLUMN paid_calls INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE runs ADD COLUMN maybe_paid INTEGER NOT NULL DEFAULT 0",
    "UPDATE runs SET paid_calls = (SELECT coalesce(sum(paid_calls), 0) FROM items WHERE run_id = runs.id), "
    "maybe_paid = (SELECT coalesce(sum(maybe_paid), 0) FROM items WHERE run_id = runs.id)",
]

# Version 10: the input file the items were last read from, as it was (``runner.inputs.Fingerprint``),
# and when: an unchanged input is not read again. NULL: not known, or an input that is always read.
INPUT_READ = [f"ALTER TABLE runs ADD COLUMN input_{column}" for column in (
    "path TEXT", "size INTEGER", "mtime_ns INTEGER", "hash TEXT", "read_at REAL")]

# Version 11: a run whose items are being added (``preparing`` 1), in chunks of their own transactions,
# until the last chunk's: a prepare cut short is never taken for a prepared run, and is read again.
PREPARING = ["ALTER TABLE runs ADD COLUMN preparing INTEGER NOT NULL DEFAULT 0"]

#: In order: ``UPGRADES[n - 1]`` takes a store at version ``n`` to version ``n + 1``.
UPGRADES: list[list[str] | Dialects] = [
    CONTROLS,
    INTENTS,
    FAILED_INDEX,
    INPUTS,
    BATCH_EVENTS,
    ANSWERS,
    SHAPE,
    PAID_TOTALS,
    INPUT_READ,
    PREPARING,
    STAGES,
    DECISIONS,
    FAN_OUT,
    PASSES,
    LEDGER,
    RESULTS_EXPIRE,
    PRIORITIES_AND_SCHEDULES,
    SHARED_QUEUES,
    ARCHIVE,
    BUDGET,
    REUSE,
    INHERITED_RESULTS,
    WORKERS,
    HOLDS_BY_WORKER,
    STREAKS,
]
