"""Revalidating a run: its saved outputs checked again against the job's output schema now, with no call.

``runner revalidate NAME [--stage S]``, ``Run.revalidate()``, the TUI's
``k`` and the panel's Revalidate show the plan first (:func:`priced`: the
revalidation, :class:`runner.rules.revalidating.Plan`, and its re-run plan
priced), then, once a person agreed to what may repeat a charge, apply it
(:func:`apply`; :func:`revalidate` does both for a notebook). The sorting is
:func:`runner.rules.revalidating.sort`'s; the store applies it
(:mod:`runner.store.revalidating`).

``runner run`` revalidates on its own when the only change to a stage is its
output schema (:func:`schema_only_changes`): a schema fixed after the fact
costs nothing. Failed items whose answer passes now complete, results still
valid keep standing, and the results now invalid are never sent again on the
run's own: they were answered, so their items fail there as invalid, their
answer kept, and the run says how many and the ``runner retry`` that shows
their priced plan and asks (:func:`refused_lines`; each item's history says
so).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from . import lease
from .errors import RunError, UnknownStage
from .jobs import DECIDE, JOIN, Job, Stage
from .model import FailureKind
from .rules.rerun_plan import RerunPlan
from .rules.revalidating import Plan, Saved, Sorted, StagePlan, sort, stage_plan
from .rules.stages import next_stage, state_of
from .store import rerun_plans
from .store.protocol import RunStore
from .store.revalidating import Onward, SavedRow
from .validation import ResultCheck
from .words import command, plural

if TYPE_CHECKING:
    from .store import Store


@dataclass(frozen=True)
class StageWork:
    """One stage's sorting, as :func:`apply` makes it durable."""

    stage: Stage
    sorted: Sorted
    #: Item id -> where it goes once its stage completes.
    onward: dict[int, Onward]


@dataclass(frozen=True)
class Revalidation:
    """What revalidating a run would do: its plan, and each stage's sorting behind it."""

    name: str
    run_id: int
    job: Job
    plan: Plan
    works: tuple[StageWork, ...]
    #: The job the run was last given, when ``job`` is another (a job file edited, a notebook's ``Run``): applied,
    #: the run's job takes the schemas checked against (:meth:`run_job`). None: ``job`` is the run's.
    given: Job | None = None

    def taken(self) -> list[str]:
        """The stages revalidated whose output schema differs from the one the run was last given."""
        given = self.given
        return [] if given is None else [
            work.stage.name for work in self.works if given.stage(work.stage.name).output_schema !=
            work.stage.output_schema]

    def run_job(self) -> Job | None:
        """The run's job once applied: the job it was last given with the output schemas (and the Python check, or
        none) this revalidation checks against, nothing else of ``job`` (a job file's other edits are the run's
        when it is run); None when that is the job it was given. Saved, a run by name, ``runner revalidate NAME``,
        the TUI and the panel check as this revalidation did, and a result it kept stands for its stage."""
        given, checks = self.given, self.job.checked_in_python
        if given is None or not self.taken() and checks == given.python_check:
            return None
        schemas = {work.stage.name: work.stage.output_schema for work in self.works}
        stages = tuple(dataclasses.replace(stage, output_schema=schemas.get(stage.name, stage.output_schema))
                       for stage in given.stages)
        return dataclasses.replace(given, output_schema=self.job.output_schema, python_check=checks, stages=stages)

    def resent(self) -> tuple[list[tuple[str, list[int]]], int]:
        """What its re-run plan (:mod:`runner.store.rerun_plans`) prices, item by item: per stage, the items
        sent again there (a result now invalid; an item sent again at an earlier stage is sent from there), and
        how many other items keep or complete their results with no call."""
        again: list[tuple[str, list[int]]] = []
        sent: set[int] = set()
        kept: set[int] = set()
        for work in self.works:
            there = [item for item in work.sorted.again if item not in sent]
            sent.update(there)
            kept.update(work.sorted.complete, work.sorted.restamp)
            again.append((work.stage.name, there))
        return again, len(kept - sent)


