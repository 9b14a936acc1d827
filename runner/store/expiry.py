"""Remote results that expire: the saved tasks whose results were not fetched and the upstream will soon drop.

An upstream keeps a finished task's results for a while only (an OpenAI
Batch output file, 30 days by default; Anthropic's message batch results,
29 days after its creation). The engine reads them as soon as the task ends
(its poll fetches them in the same call); a task whose engine stopped before
then keeps its id in the store, with when its results expire as the provider
said at its create (``batches.results_expire``, schema v15). ``runner status``
warns about each whose results were not fetched and expire within
:data:`WARN_SECONDS` (or did already).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from .base import StoreBase

#: Warn about results that expire within a day.
WARN_SECONDS = 24 * 3600

#: A run's batches with a saved task not settled, whose results expire before ``?2`` (oldest expiry first).
EXPIRING = """
SELECT id, upstream_id, stage, grp, size, results_expire FROM batches
WHERE run_id = ?1 AND state != 'done' AND upstream_id IS NOT NULL AND results_expire IS NOT NULL
AND results_expire <= ?2 ORDER BY results_expire, id
"""


class Expiring(NamedTuple):
    """A saved task whose results were not fetched and expire soon: its batch, task id, stage, group, items, and
    when its results expire (Unix seconds; in the past: they may be gone)."""

    batch: int
    task: str
    stage: str
    group: str
    items: int
    expires_at: float

    def json(self) -> dict[str, object]:
        return self._asdict()


def expiring(store: StoreBase, run_id: int, *, now: float) -> tuple[Expiring, ...]:
    """The run's saved tasks whose results were not fetched and expire within :data:`WARN_SECONDS` of ``now``."""
    return tuple(Expiring(row["id"], row["upstream_id"], row["stage"], row["grp"], row["size"], row["results_expire"])
                 for row in store.rows(EXPIRING, [run_id, now + WARN_SECONDS]))
