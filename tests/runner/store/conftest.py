"""The store's contract suite runs on every backend: the ``store`` fixture is one store of each."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from portable import refused_idioms
from scenes import (
    counts_kept, counts_of_items, paid_kept, paid_of_items, passes_kept, passes_of_results, states_of_items,
    states_told_by_events,
)

from runner.store import Store

#: The backends the contract suite runs on, each opened on a fresh store.
BACKENDS = {"sqlite": lambda folder: Store(folder / "runs.db")}


@pytest.fixture(params=sorted(BACKENDS))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    with BACKENDS[request.param](tmp_path) as opened:
        executed: list[str] = []
        opened.database.conn.set_trace_callback(executed.append)
        yield opened
        opened.database.conn.set_trace_callback(None)
        assert {sql: refused_idioms(sql) for sql in executed if refused_idioms(sql)} == {}
        assert states_told_by_events(opened) == states_of_items(opened)
        assert counts_kept(opened) == counts_of_items(opened)
        assert passes_kept(opened) == passes_of_results(opened)
        assert paid_kept(opened) == paid_of_items(opened)
