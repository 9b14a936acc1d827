"""What an engine holds per stage: how the stage is worked, what it sends, and where its items go next.

A stage's ``kind`` says how it is worked: a provider that calls
(``openai-chat``, a Python handler) gives it a ``caller``, one that submits
and polls (``openai-batch``, a Python submit/poll pair) a ``tasks`` driver;
``decide`` (a person's decision, no call) is never sent: its items wait for
a person (:mod:`runner.deciding`), and the decisions kept for items that
have since arrived are applied at each turn (:func:`take_decisions`). A
job file's ``python`` stage is worked by the function given for it
(:mod:`runner.python_stages`); given none, its items wait there and the
run stops once nothing else moves (:func:`left`). Batches are formed per stage and group, later
stages first (:func:`claims`), so items finish rather than pile up at the
first stage. Concurrency is the run's (``[batch] concurrency``), shared by
every stage.

At the boundary (:func:`boundary`) each completed item's next stage is asked
of :func:`runner.rules.stages.next_stage`, over its state with the new result;
the store makes the move in the settlement's transaction.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from .. import deciding, protocol, python_stages, reusing, words
from ..jobs import DECIDE, JOIN, NO_CALL, Job, Stage
from ..model import Claim, FailureKind, FanOut, ItemState, Settlement, StartedItem
from ..providers import Provider, SizedTasks, TaskProvider
from ..busy import StoreSteps
from ..clock import Clock
from ..errors import StoreBusy
from ..rules import fanout
from ..rules.stages import Onward, next_stage, onward, state_of
from ..store.protocol import RunStore
from ..store.stages import Stale
from ..tasks import TaskDriver
from ..validation import ResultCheck


@dataclass
class StageWork:
    """One stage as the engine works it: its provider's way (a call or a task), its check, its requests file."""

    stage: Stage
    provider: Provider | TaskProvider
    check: ResultCheck
    fingerprint: str
    #: The requests file a batch's lines must fit, for a provider that sends one (``openai-batch``).
    file: Any = None
    #: One of the two is set when the run starts: the provider either calls, or submits and polls.
    caller: Provider | None = None
    tasks: TaskDriver | None = None


def works_of(job: Job, providers: Mapping[str, Provider | TaskProvider]) -> dict[str, StageWork]:
    """Each stage's work, its provider from ``providers`` by stage name."""
    works = {}
    for stage in job.stages:
        if stage.kind in NO_CALL:  # worked by no call: a join by the engine's turn (``runner.engine.joins``)
            continue
        provider = providers.get(stage.name)
        if provider is None:  # a python stage given no handler: its items wait there
            continue
        works[stage.name] = StageWork(
            stage, provider, ResultCheck(stage.output_schema, job.check), stage.fingerprint(job.version),
            file=provider.sizing() if isinstance(provider, SizedTasks) else None,
        )
    return works


def claims(works: Mapping[str, StageWork], job: Job) -> list[Claim]:
    """The stages to form batches of, in the order asked: later stages first (a job without ``[[stage]]``: its
    one stage, whatever its items are labelled)."""
    return [Claim(stage.name if job.staged else None, stage.batch.max_items, stage.batch.max_chars,
                  works[stage.name].file, _reuse(job, works[stage.name]))
            for stage in reversed(job.stages) if stage.name in works]


def _reuse(job: Job, work: StageWork) -> reusing.Reuse | None:
    """What the claim of a stage with ``[cache] reuse`` asks of each item in line (None: the stage sends every item)."""
    return reusing.Reuse(job, work.stage, work.fingerprint, work.check) if work.stage.cache.reuse else None


def take_decisions(store: RunStore, run_id: int, job: Job, *, now: float) -> None:
    """Apply the decisions a person gave before their items reached a decide stage, now they wait there
    (a busy store puts it off to a later turn)."""
    if any(stage.kind == DECIDE for stage in job.stages):
        try:
            deciding.apply_kept(store, run_id, job, now=now)
        except StoreBusy:
            return


class Left(NamedTuple):
    """What moves the items left when the engine can form no batch: ``for_person`` (a person's act, which a
    waiting engine waits for) or nobody here, stopping at the python stages given no handler (``unhandled``)."""

    reason: str
    for_person: bool
    unhandled: tuple[str, ...]


def left(store: RunStore, job: Job, works: Mapping[str, StageWork], *, now: float) -> Left:
    """Why the items left wait: for a person (a confirmation, a decision), for a python stage's handler (given
    from Python: the run stops, unless a person is needed too), or both."""
    status = store.status(job.name, now=now)
    unhandled = tuple(python_stages.waiting(job, works, status["stages"]))
    if not unhandled:
        return Left(_for_person(status), True, ())
    reason = python_stages.go_on(job, store.path, list(unhandled))
    if status["needs_confirmation"] or status["needs_decision"]:
        return Left(f"{_for_person(status)}; {reason}", True, unhandled)
    return Left(reason, False, unhandled)


