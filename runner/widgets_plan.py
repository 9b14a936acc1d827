"""The panel's step before a re-run: the plan of a retry, a confirmation or a revalidation shown, with Go and Cancel.

A button of :class:`runner.widgets.RunPanel` that sends items again reads
its plan (:mod:`runner.store.rerun_plans`, :func:`runner.revalidating.priced`,
on the panel's read-only connection) and shows it here; only Go writes the
command. A refresh of the panel leaves the step as it is: the person decides.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from html import escape
from typing import Any, TypeVar

import ipywidgets as widgets

from . import revalidating
from .errors import RunnerError
from .jobs import Job
from .panel_html import error
from .revalidating import Revalidation
from .rules.rerun_plan import RerunPlan
from .store import Store

T = TypeVar("T")

#: What a plan step shows of what it read: the plan and the lines under it, or a text (nothing to ask about).
Shows = tuple[RerunPlan, Sequence[str]] | str


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
        self.ask_about(store, plan, lambda _: then(), lambda shown: (shown, ()))

    def ask_about(self, store: Store | None, read: Callable[[Store], T], then: Callable[[T], None],
                  shows: Callable[[T], Shows]) -> None:
        """Show what ``read`` reads from ``store``, as ``shows`` words it (a text: said in the message line, nothing
        asked); Go calls ``then`` with what was read, so that it does what was shown."""
        try:
            if store is None:
                raise RunnerError("the run's store does not exist yet")
            data = read(store)
        except RunnerError as exc:
            self.message.value = error(str(exc))
            return
        shown = shows(data)
        if isinstance(shown, str):
            self.hide()
            self.message.value = f"<span style='color:#555'>{escape(shown)}</span>"
            return
        plan, lines = shown
        self.text.value = f"<b>{escape(str(plan))}</b>" + "".join(f"<br>{escape(line)}" for line in lines)
        self.go_button.button_style = "danger" if plan.may_repeat.items else "primary"
        self._then = partial(then, data)
        self.widget.layout.display = None

    def hide(self) -> None:
        self._then = None
        self.widget.layout.display = "none"

    def _go(self, _: Any) -> None:
        then = self._then
        self.hide()
        if then is not None:
            then()


#: A panel's command: ``command(action, said)`` runs ``action(store, name, now=...)`` and says ``said(done)``.
Command = Callable[[Callable[..., Any], Callable[[Any], str]], None]


class Revalidate:
    """The panel's Revalidate button: the revalidation's plan, priced and stage by stage, through the plan step;
    Go applies what was shown. Against ``job`` (a notebook run's own, with its Python check), else the job the run
    was last given, as ``runner revalidate NAME``."""

    def __init__(self, name: str, step: PlanStep, store: Callable[[], Store | None], command: Command,
                 job: Job | None) -> None:
        self.name, self.step, self.store, self.command, self.job = name, step, store, command, job
        self.button = button("Revalidate", "check-square", "check saved outputs against the output schema again, "
                             "with no call (shows the plan first)", self._ask)

    def _ask(self, _: Any) -> None:
        self.step.ask_about(self.store(), lambda store: revalidating.priced(store, self.name, job=self.job),
                            self._apply, self._shows)

    def _shows(self, read: tuple[Revalidation, RerunPlan]) -> Shows:
        revalidation, priced = read
        if not revalidation.plan.changes:
            return revalidating.nothing_line(self.name)
        return priced, revalidating.plan_lines(revalidation.plan, will=True)

    def _apply(self, read: tuple[Revalidation, RerunPlan]) -> None:
        revalidation = read[0]
        self.command(lambda store, name, now: revalidating.apply(store, revalidation, now=now, again=True),
                     lambda done: revalidating.done_line(self.name, done))
