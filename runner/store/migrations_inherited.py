"""The schema version after reuse's (issue 17's review): a sub-item's inherited results pass no stage.

A sub-item starts with a copy of its parent's results (the fan-out stage's
without its list, :mod:`runner.store.fanout`), and the ``result_saved``
trigger of version 15 counted each copy as a pass: 20 posts split into 2
chunks each read ``split passed 60``, and every stage before the fan-out
the same. A stage's ``passed`` is the items that passed it: the parent
once, a sub-item only at the stages inside its fan-out. ``results.inherited``
(and ``archived_results.inherited``: an archive table keeps its table's
columns) marks a row copied from the parent, 1, never counted: the triggers
count and uncount only a stage's own results, whatever order a removal
deletes rows in. Older stores' copies are found as a sub-item's rows of a
stage its parent has a result of (a parent never has one of the stages
inside its fan-out), and ``passes.passed`` is counted again from the rows
left, live and archived, once.
"""

from __future__ import annotations

#: A sub-item's rows of ``{results}`` that its parent (in ``{items}``) has a row of the same stage of: copies.
COPIES = """
UPDATE {results} SET inherited = 1
WHERE item_id IN (SELECT id FROM {items} WHERE parent_id IS NOT NULL) AND EXISTS (
    SELECT 1 FROM {items} AS sub JOIN {results} AS theirs ON theirs.item_id = sub.parent_id
    WHERE sub.id = {results}.item_id AND theirs.stage = {results}.stage)
"""

#: Each run's and stage's own results, live and archived.
OWN_RESULTS = """
SELECT run_id, stage, count(*) FROM (
    SELECT items.run_id, results.stage FROM results JOIN items ON items.id = results.item_id
    WHERE NOT results.inherited
    UNION ALL
    SELECT items.run_id, results.stage FROM archived_results AS results
    JOIN archived_items AS items ON items.id = results.item_id WHERE NOT results.inherited
) WHERE true GROUP BY run_id, stage
"""

INHERITED_RESULTS = [
    "ALTER TABLE results ADD COLUMN inherited INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE archived_results ADD COLUMN inherited INTEGER NOT NULL DEFAULT 0",
    COPIES.format(results="results", items="items"),
    COPIES.format(results="archived_results", items="archived_items"),
    "DROP TRIGGER result_saved",
    """
    CREATE TRIGGER result_saved AFTER INSERT ON results WHEN NOT NEW.inherited BEGIN
        INSERT INTO passes (run_id, stage, passed) SELECT run_id, NEW.stage, 1 FROM items WHERE id = NEW.item_id
        ON CONFLICT (run_id, stage) DO UPDATE SET passed = passed + 1;
    END
    """,
    "DROP TRIGGER result_forgotten",
    """
    CREATE TRIGGER result_forgotten AFTER DELETE ON results WHEN NOT OLD.inherited BEGIN
        UPDATE passes SET passed = passed - 1
        WHERE run_id = (SELECT run_id FROM items WHERE id = OLD.item_id) AND stage = OLD.stage;
    END
    """,
    "UPDATE passes SET passed = 0",
    f"INSERT INTO passes (run_id, stage, passed) {OWN_RESULTS} "
    "ON CONFLICT (run_id, stage) DO UPDATE SET passed = excluded.passed",
]
