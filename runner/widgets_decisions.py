"""The notebook panel's decisions tab: the items waiting at a decide stage, one chosen at a time, approved or rejected.

Part of :class:`runner.widgets.RunPanel` (imported only with it): a list of
the items waiting, the chosen one's input and state so far
(:func:`runner.panel_html.decision_html`), the data an approval saves (typed
as a JSON object; anything else is refused, with why, before any write), and
Approve / Reject, each one command through :func:`runner.deciding.decide`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from . import deciding
from .panel_html import decision_html, error
from .store.answers import DecisionsView


class DecisionsTab:
    """The tab's widgets (``widget``); ``show`` draws what the panel read, ``command`` writes a decision."""

    def __init__(self, command: Callable[..., None], message: Any) -> None:
        self._command, self._message = command, message
        self.view: DecisionsView | None = None
        self.items = widgets.Select(options=[], rows=10, layout=widgets.Layout(width="220px"))
        self.detail = widgets.HTML(layout=widgets.Layout(width="100%"))
        self.data = widgets.Textarea(value="{}", description="data", placeholder='{"approved_by": "me"}',
                                     layout=widgets.Layout(width="420px", height="80px"))
        self.approve = widgets.Button(description="Approve", icon="check", button_style="success",
                                      tooltip="the data is saved as the stage's result; the item goes on")
        self.reject = widgets.Button(description="Reject", icon="times", button_style="danger",
                                     tooltip="the item fails as rejected (retry --kind rejected sends it back)")
        self.approve.on_click(lambda _: self._decide(approve=True))
        self.reject.on_click(lambda _: self._decide(approve=False))
        self.items.observe(lambda _: self._draw(), names="value")
        self.widget = widgets.VBox([widgets.HBox([self.items, self.detail]),
                                    widgets.HBox([self.data, self.approve, self.reject])])

    def show(self, view: DecisionsView) -> None:
        self.view = view
        options = [f"{d.key} · {d.stage}" for d in view.items]
        keys = [d.key for d in view.items]
        chosen = self.items.value.split(" · ")[0] if self.items.value else None
        if options != list(self.items.options):
            self.items.options = options
        self.items.value = options[keys.index(chosen)] if chosen in keys else (options[0] if options else None)
        self.approve.disabled = self.reject.disabled = not options
        self._draw()

    @property
    def key(self) -> str | None:
        """The key of the item chosen."""
        return self.items.value.split(" · ")[0] if self.items.value else None

    def _draw(self) -> None:
        items = self.view.items if self.view is not None else ()
        chosen = next((d for d in items if d.key == self.key), None)
        self.detail.value = decision_html(chosen, self.view.waiting if self.view is not None else 0)

    def _decide(self, *, approve: bool) -> None:
        key = self.key
        if key is None:
            return
        try:
            data = deciding.parse_data(self.data.value) if approve else {}
        except ValueError as exc:
            self._message.value = error(f"the data is not saved: {exc}")
            return
        self._command(deciding.decide, lambda done: f"{key} {'approved' if done.approved else 'rejected'}"
                      + (" (not at the stage yet: kept until it arrives)" if done.kept else ""),
                      keys=[key], approve=approve, data=data)
