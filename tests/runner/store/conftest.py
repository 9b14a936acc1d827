"""The store's contract suite runs on every backend: the ``store`` fixture is one store of each (``backends``),
whose invariants hold after each test on either backend; on SQLite, no statement it ran used an idiom PostgreSQL
refuses."""

from collections.abc import Iterator

import pytest
from backends import portable_statements
from backends import store as store

from runner.store import Store


@pytest.fixture(autouse=True)
def portable(request: pytest.FixtureRequest) -> Iterator[None]:
    if "store" not in request.fixturenames:
        yield
        return
    opened: Store = request.getfixturevalue("store")
    with portable_statements(opened):
        yield