def plan(store: RunStore, name: str, *, job: Job | None = None, stage: str | None = None) -> Revalidation:
    """The revalidation of run ``name`` (every stage that calls, or one ``stage``) against ``job`` (by default
    the job the run was last given), with no write.

    A stage the run does not have is refused (``UnknownStage``, naming those
    it has), so is one that makes no call (a decide or join stage: it has no
    output schema), a job that fans out (not revalidated yet), and a job read
    from the store whose run was given a Python check (the store keeps only
    that there was one: results would be checked as the run does not).
    """
    run_id = store.run_id(name)
    saved = store.job(name)
    job = job or saved
    if (job.python_check or saved.python_check) and job.check is None:
        raise RunError(f"run {name!r} checks its results with a Python function (check=), which the store does not "
                       "keep: revalidate it from Python, where its Run has its check: run.revalidate()")
    chosen = _chosen(job, stage)
    _only_schema_changed(saved, job, chosen)
    works = tuple(_sorted(store, run_id, job, each) for each in chosen)
    return Revalidation(name, run_id, job, Plan(tuple(stage_plan(w.stage.name, w.sorted) for w in works)), works,
                        None if job is saved else saved)


def priced(
    store: Store, name: str, *, job: Job | None = None, stage: str | None = None
) -> tuple[Revalidation, RerunPlan]:
    """The revalidation of run ``name`` (:func:`plan`) and its re-run plan priced (charge-safe, and what may be
    billed again, each with its estimated cost): what every UI shows before it asks, with no write."""
    revalidation = plan(store, name, job=job, stage=stage)
    return revalidation, rerun_plans.revalidate_plan(store, revalidation.run_id, *revalidation.resent())


def apply(store: RunStore, revalidation: Revalidation, *, now: float, again: bool, setting_up: bool = False) -> Plan:
    """Make a revalidation durable; the results now invalid are sent again with ``again`` (a person agreed: they
    may repeat a charge), else failed there as invalid, their answer kept, for a person's retry; the run's job
    takes the schemas checked against (:meth:`Revalidation.run_job`) in the last transaction. Refused while live
    workers run the run: they would check what it sends again against the schemas they have; not ``setting_up``,
    by the worker that sets the run up while the others wait for it. Returns the plan as applied."""
    job, done, run_job = revalidation.job, [], revalidation.run_job()
    if not setting_up:
        refuse_while_worked(store, revalidation, now=now)
    for at, work in enumerate(revalidation.works, 1):
        invalid = work.sorted.again
        store.revalidated(
            revalidation.run_id, work.stage.name, stages=[stage.name for stage in job.stages],
            fingerprint=work.stage.fingerprint(job.version) if job.staged else None, complete=work.onward,
            restamp=work.sorted.restamp, again=invalid if again else {}, refuse={} if again else invalid, now=now,
            job=run_job.to_json() if run_job is not None and at == len(revalidation.works) else None)
        done.append(dataclasses.replace(stage_plan(work.stage.name, work.sorted), again=len(invalid) if again else 0,
                                        refused=0 if again else len(invalid)))
    return Plan(tuple(done))


def refuse_while_worked(store: RunStore, revalidation: Revalidation, *, now: float) -> None:
    """Refuse (``RunError``) a revalidation that gives the run other output schemas while live workers run it:
    they would check what it sends again against the schemas they have, so its resends would buy nothing."""
    if revalidation.run_job() is not None and lease.alive(store, revalidation.name, now=now):
        raise RunError(f"run {revalidation.name!r} is being run by workers that check against the output schema it "
                       "has; nothing was changed: revalidate against the changed one once they end (or stop them)")


def revalidate(
    store: RunStore, name: str, *, now: float, confirm: bool | Callable[[Plan], bool], job: Job | None = None,
    stage: str | None = None,
) -> Plan:
    """Revalidate run ``name`` (see :func:`plan`): applied at once when nothing may repeat a charge; when some
    results are now invalid, nothing is applied unless ``confirm`` (True, or a function asked with the plan)
    agrees to send them again. Returns the plan as applied, or as shown (``applied`` False)."""
    revalidation = plan(store, name, job=job, stage=stage)
    if revalidation.plan.may_repeat and not (confirm if isinstance(confirm, bool) else confirm(revalidation.plan)):
        return dataclasses.replace(revalidation.plan, applied=False)
    return apply(store, revalidation, now=now, again=True)


