"""The store's migrations for money (issue 18): the ledger (version 16) and when results expire (17), with their reasons.

Listed in :data:`runner.store.migrations.UPGRADES`.
"""

from __future__ import annotations

# Version 16: the ledger (issue 18). A batch keeps the usage its calls reported (``batches.usage``, JSON, saved
# with its answer); each item its share of the tokens (input split by the items' input sizes, output by their
# results' sizes) and of the cost (``cost`` NULL: a billed call of unknown cost, no usage or no price), and its
# calls the upstream refused before running anything (``not_billed``), beside ``paid_calls`` (billed) and
# ``maybe_paid`` (unknown). ``ledger`` keeps the run's totals per stage, moved by the statements that move an
# item's, in the same transaction (status stays O(stages) at a million items), as ``runs.paid_calls`` does;
# ``unknown_chars`` is the input sent by the unknown charges, so that they are counted at their estimate;
# ``tokened`` the billed item-calls whose usage is known (the average output per item), ``uncosted`` those
# whose cost is not. An older store's paid and maybe-paid calls are carried as billed and unknown charges of
# unknown tokens, at the stage each item is at now.
LEDGER = [
    "ALTER TABLE batches ADD COLUMN usage TEXT",
    "ALTER TABLE items ADD COLUMN not_billed INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE items ADD COLUMN tokens_in INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE items ADD COLUMN tokens_out INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE items ADD COLUMN cost REAL DEFAULT 0",
    """
    CREATE TABLE ledger (
        run_id INTEGER NOT NULL,
        stage TEXT NOT NULL,
        billed INTEGER NOT NULL DEFAULT 0,
        not_billed INTEGER NOT NULL DEFAULT 0,
        unknown INTEGER NOT NULL DEFAULT 0,
        unknown_chars INTEGER NOT NULL DEFAULT 0,
        input_tokens INTEGER NOT NULL DEFAULT 0,
        cached_tokens INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0,
        reasoning_tokens INTEGER NOT NULL DEFAULT 0,
        tokened INTEGER NOT NULL DEFAULT 0,
        cost REAL NOT NULL DEFAULT 0,
        uncosted INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (run_id, stage)
    ) WITHOUT ROWID
    """,
    "INSERT INTO ledger (run_id, stage, billed, unknown, unknown_chars, uncosted) "
    "SELECT run_id, stage, sum(paid_calls), sum(maybe_paid), sum(maybe_paid * chars), sum(paid_calls) FROM items "
    "GROUP BY run_id, stage HAVING sum(paid_calls) + sum(maybe_paid) > 0",
    "UPDATE items SET cost = NULL WHERE paid_calls > 0",
]

# Version 17: when a saved task's results expire upstream (issue 18), as its provider said at its create
# (Unix seconds; NULL: not known), so that ``runner status`` warns about results not fetched that the
# upstream will soon drop (:mod:`runner.store.expiry`).
RESULTS_EXPIRE = ["ALTER TABLE batches ADD COLUMN results_expire REAL"]
