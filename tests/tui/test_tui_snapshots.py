"""Snapshots of the key screens over a store built from fixed data at fixed times, no engine alive.

After a deliberate change of a screen: look at the report, then accept with
``python -m pytest tests/tui --snapshot-update``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from tui_support import NOW, build, settle

from tui.app import RunnerApp

SIZE = (120, 40)
Compare = Callable[..., bool]


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str | None], RunnerApp]:
    """The TUI at ``NOW`` over the fixed store, named as a person in its folder would (``runs.db``)."""
    build(tmp_path)
    monkeypatch.chdir(tmp_path)
    return lambda run: RunnerApp("runs.db", run, clock=lambda: NOW)


def after(*keys: str) -> Callable[[Pilot[Any]], Awaitable[None]]:
    """Read the store, then press each key and let what it opens read the store too."""

    async def run_before(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        for key in keys:
            await pilot.press(key)
            await settle(pilot)

    return run_before


def test_runs_screen(app: Callable[[str | None], RunnerApp], snap_compare: Compare) -> None:
    """Every run: done, engine dead, paused, needing a person."""
    assert snap_compare(app(None), terminal_size=SIZE, run_before=after())


def test_run_screen(app: Callable[[str | None], RunnerApp], snap_compare: Compare) -> None:
    """A run mid-way whose engine died: bar and numbers, throughput, breaker probing, groups, batches, events."""
    assert snap_compare(app("posts"), terminal_size=SIZE, run_before=after())


def test_failures_screen(app: Callable[[str | None], RunnerApp], snap_compare: Compare) -> None:
    """Failed items by kind, and the items of the first kind."""
    assert snap_compare(app("posts"), terminal_size=SIZE, run_before=after("f"))


def test_confirmation_dialog(app: Callable[[str | None], RunnerApp], snap_compare: Compare) -> None:
    """Confirming all held items asks once more, with what each case does and the double-charge warning."""
    assert snap_compare(app("tickets"), terminal_size=SIZE, run_before=after("c", "c"))
