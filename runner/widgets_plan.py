"""The panel's step before a re-run: the plan of a retry or a confirmation shown, with Go and Cancel.

A button of :class:`runner.widgets.RunPanel` that sends items again reads
its plan (:mod:`runner.store.rerun_plans`, on the panel's read-only
connection) and shows it here; only Go writes the command. A refresh of
the panel leaves the step as it is: the person decides.
"""

from __future__ import annotations

from collections.abc import Callable
from html import escape
from typing import Any

import ipywidgets as widgets

from .errors import RunnerError
from .panel_html import error
from .rules.rerun_plan import RerunPlan
from .store import Store


def button(description: str, icon: str, tooltip: str, handler: Callable[[Any], None]) -> Any:
    """A panel's button: ``handler`` runs on a click."""
    made = widgets.Button(description=description, icon=icon, tooltip=tooltip,
                          layout=widgets.Layout(width="auto", margin="0 0 0 8px"))
    made.on_click(handler)
    return made


class PlanStep:
    """A plan shown with Go and Cancel (hidden until asked); Go does what was asked, once."""

    def __init__(self, message: Any) -> None:
        #: The panel's message line: a plan that cannot be read says why there.
        self.message = message
        self.text = widgets.HTML()
        self.go_button = button("Go", "check", "send the items as the plan says", self._go)
        self.cancel_button = button("Cancel", "times", "send nothing", lambda _: self.hide())
        self.widget = widgets.HBox([self.text, self.go_button, self.cancel_button],
                                   layout=widgets.Layout(align_items="center", display="none"))
        self._then: Callable[[], None] | None = None

    def ask(self, store: Store | None, plan: Callable[[Store], RerunPlan], then: Callable[[], None]) -> None:
        """Show the plan ``plan`` reads from ``store``; Go calls ``then``."""
        try:
            if store is None:
                raise RunnerError("the run's store does not exist yet")
            shown = plan(store)
        except RunnerError as exc:
            self.message.value = error(str(exc))
            return
        self.text.value = f"<b>{escape(str(shown))}</b>"
        self.go_button.button_style = "danger" if shown.may_repeat.items else "primary"
        self._then = then
        self.widget.layout.display = None

    def hide(self) -> None:
        self._then = None
        self.widget.layout.display = "none"

    def _go(self, _: Any) -> None:
        then = self._then
        self.hide()
        if then is not None:
            then()
