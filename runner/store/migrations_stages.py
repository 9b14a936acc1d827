"""The store's migrations for stages, a person's decisions and fan-out (issue 17): versions 12 to 14.

Split from :mod:`runner.store.migrations`, which lists them in ``UPGRADES``; each with its reasons.
"""

from __future__ import annotations

# Version 12: stages (issue 17). A run's items go through its job's stages in order; a job without
# ``[[stage]]`` has one, named after its provider kind, which every item and batch of an older store is
# at (read from the run's saved job). ``items.stage`` is an item's current stage; ``batches.stage`` the
# stage a batch works (a batch is one stage and one group). ``results`` keeps each stage's validated
# result in a pipeline (a job of ``[[stage]]`` tables), apart from the narrow ``items`` row (as
# ``inputs``), with the fingerprint of what made it (the stage's model, prompt, schema and the job's
# version), so that a changed stage is sent again alone. ``items.output`` stays: it is the current
# stage's answer as received, validated before it becomes a result (invariant 2), and a completed
# item's output is its last stage's result; a job of one stage (every older store's) keeps its result
# there alone, as before: a second copy of every result cost a tenth of the store's speed
# (bench/store.py). ``counts`` is kept per (run, stage, group, state) (rebuilt, its triggers with it);
# ``events.stage`` is the stage the items were at, ``to_stage`` the one they moved to when it is another
# (a boundary), so that events account for every item per stage.
# Batches are claimed per stage: the claim index gets the stage after the state (one index still, as
# every state change writes each index of ``items``).
#: The per-item change trigger of version 12 on: counts and logs every change of an item's state, group or
#: stage but the batch path's moves (``{moves}``: the moves it leaves to their batch's event).
ITEMS_CHANGE = """
CREATE TRIGGER items_change AFTER UPDATE OF state, grp, stage ON items
WHEN {moves}
AND (OLD.state IS NOT NEW.state OR OLD.grp IS NOT NEW.grp OR OLD.stage IS NOT NEW.stage) BEGIN
    INSERT INTO counts (run_id, stage, grp, state, n)
    VALUES (OLD.run_id, OLD.stage, OLD.grp, OLD.state, -1), (NEW.run_id, NEW.stage, NEW.grp, NEW.state, 1)
    ON CONFLICT (run_id, stage, grp, state) DO UPDATE SET n = n + excluded.n;
    INSERT INTO events (run_id, item_id, batch_id, at, from_state, to_state, kind, message, items, stage, to_stage)
    SELECT NEW.run_id, NEW.id, coalesce(NEW.batch_id, OLD.batch_id), NEW.updated_at, OLD.state, NEW.state,
           NEW.error_kind, NEW.error, 1, OLD.stage, CASE WHEN OLD.stage IS NOT NEW.stage THEN NEW.stage END
    WHERE OLD.state IS NOT NEW.state OR OLD.stage IS NOT NEW.stage;
END
"""
BATCH_PATH = "NEW.state != 'queued' AND NEW.state != 'running' AND NEW.state != 'received'"
RUN_STAGE = ("(SELECT coalesce(json_extract(runs.job, '$.provider.kind'), 'openai-chat') FROM runs "
             "WHERE runs.id = {}.run_id)")
STAGES = [
    "DROP TRIGGER items_count_insert",
    "DROP TRIGGER items_change",
    "DROP TRIGGER events_count_batch",
    "DROP TRIGGER items_count_delete",
    "ALTER TABLE items ADD COLUMN stage TEXT NOT NULL DEFAULT ''",
    f"UPDATE items SET stage = {RUN_STAGE.format('items')}",
    "ALTER TABLE batches ADD COLUMN stage TEXT NOT NULL DEFAULT ''",
    f"UPDATE batches SET stage = {RUN_STAGE.format('batches')}",
    "ALTER TABLE events ADD COLUMN stage TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE events ADD COLUMN to_stage TEXT",
    f"UPDATE events SET stage = {RUN_STAGE.format('events')}",
    """
    CREATE TABLE results (
        item_id INTEGER NOT NULL REFERENCES items(id),
        stage TEXT NOT NULL,
        result TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        at REAL NOT NULL,
        PRIMARY KEY (item_id, stage)
    ) WITHOUT ROWID
    """,
    """
    CREATE TABLE stage_counts (
        run_id INTEGER NOT NULL,
        stage TEXT NOT NULL,
        grp TEXT NOT NULL,
        state TEXT NOT NULL,
        n INTEGER NOT NULL,
        PRIMARY KEY (run_id, stage, grp, state)
    ) WITHOUT ROWID
    """,
    "INSERT INTO stage_counts (run_id, stage, grp, state, n) "
    f"SELECT run_id, {RUN_STAGE.format('counts')}, grp, state, n FROM counts",
    "DROP TABLE counts",
    "ALTER TABLE stage_counts RENAME TO counts",
    "DROP INDEX items_to_claim",
    "CREATE INDEX items_to_claim ON items (run_id, state, stage, grp, seq)",
    """
    CREATE TRIGGER items_count_insert AFTER INSERT ON items BEGIN
        INSERT INTO counts (run_id, stage, grp, state, n) VALUES (NEW.run_id, NEW.stage, NEW.grp, NEW.state, 1)
        ON CONFLICT (run_id, stage, grp, state) DO UPDATE SET n = n + 1;
    END
    """,
    ITEMS_CHANGE.format(moves=f"{BATCH_PATH} AND NEW.state != 'completed'"),
    """
    CREATE TRIGGER events_count_batch AFTER INSERT ON events
    WHEN NEW.item_id IS NULL AND NEW.batch_id IS NOT NULL BEGIN
        UPDATE counts SET n = n - NEW.items
        WHERE run_id = NEW.run_id AND stage = (SELECT stage FROM batches WHERE id = NEW.batch_id)
        AND grp = (SELECT grp FROM batches WHERE id = NEW.batch_id) AND state = NEW.from_state;
        INSERT INTO counts (run_id, stage, grp, state, n)
        SELECT NEW.run_id, stage, grp, NEW.to_state, NEW.items FROM batches WHERE id = NEW.batch_id
        ON CONFLICT (run_id, stage, grp, state) DO UPDATE SET n = n + excluded.n;
    END
    """,
    """
    CREATE TRIGGER items_count_delete AFTER DELETE ON items BEGIN
        UPDATE counts SET n = n - 1
        WHERE run_id = OLD.run_id AND stage = OLD.stage AND grp = OLD.grp AND state = OLD.state;
    END
    """,
]

