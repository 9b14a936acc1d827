"""The command palette: every key the current screen offers, as a command."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

#: Keys the palette already offers in its own words.
SKIP = {"command_palette", "quit", "app.quit"}


class KeyCommands(Provider):
    """The actions of the footer's keys (pause, resume, step, confirm, retry, ...), by name."""

    def _commands(self) -> Iterator[tuple[str, str, Callable[[], object]]]:
        for key, active in self.screen.active_bindings.items():
            binding = active.binding
            if not binding.show or not active.enabled or binding.action in SKIP:
                continue
            help = f"{binding.tooltip or binding.description} (key: {binding.key_display or key})"
            yield binding.description, help, partial(self.app.run_action, binding.action, active.node)

    async def discover(self) -> Hits:
        for title, help, run in self._commands():
            yield DiscoveryHit(title, run, help=help)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, help, run in self._commands():
            score = max(matcher.match(title), matcher.match(help) * 0.5)
            if score > 0:
                yield Hit(score, matcher.highlight(title), run, text=title, help=help)
