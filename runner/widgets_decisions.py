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
from .panel_html import decision_html, error, note
from .store.answers import DecisionsView


class DecisionsTab:
    """The tab's widgets (``widget``); ``show`` draws what the panel read, ``command`` writes a decision.

    The list's values are the items' keys (its labels only show them). The
    data an approval saves is the chosen item's: typed afresh (``{}``) each
    time another item is chosen. After this tab's own decision, the next item
    waiting is chosen; when a refresh finds the chosen item gone otherwise
    (decided elsewhere), nothing is chosen, and the message line says so, so
    that no click acts on an item the person has not read.
    """

    def __init__(self, command: Callable[..., None], message: Any) -> None:
        self._command, self._message = command, message
        self.view: DecisionsView | None = None
        #: The key this tab decided last (the next one is chosen after it), and whether a refresh unchose one.
        self._decided: str | None = None
        self._unchosen = False
        self._showing = False
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
        self.items.observe(self._chosen, names="value")
        self.widget = widgets.VBox([widgets.HBox([self.items, self.detail]),
                                    widgets.HBox([self.data, self.approve, self.reject])])

    def show(self, view: DecisionsView) -> None:
        self.view = view
        keys = [d.key for d in view.items]
        options = [(f"{d.key} · {d.stage}", d.key) for d in view.items]
        chosen, before = self.key, [value for _, value in self.items.options]
        self._showing = True
        try:
            if options != list(self.items.options):
                self.items.options = options
            self.items.value = self._choice(chosen, keys, before)
        finally:
            self._showing = False
        if self.items.value != chosen:
            self.data.value = "{}"
        self.approve.disabled = self.reject.disabled = self.items.value is None
        self._draw()

    def _choice(self, chosen: str | None, keys: list[str], before: list[str]) -> str | None:
        """The key to choose now: the one chosen while it waits; after this tab's decision, the next one waiting;
        none when the one chosen was decided elsewhere (said) or a person has not chosen since."""
        if chosen in keys:
            return chosen
        if chosen is not None and chosen != self._decided:
            self._unchosen = True
            self._message.value = note(f"{chosen} was decided elsewhere (it no longer waits here): choose the "
                                       "item to decide")
            return None
        if self._unchosen or not keys:
            return None
        after = before[before.index(chosen) + 1:] if chosen in before else []
        return next((key for key in after if key in keys), keys[0])

    @property
    def key(self) -> str | None:
        """The key of the item chosen."""
        value = self.items.value
        return value if isinstance(value, str) else None

    def _chosen(self, _: Any) -> None:
        """A person chose another item: its data is typed afresh."""
        if self._showing:
            return
        self._unchosen = False
        self.data.value = "{}"
        self.approve.disabled = self.reject.disabled = self.items.value is None
        self._draw()

    def _draw(self) -> None:
        items = self.view.items if self.view is not None else ()
        chosen = next((d for d in items if d.key == self.key), None)
        if chosen is None and items:
            self.detail.value = "<i style='color:#777'>choose an item to decide</i>"
            return
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
        self._decided = key
        self._command(deciding.decide, lambda done: f"{key} {'approved' if done.approved else 'rejected'}"
                      + (" (not at the stage yet: kept until it arrives)" if done.kept else ""),
                      keys=[key], approve=approve, data=data)
