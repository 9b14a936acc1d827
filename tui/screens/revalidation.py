"""Revalidating a run from its screen (``k``): the plan of checking its saved outputs again, priced, then asked.

The plan and the work are the core's (:func:`runner.revalidating.priced`,
:func:`runner.revalidating.apply`), as ``runner revalidate NAME`` has them:
against the output schema the run was last given; what the dialog showed is
what a yes applies (an item that moved meanwhile is left alone).
"""

from __future__ import annotations

from rich.text import Text

from runner import revalidating
from runner.revalidating import Revalidation
from runner.rules.rerun_plan import RerunPlan
from runner.store import Store
from runner.words import plural

from .base import unless_obeyed
from .dialog import AskScreen

#: What a revalidation is read as: the work, and its plan priced.
Shown = tuple[Revalidation, RerunPlan]

ABOUT = ("Saved outputs are checked again, with no call, against the output schema the run was last given "
         "(an edited job file: runner revalidate JOB.toml).")


def read(store: Store, now: float, *, name: str) -> Shown:
    return revalidating.priced(store, name)


def ask_revalidate(name: str, shown: Shown) -> AskScreen | str:
    """The question before a revalidation: its priced plan, then each stage's part; nothing that changes: said."""
    revalidation, priced = shown
    plan = revalidation.plan
    if not plan.changes:
        return revalidating.nothing_line(name)
    lines = "\n".join(revalidating.plan_lines(plan, will=True))
    body = Text.assemble((f"{priced}\n", "bold"), f"{lines}\n", ABOUT)
    warning = f"{plural(plan.may_repeat, 'item')} may be billed again" if plan.may_repeat else None
    return AskScreen(f"Revalidate run {name}?", body, warning=warning, yes="Revalidate")


def revalidate(store: Store, now: float, *, name: str, revalidation: Revalidation) -> str:
    """Apply what the dialog showed; say what was done, and who sends the items that go on."""
    done = revalidating.apply(store, revalidation, now=now, again=True)
    going = done.may_repeat or any(stage.completed for stage in done.stages)
    return revalidating.done_line(name, done) + (unless_obeyed(store, name, now, does="goes on") if going else "")