# Version 13: a person's decisions at a ``decide`` stage (issue 17). An item waiting there has the hold
# 'decide' (state ``waiting``, no ``not_before``: no time makes it due); a partial index finds them, so that
# the decisions waiting are counted and listed without a scan of a run's items. ``decisions`` keeps a decision
# sent before its item reached the stage (one per item and stage, the last given), until the engine applies
# it once the item waits there. An approval at the last stage completes an item outside any batch: the change
# trigger now counts and logs that move per item too (``OLD.hold = 'decide'``: no batch makes it).
DECISIONS = [
    "CREATE INDEX items_deciding ON items (run_id, stage, seq) WHERE hold = 'decide'",
    """
    CREATE TABLE decisions (
        item_id INTEGER NOT NULL REFERENCES items(id),
        stage TEXT NOT NULL,
        run_id INTEGER NOT NULL REFERENCES runs(id),
        approve INTEGER NOT NULL,
        data TEXT,
        at REAL NOT NULL,
        PRIMARY KEY (item_id, stage)
    ) WITHOUT ROWID
    """,
    "DROP TRIGGER items_change",
    ITEMS_CHANGE.format(moves=f"{BATCH_PATH} AND (NEW.state != 'completed' OR OLD.hold = 'decide')"),
]

# Version 14: fan-out and join (issue 17, seed 001's WeKnora count). A sub-item is an item with its parent's
# id (``parent_id``); a parent waiting at its join keeps how many of its sub-items have not settled
# (``sub_items_left``), a column counted down (or up, when a person retries a settled sub-item) by a trigger in
# the transaction of each sub-item's move into or out of ``completed`` or ``failed``: never recounted, and no
# path can settle a sub-item without it. A parent joined from ``waiting`` straight to ``completed`` (a join
# that is the last stage) completes outside any batch, as an approval at the last stage does, and as an item
# left at a stage gone does (``finish``): the change trigger now counts and logs every move into ``completed``
# but the batch path's (which keeps its ``batch_id``, its batch's event counting it), so that each move is
# counted in one place whatever hold it leaves.
FAN_OUT = [
    "ALTER TABLE items ADD COLUMN parent_id INTEGER REFERENCES items(id)",
    "ALTER TABLE items ADD COLUMN sub_items_left INTEGER",
    "CREATE INDEX items_by_parent ON items (parent_id) WHERE parent_id IS NOT NULL",
    "CREATE INDEX items_joining ON items (run_id) WHERE hold = 'join'",
    """
    CREATE TRIGGER sub_item_settles AFTER UPDATE OF state ON items
    WHEN NEW.parent_id IS NOT NULL
    AND (NEW.state = 'completed' OR NEW.state = 'failed') != (OLD.state = 'completed' OR OLD.state = 'failed') BEGIN
        UPDATE items SET sub_items_left = sub_items_left
            + CASE WHEN NEW.state = 'completed' OR NEW.state = 'failed' THEN -1 ELSE 1 END
        WHERE id = NEW.parent_id;
    END
    """,
    "DROP TRIGGER items_change",
    ITEMS_CHANGE.format(moves=f"{BATCH_PATH} AND (NEW.state != 'completed' OR NEW.batch_id IS NULL)"),
]
