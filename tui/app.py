"""The runner TUI: a view over one run store, and a person's hand on its runs.

It reads the same SQLite store the engine writes, whether that engine runs in
another terminal, a notebook kernel, or nowhere; it writes only commands,
through ``runner.control`` and ``runner.recovery``. The rules stay in the
engine.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from textual.app import App
from textual.binding import BindingType

from runner.location import located

from .commands import KeyCommands
from .connection import StoreThread
from .screens.run import RunScreen
from .screens.runs import RunsScreen


class RunnerApp(App[None]):
    """Runs, one run, failures and confirmations over the store at ``db``; ``run`` opens that run first.

    ``clock`` gives the time (seconds since the epoch) for ages, throughput
    and the engine's liveness; tests fix it.
    """

    CSS_PATH = "app.tcss"
    TITLE = "runner"
    COMMANDS = App.COMMANDS | {KeyCommands}
    BINDINGS: ClassVar[list[BindingType]] = [("q", "quit", "Quit")]

    def __init__(self, db: str | Path, run: str | None = None, *, clock: Callable[[], float] = time.time) -> None:
        super().__init__()
        self.db = located(db)
        self.first_run = run
        self.clock = clock
        self.connection = StoreThread(self.db)

    def on_mount(self) -> None:
        self.push_screen(RunsScreen())
        if self.first_run is not None:
            self.open_run(self.first_run)

    def on_unmount(self) -> None:
        self.connection.close()

    def open_run(self, name: str) -> None:
        self.push_screen(RunScreen(name))

    def show_runs(self) -> None:
        """Back to the runs screen, from wherever a run was opened."""
        while not isinstance(self.screen, RunsScreen):
            self.pop_screen()


def run_tui(db: str, run: str | None = None) -> None:
    """Open the TUI on the run store ``db``, on the run ``run`` if given (else the list of runs)."""
    RunnerApp(db, run).run()
