"""The items of a run waiting for their scheduled time, as a person sees them (the TUI's scheduled screen).

Read on the partial index of scheduled items (:mod:`runner.store.migrations_queue`),
in its order, the earliest first, and with a LIMIT: cheap twice a second on a run
of a million items. :mod:`runner.store.views` re-exports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .answers import ScheduledItem, ScheduledView
from .live import scheduled

if TYPE_CHECKING:
    from .sqlite import Store

#: Scheduled items a screen lists (the count says how many in all).
SCHEDULED_ROWS = 200

#: The first scheduled items of run ``?``, the earliest first, at most ``?``.
FIRST_SCHEDULED = ('SELECT key, grp AS "group", not_before AS at FROM items '
                   "WHERE run_id = ? AND hold = 'scheduled' ORDER BY not_before LIMIT ?")


def scheduled_view(store: Store, name: str, *, now: float, limit: int = SCHEDULED_ROWS) -> ScheduledView:
    """How many items of the run wait for their scheduled time, and the first ``limit``, the earliest first."""
    run_id = store.run_id(name)
    items = tuple(ScheduledItem(row["key"], row["group"], row["at"]) for row in store.rows(FIRST_SCHEDULED, [run_id, limit]))
    return ScheduledView(name, scheduled(store, run_id)[0], items, now)
