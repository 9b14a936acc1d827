"""Schema version 18 (issue 19): an item's priority and its scheduled time, each read by the claim through an index.

- ``items.priority`` (higher first, default 0: every older item keeps its
  place) is read from the field ``[batch] priority_field`` names, and raised
  by a person (``runner prioritize``). The claim index gets it after the stage,
  descending: the claim reads the highest-priority items of a stage first, in
  the index's order, so forming a batch stays one short index read at a
  million items (one index still, as every state change writes each index of
  ``items``).
- A scheduled item is ``waiting`` with the hold ``'scheduled'`` and its time
  in ``not_before``; a partial index on exactly that serves the claim's
  release of the items whose time came (a range read on the time, however
  many wait for later), their count and the next time, for every view.
- The claim's first read, the due waits of a retry's back-off (``waiting``,
  hold ``'none'``), gets a partial index of those alone: the scheduled items
  are ``waiting`` too, and a read of the claim index would pass over every
  one of them (a tenth of 100,000 items scheduled made a claim 15 times
  slower: ``bench/claim.py``).
"""

from __future__ import annotations

PRIORITIES_AND_SCHEDULES = [
    "ALTER TABLE items ADD COLUMN priority INTEGER NOT NULL DEFAULT 0",
    "DROP INDEX items_to_claim",
    "CREATE INDEX items_to_claim ON items (run_id, state, stage, priority DESC, grp, seq)",
    "CREATE INDEX items_scheduled ON items (run_id, not_before) WHERE hold = 'scheduled'",
    "CREATE INDEX items_backing_off ON items (run_id, stage, priority DESC, grp, seq) "
    "WHERE state = 'waiting' AND hold = 'none'",
]
