"""The run store: every item's state, in one SQLite file (``sqlite``), its schema and the read model (``views``)."""

from __future__ import annotations

from .sqlite import Batch, Settlement, StartedItem, Store

__all__ = ["Batch", "Settlement", "StartedItem", "Store"]
