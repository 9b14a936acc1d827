"""Schema version 19 (issue 18's budget guard): a person's budget for a run, beside its job's ``[budget]``.

``runs.budget`` holds the budget a person gave with ``runner budget`` (the
TUI's dialog, the panel's field), as JSON ``{"max_cost", "max_tokens"}``;
NULL: the job's ``[budget]`` holds. The engine reads it before every batch
starts, so that a raise from another process lets a run stopped at its
budget go on. A job given again whose ``[budget]`` changed clears it: the
file is a person's newer word (``runner.store.additions``). Older runs have
NULL: their job's budget (none, in jobs saved before it) holds.
"""

from __future__ import annotations

BUDGET = ["ALTER TABLE runs ADD COLUMN budget TEXT"]