def _for_person(status: Mapping[str, Any]) -> str:
    """Why only a person can move the items left, by the run's ``status``: confirmations after a crash,
    decisions, or both."""
    reasons = []
    if status["needs_confirmation"]:
        reasons.append("items need a person's confirmation")
    if status["needs_decision"]:
        reasons.append(f"{words.plural(status['needs_decision'], 'item waits', 'items wait')} for a person's decision")
    return "; ".join(reasons) or "items need a person's confirmation"


def begin(work: StageWork, store: RunStore, run_id: int, *, clock: Clock, steps: StoreSteps) -> None:
    """Give a stage its way of working: a task driver for a provider that submits and polls, else its caller."""
    if isinstance(work.provider, TaskProvider):
        stage = work.stage
        work.tasks = TaskDriver(
            store, work.provider, retry=stage.retry, clock=clock, run_reference=store.reference(run_id), steps=steps,
            lands_within=stage.provider.timeout + stage.provider.create_margin,
        )
    else:
        work.caller = work.provider


#: Failures a person made: they stand when the item's stage is gone (a retry sends it on from there).
BY_A_PERSON = (FailureKind.CANCELLED, FailureKind.REJECTED)
#: States of an item whose call is in flight: one a person cancelled there is marked, not failed yet.
IN_FLIGHT = (ItemState.RUNNING, ItemState.RECEIVED)


class Rewound(NamedTuple):
    """What a re-run sent on as it started: stage -> items sent back to it (that stage, or one before it,
    changed, or it was added); stage gone -> items left at it sent on (or completed, or kept failed at
    their next stage); stage inside a fan-out -> (sub-items sent back to it, their parents, which wait at their
    join again)."""

    again: dict[str, int]
    gone: dict[str, int]
    inside: dict[str, tuple[int, int]]


def rewind(store: RunStore, run_id: int, job: Job, works: Mapping[str, StageWork], *, now: float) -> Rewound:
    """Send each item whose results do not stand for the stages now where :func:`runner.rules.stages.onward`
    says: to the first stage it must go through again (a result missing, as for a stage added or a ``when``
    widened, or stale), so that only that stage's calls, and those after it, are made again; items left at a
    stage the job no longer has on to the next stage they need, or completed (a sub-item: inside its fan-out,
    or completed there, counting its parent down). A sub-item whose result of a stage inside its fan-out is
    stale (or missing) goes back to that stage, and its parent waits at its join again, to be joined again and
    go through the stages after the join again (:func:`runner.store.fanout.reopen`). An item a person cancelled
    in flight at a stage gone fails cancelled. A parent moved back to (or before) its fan-out, or whose fan-out
    is gone, has its sub-items retired in the same transaction (:meth:`runner.store.stages.Stages.rewind`):
    its fan-out made again replaces them. Items pending at a decide stage (sent back there, or at the first
    stage) wait there for a person."""
    if not job.staged:  # one stage: a changed prompt changes the items' own fingerprint (input_changed)
        return Rewound({}, {}, {})
    fingerprints = {stage.name: stage.fingerprint(job.version) for stage in job.stages}
    # A parent goes from its fan-out to its join: the stages between are its sub-items'.
    passed_by_parents = [stage for stage in job.stages if not fanout.inside(job.stages, stage.name)]
    order = [stage.name for stage in passed_by_parents]
    inside = [stage.name for stage in job.stages if stage.name not in order]
    moves: dict[str, dict[int, str]] = {"rewind": {}, "restage": {}, "finish": {}, "keep": {}, "cancel": {}}
    retire: list[int] = []
    again, gone, sub_items = Counter[str](), Counter[str](), dict[str, set[tuple[int, int]]]()
    stale = store.stale_items(run_id, [(name, fingerprints[name]) for name in order],
                              [stage.name for stage in job.stages],
                              inside=[(name, fingerprints[name]) for name in inside])
    for item in sorted(stale, key=lambda item: item.parent is not None):  # parents first: retiring sub-items
        if item.parent in retire:  # its parent's fan-out is made again: it is retired, not sent again
            continue
        stages, known = passed_by_parents, fingerprints
        if item.parent is not None:  # its parent's results count as they are: a changed one rewinds the parent
            stages = fanout.sub_item_stages(job.stages, item.saved)
            known = {**fingerprints, **{name: fingerprint for name, (_, fingerprint) in item.saved.items()
                                        if name in order}}
        to = _onward(stages, known, item)
        moves[to.move][item.id] = to.stage or ""
        if item.parent is None and to.move != "keep" and not fanout.fan_out_stands(
                passed_by_parents, item.saved, to=None if to.move == "finish" else to.stage):
            retire.append(item.id)
        names = [stage.name for stage in stages]
        completed = item.state == ItemState.COMPLETED
        if item.stage not in names and not completed:
            gone[item.stage] += to.move != "keep"
        elif to.move == "rewind" and (completed or to.stage in item.saved
                                      or names.index(to.stage or "") < names.index(item.stage)):
            if item.parent is None:
                again[to.stage or ""] += 1
            else:
                sub_items.setdefault(to.stage or "", set()).add((item.id, item.parent))
    if any(moves[name] for name in ("rewind", "restage", "finish", "cancel")):
        store.rewind(moves["rewind"], [stage.name for stage in job.stages], now=now, restage=moves["restage"],
                     finish=moves["finish"], cancel=moves["cancel"], retire=retire)
    if any(stage.kind == DECIDE for stage in job.stages):  # those now at a decide stage wait for a person there
        store.arrive(run_id, now=now)
    return Rewound(dict(again), {stage: n for stage, n in gone.items() if n},
                   {stage: (len(subs), len({parent for _, parent in subs})) for stage, subs in sub_items.items()})


