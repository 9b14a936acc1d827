"""The store's migration for reused work (issue 19's unique work across runs), listed in ``UPGRADES``.

- ``items.work`` and ``results.work``: what a validated result answers, the
  hash of its stage's fingerprint and the item as that stage sends it
  (``runner.reusing``), written with the result in the same statement: a job of
  one stage's on its completed item (its output is its result), a pipeline's on
  its row of ``results``. A move that sets or clears an item's output clears its
  work, so a work never names an output it did not make.
- Two partial indexes find a result by its work, in any run of the store, with
  one index read per item a claim looks up (``[cache] reuse``): the completed
  items that have one, the results that have one. Results saved before this
  version have none: they are never reused.
- ``items.reused`` counts the results an item took from the same work with no
  call (not billed), and ``ledger.reused`` the run's per stage, moved in the
  transaction of the item's.
"""

from __future__ import annotations

REUSE = [
    "ALTER TABLE items ADD COLUMN work TEXT",
    "ALTER TABLE items ADD COLUMN reused INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE results ADD COLUMN work TEXT",
    # the archive's tables (schema 20) keep the columns of their tables: an archived item comes back whole
    "ALTER TABLE archived_items ADD COLUMN work TEXT",
    "ALTER TABLE archived_items ADD COLUMN reused INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE archived_results ADD COLUMN work TEXT",
    "ALTER TABLE ledger ADD COLUMN reused INTEGER NOT NULL DEFAULT 0",
    "CREATE INDEX items_by_work ON items (work) WHERE state = 'completed' AND work IS NOT NULL",
    "CREATE INDEX results_by_work ON results (work) WHERE work IS NOT NULL",
]
