"""The command palette: every key the current screen offers, as a command, and a run's first budget."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import TYPE_CHECKING, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider

if TYPE_CHECKING:
    from .screens.run import RunScreen

#: Keys the palette already offers in its own words.
SKIP = {"command_palette", "quit", "app.quit"}

#: A palette command: its title, its help, and what it runs.
Command = tuple[str, str, Callable[[], object]]


class Commands(Provider):
    """A provider of the commands ``_commands`` gives, found by their title (or, half as well, their help)."""

    def _commands(self) -> Iterator[Command]:
        raise NotImplementedError

    async def discover(self) -> Hits:
        for title, help, run in self._commands():
            yield DiscoveryHit(title, run, help=help)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, help, run in self._commands():
            score = max(matcher.match(title), matcher.match(help) * 0.5)
            if score > 0:
                yield Hit(score, matcher.highlight(title), run, text=title, help=help)


class KeyCommands(Commands):
    """The actions of the screen's keys (pause, resume, step, confirm, retry, ...), by name: those in the footer, and
    those the screen keeps out of it (rarely used, as cancelling a run)."""

    def _commands(self) -> Iterator[Command]:
        for key, active in self.screen.active_bindings.items():
            binding = active.binding
            if not (binding.show or active.node is self.screen) or not active.enabled or binding.action in SKIP:
                continue
            help = f"{binding.tooltip or binding.description} (key: {binding.key_display or key})"
            yield binding.description, help, partial(self.app.run_action, binding.action, active.node)


class FirstBudget(Commands):
    """Budget, on the screen of a run that has none: its key ``b`` joins the footer only once the run has a budget
    (at 80 columns the footer has no room for one more key), so a first one is given from here."""

    def _commands(self) -> Iterator[Command]:
        screen = cast("RunScreen", self.screen)
        if screen.view is not None and not screen.view.standing.budget.budget.limited:  # else KeyCommands' b
            yield ("Budget", "Give the run a first budget, in USD, tokens or both (then key b changes it)",
                   screen.action_budget)
