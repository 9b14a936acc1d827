"""The store's contract suite runs on every backend: the ``store`` fixture is one store of each.

After each test the invariants hold on either backend (the events account for every item's state, the counts,
passes and paid totals agree with the items). On SQLite, whose trace tells every statement the store ran, no
statement used an idiom PostgreSQL refuses; PostgreSQL itself refuses them, so that check is SQLite's alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest
from portable import refused_idioms
from postgres_server import fresh_schema
from scenes import (
    counts_kept, counts_of_items, paid_kept, paid_of_items, passes_kept, passes_of_results, states_of_items,
    states_told_by_events,
)

from runner.store import Store


@contextmanager
def sqlite_store(request: pytest.FixtureRequest, folder: Path) -> Iterator[Store]:
    with Store(folder / "runs.db") as opened:
        executed: list[str] = []
        opened.database.conn.set_trace_callback(executed.append)
        yield opened
        opened.database.conn.set_trace_callback(None)
        assert {sql: refused_idioms(sql) for sql in executed if refused_idioms(sql)} == {}


@contextmanager
def postgres_store(request: pytest.FixtureRequest, folder: Path) -> Iterator[Store]:
    with fresh_schema(request.getfixturevalue("pg_server")) as location, Store(location) as opened:
        yield opened


#: The backends the contract suite runs on, each opened on a fresh store.
BACKENDS: dict[str, Callable[[pytest.FixtureRequest, Path], AbstractContextManager[Store]]] = {
    "sqlite": sqlite_store, "postgres": postgres_store,
}


@pytest.fixture(params=sorted(BACKENDS))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    with BACKENDS[request.param](request, tmp_path) as opened:
        yield opened
        assert states_told_by_events(opened) == states_of_items(opened)
        assert counts_kept(opened) == counts_of_items(opened)
        assert passes_kept(opened) == passes_of_results(opened)
        assert paid_kept(opened) == paid_of_items(opened)
