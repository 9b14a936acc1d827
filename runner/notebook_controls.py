"""A notebook run's controls: a person's pause, resume, step, retry, confirm and budget, each one store transaction.

Part of :class:`runner.notebook.Run` (a mixin, as :mod:`runner.notebook_decisions`), obeyed by an engine in
any process, or by the next one; ``cancel`` stays on ``Run`` with its ``on_cancel``.

A notebook has no terminal to ask on, so what ``runner retry``, ``confirm`` and ``revalidate`` show before they
act is a method of its own: ``plan_retry()``, ``plan_confirm()`` and ``plan_revalidate()`` return the
:class:`~runner.rules.rerun_plan.RerunPlan` (printed, its plan line). ``retry()`` and ``confirm()`` go on alone
when nothing may be billed again; otherwise they change nothing and raise a ``RunError`` with the plan, until
called with ``yes=True`` (``revalidate()`` returns its plan unapplied until ``confirm=True``)::

    print(run.plan_retry(kind="item_invalid"))   # plan: 4 items · 0 charge-safe · 4 may be billed again (est. ...)
    run.retry(kind="item_invalid", yes=True)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from . import control, recovery, revalidating
from .breaker import Control
from .errors import RunError
from .notebook_decisions import _Run
from .rules.budget import Budget
from .rules.rerun_plan import RerunPlan
from .rules.revalidating import Plan
from .store import rerun_plans, views


class Controls:
    """``pause()``, ``resume()``, ``step()``, ``budget()``, ``retry()``, ``held()``, ``confirm()`` and
    ``revalidate()`` of a notebook run, with the plans of the last three."""

    def pause(self: _Run) -> Control:
        """No new batches; those in flight finish (an engine in any process obeys)."""
        with self._store() as store:
            return control.pause(store, self.name, now=self.clock.now())

    def resume(self: _Run) -> Control:
        """Lift a pause or an open breaker: one batch at a time until one succeeds."""
        with self._store() as store:
            return control.resume(store, self.name, now=self.clock.now())

    def step(self: _Run) -> Control:
        """Let exactly one more batch start while paused or open; the run stays held."""
        with self._store() as store:
            return control.step(store, self.name, now=self.clock.now())

    def budget(
        self: _Run, *, max_cost: float | None = None, max_tokens: int | None = None, none: bool = False
    ) -> Budget:
        """A new budget (the limits given; the others kept; ``none=True``: no budget): a run stopped at its budget
        goes on."""
        with self._store() as store:
            return control.budget(store, self.name, now=self.clock.now(), max_cost=max_cost, max_tokens=max_tokens,
                                  none=none)[0]

    def plan_retry(
        self: _Run, *, kind: str | None = None, keys: Sequence[str] = (), stage: str | None = None
    ) -> RerunPlan:
        """What :meth:`retry` with the same choice would send again: its items charge-safe and those that may be
        billed again (answered before, or sent with the answer lost), each part with its estimated cost."""
        with self._store(read_only=True) as store:
            return rerun_plans.retry_plan(store, self.name, kind=kind, keys=keys, stage=stage)

    def retry(
        self: _Run, *, kind: str | None = None, keys: Sequence[str] = (), stage: str | None = None, yes: bool = False
    ) -> int:
        """Failed items (all, one kind, some keys, those failed at one ``stage``) back to pending with a fresh
        attempt budget, each at the stage where it failed (the results before it kept); how many.

        When some of them may be billed again (:meth:`plan_retry`), nothing changes and a ``RunError`` shows the
        plan, unless ``yes``. A stage the run does not have raises ``UnknownStage``, naming those it has.
        """
        with self._store() as store:
            if not yes:  # the plan is read only to be shown
                _refuse_if_may_repeat(rerun_plans.retry_plan(store, self.name, kind=kind, keys=keys, stage=stage), "retry",
                               {"kind": kind, "keys": keys, "stage": stage})
            return control.retry(store, self.name, now=self.clock.now(), kind=kind, keys=keys, stage=stage).again

    def held(self: _Run) -> list[recovery.HeldItem]:
        """Items held for a person's confirmation after a crash, each with its case and warning."""
        with self._store(read_only=True) as store:
            return list(views.held_view(store, self.name, now=self.clock.now()).items)

    def plan_confirm(self: _Run, keys: Sequence[str] = ()) -> RerunPlan:
        """What :meth:`confirm` of the same items would do: those polled or looked for (charge-safe) and those
        sent again (may be billed again), each part with its estimated cost."""
        with self._store(read_only=True) as store:
            return rerun_plans.confirm_plan(store, self.name, keys=keys)

    def confirm(self: _Run, keys: Sequence[str] = (), *, yes: bool = False) -> dict[recovery.Case, int]:
        """Release held items (all, or ``keys``): poll, look for, or send again; see :meth:`held` first.

        When some would be sent again and may be billed twice (:meth:`plan_confirm`), nothing is released and a
        ``RunError`` shows the plan, unless ``yes``.
        """
        with self._store() as store:
            if not yes:
                _refuse_if_may_repeat(rerun_plans.confirm_plan(store, self.name, keys=keys), "confirm", {"keys": keys})
            return recovery.confirm(store, self.name, now=self.clock.now(), keys=keys)

    def plan_revalidate(self: _Run, *, stage: str | None = None) -> RerunPlan:
        """What :meth:`revalidate` would do, priced: the results kept or completed with no call (charge-safe) and
        the items sent again (may be billed again); its ``Plan`` (``confirm=False``) says it stage by stage."""
        with self._store(read_only=True) as store:
            return revalidating.priced(store, self.name, job=self.job, stage=stage)[1]

    def revalidate(
        self: _Run, *, stage: str | None = None, confirm: bool | Callable[[Plan], bool] = False
    ) -> Plan:
        """Check saved outputs again against this run's output schema (and ``check``), with no call: items that
        failed as invalid whose answer passes now complete; results still valid are kept as this job's; results
        now invalid are sent again only when ``confirm`` is True or returns True for the plan (they were
        answered: it may repeat a charge). Nothing is applied otherwise (the plan comes back, ``applied``
        False). Only a change of output schema is revalidated: any other change of a stage is refused.
        """
        with self._store() as store:
            return revalidating.revalidate(store, self.name, now=self.clock.now(), confirm=confirm, job=self.job,
                                           stage=stage)


def _refuse_if_may_repeat(plan: RerunPlan, verb: str, chosen: dict[str, object]) -> None:
    """Refuse (``RunError``, with the plan) a re-run of which some items may be billed again (the caller's ``yes``
    skips this)."""
    if not plan.may_repeat.items:
        return
    given = ", ".join(f"{name}={value!r}" for name, value in chosen.items() if value)
    raise RunError(f"{plan}: nothing was done; {verb}() asks before it sends items that may be billed again: "
                   f"to send them, {verb}({given}{', ' if given else ''}yes=True)")
