"""Shared fixtures: a simulator on loopback, a run store in a temp folder, a step clock."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support import StepClock

from runner.sim import Simulator
from runner.store import Store


@pytest.fixture
def sim() -> Iterator[Simulator]:
    with Simulator().start() as simulator:
        yield simulator


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "runs.db") as opened:
        yield opened


@pytest.fixture
def clock() -> StepClock:
    return StepClock()
