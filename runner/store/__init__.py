"""The run store: every item's state, in one SQLite file, its schema, its one writer of items, and the read model.

- ``protocol``: ``RunStore``, the verbs the engine and a person's commands
  use, whatever the backend (imported from there: a light command need not
  define it).
- ``sqlite``: ``Store``, the store's verbs (with ``commands`` and ``leases``),
  each one transaction that decides nothing; ``base``: the database they stand on,
  through the seam of ``database`` (``Database``, ``Conn``); ``connection``: a SQLite file.
- ``items``: the one writer of item state, by ``runner.model.MOVES``.
- ``additions``: ``add_items``, a run's items added in chunks.
- ``schema``: the tables and triggers; ``migrations``: every schema version's change since the first.
- ``views``: the one read model that the CLI, the TUI and the panel render (with ``answers``, ``live``,
  ``lists`` and ``event_log``).
"""

from __future__ import annotations

from ..model import Batch, Settlement, StartedItem
from .sqlite import Store

__all__ = ["Batch", "Settlement", "StartedItem", "Store"]
