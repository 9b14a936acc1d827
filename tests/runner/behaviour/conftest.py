"""The behaviour suite runs on every backend where it uses a ``store``: the fixture is one store of each
(``backends``), whose invariants hold after each test on either backend. The ``runner`` processes such a test
starts use that store too (``RUNNER_DB``), as a user's on several machines would; a test of what only a SQLite
file shows is marked ``backends.sqlite_only``."""

from backends import store as store
