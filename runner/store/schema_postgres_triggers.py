"""The store's triggers on PostgreSQL: SQLite's, each a plpgsql function and a trigger that runs it.

They keep what the SQLite triggers of the baseline (schema 23) keep, the
same way: the counts per run, stage, group and state (an item's change, a
batch's move told by its event, an item added or removed), each item's
change as an event, the passes and skips per stage, and how many sub-items
a parent waits for. A condition that reads another row (``stage_skipped``)
is tested in the function: PostgreSQL's ``WHEN`` reads only the row.
"""

from __future__ import annotations

#: Each trigger: its name, when it runs, the condition on the row (or none) and its function's body.
_TRIGGERS = [
    ("items_change", "AFTER UPDATE OF state, grp, stage ON items",
     "NEW.state <> 'queued' AND NEW.state <> 'running' AND NEW.state <> 'received' "
     "AND (NEW.state <> 'completed' OR NEW.batch_id IS NULL) AND (OLD.state IS DISTINCT FROM NEW.state "
     "OR OLD.grp IS DISTINCT FROM NEW.grp OR OLD.stage IS DISTINCT FROM NEW.stage)",
     """
        INSERT INTO counts (run_id, stage, grp, state, n)
        VALUES (OLD.run_id, OLD.stage, OLD.grp, OLD.state, -1), (NEW.run_id, NEW.stage, NEW.grp, NEW.state, 1)
        ON CONFLICT (run_id, stage, grp, state) DO UPDATE SET n = counts.n + excluded.n;
        IF OLD.state IS DISTINCT FROM NEW.state OR OLD.stage IS DISTINCT FROM NEW.stage THEN
            INSERT INTO events (run_id, item_id, batch_id, at, from_state, to_state, kind, message, items, stage,
                                to_stage)
            VALUES (NEW.run_id, NEW.id, coalesce(NEW.batch_id, OLD.batch_id), NEW.updated_at, OLD.state, NEW.state,
                    NEW.error_kind, NEW.error, 1, OLD.stage,
                    CASE WHEN OLD.stage IS DISTINCT FROM NEW.stage THEN NEW.stage END);
        END IF;
     """),
    ("items_count_insert", "AFTER INSERT ON items", "",
     """
        INSERT INTO counts (run_id, stage, grp, state, n) VALUES (NEW.run_id, NEW.stage, NEW.grp, NEW.state, 1)
        ON CONFLICT (run_id, stage, grp, state) DO UPDATE SET n = counts.n + 1;
     """),
    ("items_count_delete", "AFTER DELETE ON items", "",
     """
        UPDATE counts SET n = n - 1
        WHERE run_id = OLD.run_id AND stage = OLD.stage AND grp = OLD.grp AND state = OLD.state;
     """),
    ("events_count_batch", "AFTER INSERT ON events", "NEW.item_id IS NULL AND NEW.batch_id IS NOT NULL",
     """
        UPDATE counts SET n = n - NEW.items
        WHERE run_id = NEW.run_id AND stage = (SELECT stage FROM batches WHERE id = NEW.batch_id)
        AND grp = (SELECT grp FROM batches WHERE id = NEW.batch_id) AND state = NEW.from_state;
        INSERT INTO counts (run_id, stage, grp, state, n)
        SELECT NEW.run_id, stage, grp, NEW.to_state, NEW.items FROM batches WHERE id = NEW.batch_id
        ON CONFLICT (run_id, stage, grp, state) DO UPDATE SET n = counts.n + excluded.n;
     """),
    ("result_saved", "AFTER INSERT ON results", "NEW.inherited = 0",
     """
        INSERT INTO passes (run_id, stage, passed) SELECT run_id, NEW.stage, 1 FROM items WHERE id = NEW.item_id
        ON CONFLICT (run_id, stage) DO UPDATE SET passed = passes.passed + 1;
     """),
    ("result_forgotten", "AFTER DELETE ON results", "OLD.inherited = 0",
     """
        UPDATE passes SET passed = passed - 1
        WHERE run_id = (SELECT run_id FROM items WHERE id = OLD.item_id) AND stage = OLD.stage;
     """),
    ("stage_skipped", "AFTER INSERT ON events", "NEW.kind = 'skipped'",
     """
        IF NOT EXISTS (SELECT 1 FROM events WHERE item_id = NEW.item_id AND kind = 'skipped' AND stage = NEW.stage
                       AND id <> NEW.id) THEN
            INSERT INTO passes (run_id, stage, skipped) VALUES (NEW.run_id, NEW.stage, 1)
            ON CONFLICT (run_id, stage) DO UPDATE SET skipped = passes.skipped + 1;
        END IF;
     """),
    ("sub_item_settles", "AFTER UPDATE OF state ON items",
     "NEW.parent_id IS NOT NULL AND (NEW.state IN ('completed', 'failed')) <> (OLD.state IN ('completed', 'failed'))",
     """
        UPDATE items SET sub_items_left = sub_items_left
            + CASE WHEN NEW.state IN ('completed', 'failed') THEN -1 ELSE 1 END
        WHERE id = NEW.parent_id;
     """),
]

#: The functions, then the triggers.
TRIGGERS = [
    f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN {body} RETURN NULL; END $$"
    for name, _, _, body in _TRIGGERS
] + [
    f"CREATE TRIGGER {name} {event} FOR EACH ROW {f'WHEN ({condition}) ' if condition else ''}"
    f"EXECUTE FUNCTION {name}()"
    for name, event, condition, _ in _TRIGGERS
]