def schema_only_changes(was: Job, job: Job) -> list[str]:
    """The stages of ``job`` whose only change since ``was`` is their output schema (same name, same job
    version; nothing else of what makes their results differs)."""
    if was.version != job.version or was.staged != job.staged:
        return []
    before = {stage.name: stage for stage in was.stages}
    changed = []
    for stage in job.stages:
        old = before.get(stage.name)
        if old is None or stage.kind in (DECIDE, JOIN) or old.output_schema == stage.output_schema:
            continue
        same = dataclasses.replace(old, output_schema=stage.output_schema)
        if not job.staged or same.fingerprint(job.version) == stage.fingerprint(job.version):
            changed.append(stage.name)
    return changed


def _revalidated_on_run(was: Job, job: Job) -> list[str]:
    """The stages a run of ``was`` given ``job`` revalidates as it starts (:func:`after_schema_change`)."""
    return [] if any(stage.fan_out for stage in job.stages) else schema_only_changes(was, job)


def until_revalidated(was: Job | None, job: Job) -> Job:
    """The job a run of ``was`` is given as its input is read (:mod:`runner.preparing`): ``job``, but each stage
    whose only change is its output schema keeps the run's schema; the run takes the new one with its revalidation
    (:func:`after_schema_change`), in that revalidation's last transaction. Given it before, a run stopped between
    the two (killed; a notebook's ``start``, which reads the input before its engine runs) would find its job
    unchanged and send every answered item again."""
    if was is None or not (changed := _revalidated_on_run(was, job)):
        return job
    stages = tuple(dataclasses.replace(stage, output_schema=was.stage(stage.name).output_schema)
                   if stage.name in changed else stage for stage in job.stages)
    return dataclasses.replace(job, output_schema=was.output_schema, stages=stages)


def after_schema_change(store: RunStore, run_id: int, was: Job, job: Job, *, now: float) -> dict[str, StagePlan]:
    """A run started again whose stages changed only their output schema (``was``: the job the run has): each
    revalidated at once, with no person to agree to a charge again: its results now invalid are not sent but failed
    as invalid, for a person's retry (:func:`refused_lines`); the run takes ``job``'s schemas in the same
    transaction as the last of it. Stage -> what was done."""
    changed = _revalidated_on_run(was, job)
    if not changed:
        return {}
    works = tuple(_sorted(store, run_id, job, job.stage(name)) for name in changed)
    revalidation = Revalidation(job.name, run_id, job, Plan(), works, given=was)
    return {done.stage: done for done in apply(store, revalidation, now=now, again=False, setting_up=True).stages}


def _chosen(job: Job, stage: str | None) -> Sequence[Stage]:
    """The stages to revalidate: one named, or every stage that calls."""
    if any(each.fan_out for each in job.stages):
        raise RunError(f"run {job.name!r} fans items out: revalidating a job with fan_out is not supported yet")
    if stage is None:
        return [each for each in job.stages if each.kind not in (DECIDE, JOIN)]
    names = [each.name for each in job.stages]
    if stage not in names:
        raise UnknownStage(f"run {job.name!r} has no stage {stage!r}; its stages: {', '.join(names)}")
    chosen = job.stage(stage)
    if chosen.kind in (DECIDE, JOIN):
        raise UnknownStage(f"stage {stage!r} of run {job.name!r} is a {chosen.kind} stage: it makes no call and "
                           "has no output schema to check")
    return [chosen]


def _only_schema_changed(saved: Job, job: Job, chosen: Sequence[Stage]) -> None:
    """Refuse a job given whose chosen stages changed more than their output schema since the run's: a result
    kept as that stage's now would not be what the stage asks now."""
    if job is saved:
        return
    same = {stage.name for stage in saved.stages} if saved.staged == job.staged else set()
    allowed = set(schema_only_changes(saved, job))
    for stage in chosen:
        unchanged = stage.name in same and saved.version == job.version and (
            not job.staged or saved.stage(stage.name).fingerprint(saved.version) == stage.fingerprint(job.version))
        if stage.name not in allowed and not unchanged:
            raise RunError(f"stage {stage.name!r} of run {job.name!r} changed more than its output schema since the "
                           "run was last given its job: run it to send that stage again")


def _sorted(store: RunStore, run_id: int, job: Job, stage: Stage) -> StageWork:
    """One stage's saved outputs, sorted by the rule, with where each item that completes goes."""
    rows = store.saved_outputs(run_id, stage.name, staged=job.staged)
    check = ResultCheck(stage.output_schema, job.check).problem
    sorted_ = sort([_saved(row) for row in rows], check)
    by_id = {row.id: row for row in rows}
    onward = {item_id: _onward(job, stage, by_id[item_id]) for item_id in sorted_.complete}
    return StageWork(stage, sorted_, onward)


