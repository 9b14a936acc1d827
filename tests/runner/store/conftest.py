"""The store's contract suite runs on every backend: the ``store`` fixture is one store of each (``backends``),
whose invariants hold after each test on either backend."""

from backends import store as store
