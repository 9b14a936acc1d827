"""Shared fixtures: a simulator on loopback, a run store in a temp folder, a step clock.

Whatever a test did with the ``store``, its events must still account for
every item's state (no code path may change a state without a trace), its
counts must still agree with its items, and each run's totals of paid and
maybe-paid calls with its items' sums, and its ledger's charges (billed, unknown, not billed) too.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from scenes import (
    charges_kept, charges_of_items, counts_kept, counts_of_items, paid_kept, paid_of_items, passes_kept,
    passes_of_results, states_of_items,
    states_told_by_events,
)
from support import StepClock
from unwritable import Folder

from runner.sim import Simulator
from runner.store import Store

import postgres_server


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """The URL of the PostgreSQL server's database for the session (``postgres_server``): never skipped."""
    with postgres_server.server() as url:
        yield url


@pytest.fixture
def sim() -> Iterator[Simulator]:
    with Simulator().start() as simulator:
        yield simulator


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "runs.db") as opened:
        yield opened
        assert states_told_by_events(opened) == states_of_items(opened)
        assert counts_kept(opened) == counts_of_items(opened)
        assert paid_kept(opened) == paid_of_items(opened)
        assert passes_kept(opened) == passes_of_results(opened)
        assert charges_kept(opened) == charges_of_items(opened)


@pytest.fixture
def clock() -> StepClock:
    return StepClock()


@pytest.fixture
def unwritable(tmp_path: Path) -> Iterator[Folder]:
    """A folder the test can make read-only, or fill up, for this very process (root or not).

    Ask for it before any fixture that keeps a store open in it: it is removed after them.
    """
    folder = Folder(tmp_path / "unwritable")
    yield folder
    folder.remove()
