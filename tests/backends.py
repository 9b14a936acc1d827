"""The backends a test's store may be (issue 20): a SQLite file in the test's folder, or a PostgreSQL schema of its
own on the test server (``postgres_server``); and the invariants every store keeps whatever a test did to it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest
from portable import refused_idioms
from postgres_server import fresh_schema
from scenes import (
    charges_kept, charges_of_items, counts_kept, counts_of_items, location_of, paid_kept, paid_of_items, passes_kept,
    passes_of_results, states_of_items, states_told_by_events,
)

from runner.store import Store


@contextmanager
def sqlite_store(request: pytest.FixtureRequest, folder: Path) -> Iterator[Store]:
    with Store(folder / "runs.db") as opened:
        yield opened


@contextmanager
def portable_statements(store: Store) -> Iterator[None]:
    """On SQLite, whose trace tells every statement the store ran on the fixture's connection: no statement used an
    idiom PostgreSQL refuses (PostgreSQL itself refuses them). The store suite checks it: the trace keeps every
    statement with its values, too costly for the behaviour suite's runs of thousands of items."""
    if store.dialect != "sqlite":
        yield
        return
    executed: list[str] = []
    store.database.conn.set_trace_callback(executed.append)
    yield
    store.database.conn.set_trace_callback(None)
    assert {sql: refused_idioms(sql) for sql in executed if refused_idioms(sql)} == {}


@contextmanager
def postgres_store(request: pytest.FixtureRequest, folder: Path) -> Iterator[Store]:
    with fresh_schema(request.getfixturevalue("pg_server")) as location, Store(location) as opened:
        yield opened


#: The backends a ``store`` fixture runs on, each opened on a fresh store.
BACKENDS: dict[str, Callable[[pytest.FixtureRequest, Path], AbstractContextManager[Store]]] = {
    "sqlite": sqlite_store, "postgres": postgres_store,
}

#: A test of what only a SQLite file shows (its disk failing, its bytes): its ``store`` is a SQLite file alone.
sqlite_only = pytest.mark.parametrize("store", ["sqlite"], indirect=True)


@contextmanager
def store_on(
    backend: str, request: pytest.FixtureRequest, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Store]:
    """A fresh store on ``backend`` whose invariants are checked once the test is done with it: the events account
    for every item's state, and the counts, passes, paid totals and ledger's charges agree with the items. The
    ``runner`` processes the test starts in ``folder`` use it too: a SQLite store is that folder's ``runs.db``, the
    default; a PostgreSQL one is given them as ``RUNNER_DB``, as to a user's workers on several machines."""
    with BACKENDS[backend](request, folder) as opened:
        if opened.dialect != "sqlite":
            monkeypatch.setenv("RUNNER_DB", location_of(opened))
        yield opened
        assert states_told_by_events(opened) == states_of_items(opened)
        assert counts_kept(opened) == counts_of_items(opened)
        assert passes_kept(opened) == passes_of_results(opened)
        assert paid_kept(opened) == paid_of_items(opened)
        assert charges_kept(opened) == charges_of_items(opened)


@pytest.fixture(params=sorted(BACKENDS))
def store(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    """A store of each backend: a ``conftest`` that imports it runs its folder's tests on both."""
    with store_on(request.param, request, tmp_path, monkeypatch) as opened:
        yield opened
