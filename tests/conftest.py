"""Shared fixtures: a simulator on loopback, a run store in a temp folder, a step clock.

Whatever a test did with the ``store``, its invariants must still hold (``backends.store_on``): its events
account for every item's state (no code path may change a state without a trace), its counts agree with its
items, and each run's totals of paid and maybe-paid calls with its items' sums, and its ledger's charges too.
The store suite and the behaviour suite have a ``store`` of each backend (their ``conftest``); elsewhere it is
a SQLite file.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from backends import store_on
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


@pytest.fixture(autouse=True)
def no_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test prints as to no terminal (nothing wraps) unless it says a width: pytest-xdist's workers are given
    ``COLUMNS=80``, which tables and captions read, and the tests' ``runner`` processes would inherit."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)


@pytest.fixture
def sim() -> Iterator[Simulator]:
    with Simulator().start() as simulator:
        yield simulator


@pytest.fixture
def store(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    with store_on("sqlite", request, tmp_path, monkeypatch) as opened:
        yield opened


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
