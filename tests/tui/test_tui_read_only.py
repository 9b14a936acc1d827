"""The TUI over a store it cannot write: it shows it all, and a command it cannot write is one notification."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from scenes import write_lock_held
from tui_support import NOW, RUNS, Told, build, settle, shown_runs
from unwritable import Folder

from tui.app import RunnerApp
from tui.screens.run import RunScreen


async def test_the_tui_opens_and_reads_a_store_while_another_process_holds_its_write_lock(tmp_path: Path) -> None:
    db = build(tmp_path)
    with write_lock_held(db):
        app = RunnerApp(db, clock=lambda: NOW)
        async with app.run_test() as pilot:
            await settle(pilot)
            assert shown_runs(app) == RUNS


@pytest.mark.parametrize("made", ["read_only", "fill"])
async def test_the_tui_shows_a_store_it_cannot_write_and_a_pause_it_cannot_write_is_one_notification(
    unwritable: Folder, made: str, tmp_path: Path
) -> None:
    (tmp_path / "built").mkdir()
    db = Path(shutil.copy(build(tmp_path / "built"), unwritable.path / "runs.db"))  # its making outgrows the small disk
    getattr(unwritable, made)()
    told = Told()
    app = RunnerApp(db, "posts", clock=lambda: NOW)
    async with app.run_test(message_hook=told) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunScreen) and screen.view is not None
        assert (screen.view.standing.total, screen.view.standing.control.paused) == (36, False)
        await pilot.press("p")
        await settle(pilot, read=True)
        assert app.is_running and app.screen is screen and not screen.view.standing.control.paused
    (told_once,) = told.messages
    assert told_once.startswith(f"{db} cannot be written here (") and told_once.endswith("); nothing was written")