def _saved(row: SavedRow) -> Saved:
    return Saved(row.id, row.key, None if row.result is None else json.loads(row.result),
                 None if row.rejected is None else json.loads(row.rejected), row.in_flight)


def _onward(job: Job, stage: Stage, row: SavedRow) -> Onward:
    """Where an item that completes ``stage`` now goes (a job of one stage: completed)."""
    if not job.staged:
        return Onward(None)
    passed = {**json.loads(row.passed or "{}"), stage.name: json.loads(row.rejected or "null")}
    going = next_stage(job.stages, stage.name, state_of(json.loads(row.input or "{}"), passed))
    return Onward(going.stage, going.skipped)


def plan_lines(plan: Plan, *, will: bool) -> list[str]:
    """The plan in words, a line a stage: what is charge-safe, and what may repeat a charge; ``will``: as a
    person is asked before it is done (False: as done)."""
    return [f"stage {each.stage}: " + _parts(each, will=will) for each in plan.stages]


def done_line(name: str, done: Plan) -> str:
    """What a person's revalidation did, in one line."""
    return (f"revalidated run {name!r}: {plural(done.charge_safe, 'result')} kept or completed with no call, "
            f"{plural(done.may_repeat, 'item')} sent again")


def taken_line(revalidation: Revalidation) -> str | None:
    """That the run's job took the job file's output schemas (None: it had them), in one line."""
    taken = revalidation.taken()
    if not taken:
        return None
    which = f" of stage{'s' if len(taken) > 1 else ''} {', '.join(taken)}" if revalidation.job.staged else ""
    return (f"run {revalidation.name!r} now has the job file's output schema{which} as its own: running it, "
            "revalidating it by name, the TUI and the panel check against it")


def nothing_line(name: str) -> str:
    """A revalidation that changes nothing."""
    return f"nothing to revalidate: no saved output of run {name!r} changes"


def revalidated_line(done: StagePlan, *, staged: bool) -> str:
    """What a run's revalidation of a stage whose only change was its output schema did, as it started (a job of
    one stage, ``staged`` False, has no stage of its own to name)."""
    changed = f"stage {done.stage}: only its output schema changed" if staged else "only the output schema changed"
    return f"{changed}; saved outputs checked again with no call: {_parts(done, will=False)}"


def _parts(each: StagePlan, *, will: bool) -> str:
    """A stage's counts in words, those that are not zero (charge-safe first)."""
    parts = [
        (each.completed, f"{plural(each.completed, 'item')} that failed as invalid "
                         f"{'would complete' if will else 'completed'} (charge-safe)"),
        (each.restamped, f"{plural(each.restamped, 'result')} still valid {'would be kept' if will else 'kept'} "
                         "(charge-safe)"),
        (each.again, f"{plural(each.again, 'item')} {'would be sent again' if will else 'sent again'}: "
                     f"may repeat a charge, {_were(each.again)} answered"),
        (each.refused, f"{plural(each.refused, 'item')} now invalid failed, not sent again: {_were(each.refused)} "
                       "answered"),
        (each.still_invalid, f"{plural(each.still_invalid, 'failed item')} still invalid, left failed"),
        (each.in_flight, f"{plural(each.in_flight, 'result')} now invalid left to the batch in flight"),
    ]
    return "; ".join(said for count, said in parts if count) or "no saved output"


def _were(count: int) -> str:
    return "it was" if count == 1 else "they were"


def refused_lines(job: Job, revalidated: Mapping[str, StagePlan], db: str | Path) -> list[str]:
    """What a run's own revalidation left for a person, for the run's end: how many answered items the changed
    schema refuses, each stage's, and the retry that shows their priced plan and asks before sending them."""
    lines = []
    for stage, done in revalidated.items():
        if done.refused:
            at = ["--stage", stage] if job.staged else []
            lines += [f"{plural(done.refused, 'item')}{f' at stage {stage}' if at else ''} failed as invalid: the "
                      "changed output schema refuses their saved answer; not sent again, as they were answered (it "
                      "may repeat a charge); to see the priced plan and send them:",
                      command("retry", job.name, "--kind", FailureKind.ITEM_INVALID.value, *at, db=db)]
    return lines