def _onward(stages: Sequence[Stage], fingerprints: Mapping[str, str], item: Stale) -> Onward:
    """Where a stale item goes (:func:`runner.rules.stages.onward`); one a person cancelled in flight at a stage
    gone fails cancelled (``cancel``), at the stage a retry sends it to; a sub-item whose fan-out is gone stays."""
    if not stages:
        return Onward("keep")
    by_a_person = item.kind in BY_A_PERSON
    to = onward(stages, fingerprints, json.loads(item.input), item.saved, state=item.state, at=item.stage,
                failed_by_a_person=by_a_person)
    if by_a_person and item.state in IN_FLIGHT and item.stage not in {stage.name for stage in stages}:
        return Onward("cancel", to.stage or item.stage)
    return to


def sent(job: Job, stage: Stage, items: Sequence[StartedItem]) -> protocol.BatchItems:
    """What a batch of ``stage`` sends: each item as stored, or, in a pipeline, the stage's fields of its state."""
    return protocol.BatchItems([reusing.sent(job, stage, item.key, item.input, item.results) for item in items])


def boundary(
    job: Job, work: StageWork, items: Sequence[StartedItem], settlement: Settlement, results: Mapping[int, Any]
) -> Settlement:
    """The settlement with where each completed item goes (a pipeline's: the next stage, pending there, or none:
    completed) and the fingerprint its results are saved with.

    ``results``: item id -> the stage's validated result (as read from the answer, or its saved output). Each
    completed item's work is saved with its result (:mod:`runner.reusing`).
    """
    by_id = {item.id: item for item in items}
    settlement.works = {i: reusing.work(work.fingerprint, reusing.sent(
        job, work.stage, by_id[i].key, by_id[i].input, by_id[i].results)) for i in settlement.completed}
    if not job.staged:  # one stage: its result is the item's output, as ever (no second copy in ``results``)
        return settlement
    settlement.fingerprint = work.fingerprint
    for item_id in list(settlement.completed):
        item = by_id[item_id]
        record, passed = json.loads(item.input), {**json.loads(item.results), work.stage.name: results[item_id]}
        if work.stage.fan_out:
            _fan_out(job, work.stage, item_id, settlement, record, passed)
            continue
        going = next_stage(job.stages, work.stage.name, state_of(record, passed))
        if going.stage is not None and job.stage(going.stage).kind != JOIN:  # a sub-item at its join: settled
            settlement.next_stage[item_id] = going.stage
        if going.skipped:
            settlement.skipped[item_id] = going.skipped
    return settlement


def _fan_out(job: Job, stage: Stage, item_id: int, settlement: Settlement, record: dict[str, Any],
             passed: dict[str, Any]) -> None:
    """An item completing a fan-out stage: waiting at its join with its sub-items, or failed past a guard."""
    fan = fanout.fanned(stage, record, passed)
    if isinstance(fan, str):
        settlement.completed.remove(item_id)
        settlement.failed[item_id] = (FailureKind.ITEM_INVALID, fan, True)
        return
    first, join = fanout.span(job.stages, stage.name)
    settlement.fan_out[item_id] = FanOut(stage.name, join, first, fan.inputs, fan.result)
