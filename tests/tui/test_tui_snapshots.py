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
from tui_support import NOW, build, press

from tui.app import RunnerApp
from tui.widgets import EventLog

#: The smallest terminal a person uses, and a roomy one.
SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((140, 45), id="140x45")]
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
        await press(pilot, *keys)

    return run_before


@pytest.mark.parametrize("size", SIZES)
def test_runs_screen(app: Callable[[str | None], RunnerApp], snap_compare: Compare, size: tuple[int, int]) -> None:
    """Every run, each saying how its engine works or ended: running, stopped, engine died, paused and needing a person
    (each saying it has no engine), done."""
    assert snap_compare(app(None), terminal_size=size, run_before=after())


@pytest.mark.parametrize("size", SIZES)
def test_run_screen(app: Callable[[str | None], RunnerApp], snap_compare: Compare, size: tuple[int, int]) -> None:
    """A run mid-way whose engine died: bar and legend, pace, breaker probing, groups, batches, events with commands."""
    assert snap_compare(app("posts"), terminal_size=size, run_before=after())


def test_events_wrap_their_detail_at_80x24(app: Callable[[str | None], RunnerApp], snap_compare: Compare) -> None:
    """The run screen scrolled down to its events; a long detail (a person's command, an error) wraps, whole words.

    (At 140x45 the events show whole on the run screen's own snapshot.)
    """

    async def run_before(pilot: Pilot[Any]) -> None:
        await press(pilot)
        pilot.app.screen.scroll_end(animate=False, immediate=True)
        pilot.app.screen.query_one(EventLog).scroll_to(y=3, animate=False, immediate=True)
        await pilot.pause()

    assert snap_compare(app("posts"), terminal_size=(80, 24), run_before=run_before)


def test_finished_run_of_twelve_months(app: Callable[[str | None], RunnerApp], snap_compare: Compare) -> None:
    """A run done over twelve months, as the demo's: how many items in how long, every month in sight."""
    assert snap_compare(app("months"), terminal_size=(140, 45), run_before=after())


@pytest.mark.parametrize("size", SIZES)
def test_failures_screen(app: Callable[[str | None], RunnerApp], snap_compare: Compare, size: tuple[int, int]) -> None:
    """Failed items by kind, and the items of the first kind, the cursor on them."""
    assert snap_compare(app("posts"), terminal_size=size, run_before=after("f"))


@pytest.mark.parametrize("size", SIZES)
def test_item_screen(app: Callable[[str | None], RunnerApp], snap_compare: Compare, size: tuple[int, int]) -> None:
    """A failed item in full: its error, input, output and history, the history's detail wrapped."""
    assert snap_compare(app("posts"), terminal_size=size, run_before=after("f", "enter"))


def test_confirmation_dialog(app: Callable[[str | None], RunnerApp], snap_compare: Compare) -> None:
    """Confirming all held items asks once more, with what each case does and the double-charge warning."""
    assert snap_compare(app("tickets"), terminal_size=(80, 24), run_before=after("c", "c"))
