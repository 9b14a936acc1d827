"""A notebook run's controls: a person's pause, resume, step, retry, confirm and budget, each one store transaction.

Part of :class:`runner.notebook.Run` (a mixin, as :mod:`runner.notebook_decisions`), obeyed by an engine in
any process, or by the next one; ``cancel`` stays on ``Run`` with its ``on_cancel``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from . import control, recovery, revalidating
from .breaker import Control
from .notebook_decisions import _Run
from .rules.budget import Budget
from .rules.revalidating import Plan


class Controls:
    """``pause()``, ``resume()``, ``step()``, ``retry()``, ``confirm()`` and ``budget()`` of a notebook run."""

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

    def budget(self: _Run, *, max_cost: float | None = None, max_tokens: int | None = None) -> Budget:
        """A new budget (the limits given; the others kept): a run stopped at its budget goes on."""
        with self._store() as store:
            return control.budget(store, self.name, now=self.clock.now(), max_cost=max_cost, max_tokens=max_tokens)[0]

    def retry(self: _Run, *, kind: str | None = None, keys: Sequence[str] = (), stage: str | None = None) -> int:
        """Failed items (all, one kind, some keys, those failed at one ``stage``) back to pending with a fresh
        attempt budget, each at the stage where it failed (the results before it kept); how many.

        A stage the run does not have raises ``UnknownStage``, naming those it has.
        """
        with self._store() as store:
            return control.retry(store, self.name, now=self.clock.now(), kind=kind, keys=keys, stage=stage).again

    def confirm(self: _Run, keys: Sequence[str] = ()) -> dict[recovery.Case, int]:
        """Release held items (all, or ``keys``): poll, look for, or send again; see :meth:`held` first."""
        with self._store() as store:
            return recovery.confirm(store, self.name, now=self.clock.now(), keys=keys)

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
