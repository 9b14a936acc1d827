"""What an engine holds per stage: how the stage is worked, what it sends, and where its items go next.

A stage's ``kind`` says how it is worked: a provider that calls
(``openai-chat``, a Python handler) gives it a ``caller``, one that submits
and polls (``openai-batch``, a Python submit/poll pair) a ``tasks`` driver;
``decide`` (a person's decision, no call) is not worked by the engine yet
(:func:`refuse_unworkable`). Batches are formed per stage and group, later
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
from typing import Any

from .. import protocol
from ..errors import JobError
from ..jobs import DECIDE, Job, Stage
from ..model import Claim, ItemState, Settlement, StartedItem
from ..providers import Provider, SizedTasks, TaskProvider
from ..busy import StoreSteps
from ..clock import Clock
from ..rules.stages import next_stage, resume_at, sent_fields, state_of
from ..store.protocol import RunStore
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


def refuse_unworkable(job: Job) -> None:
    """A stage the engine cannot work yet (``decide``) is a JobError before anything is sent."""
    for stage in job.stages:
        if stage.kind == DECIDE:
            raise JobError(f"job {job.name!r}: stage {stage.name!r} is of kind 'decide', which runner does not "
                           "run yet (a person's decision comes with issue 17's next part)")


def works_of(job: Job, providers: Mapping[str, Provider | TaskProvider]) -> dict[str, StageWork]:
    """Each stage's work, its provider from ``providers`` by stage name."""
    works = {}
    for stage in job.stages:
        provider = providers[stage.name]
        works[stage.name] = StageWork(
            stage, provider, ResultCheck(stage.output_schema, job.check), stage.fingerprint(job.version),
            file=provider.sizing() if isinstance(provider, SizedTasks) else None,
        )
    return works


def claims(works: Mapping[str, StageWork], job: Job) -> list[Claim]:
    """The stages to form batches of, in the order asked: later stages first (a job without ``[[stage]]``: its
    one stage, whatever its items are labelled)."""
    return [Claim(stage.name if job.staged else None, stage.batch.max_items, stage.batch.max_chars,
                  works[stage.name].file) for stage in reversed(job.stages)]


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


def rewind(store: RunStore, run_id: int, job: Job, works: Mapping[str, StageWork], *, now: float) -> dict[str, int]:
    """Send each item whose results do not stand for the stages now to the first stage it must go through again
    (:func:`~runner.rules.stages.resume_at`: a result missing, as for a stage added or a ``when`` widened, or
    stale): only that stage's calls, and those after it, are made again. An item pending or waiting at a stage
    the job no longer has goes on to the next stage it lacks, or completes; one failed after a stale result
    stays failed, at the stage a person's retry must send it from. Returns how many items went back to
    each stage (not those only moved on)."""
    if not job.staged:  # one stage: a changed prompt changes the items' own fingerprint (input_changed)
        return {}
    fingerprints = {name: work.fingerprint for name, work in works.items()}
    order = [stage.name for stage in job.stages]
    moves: dict[int, str] = {}
    done: dict[int, str] = {}
    failed: dict[int, str] = {}
    rewound = Counter[str]()
    for item in store.stale_items(run_id, [(name, fingerprints[name]) for name in order]):
        again = resume_at(job.stages, fingerprints, json.loads(item.input), item.saved)
        completed = item.state == ItemState.COMPLETED
        if item.state == ItemState.FAILED:  # a person's retry sends it, from before the stale result
            if again is not None and item.stage in order and order.index(again) < order.index(item.stage):
                failed[item.id] = again
        elif again is None:
            if not completed or item.stage not in order:
                done[item.id] = _last_passed(order, item.saved)
        elif completed or again != item.stage:
            moves[item.id] = again
            if completed or again in item.saved or item.stage in order and order.index(again) < order.index(
                    item.stage):
                rewound[again] += 1
    if moves or done or failed:
        store.rewind(moves, order, now=now, done=done, failed=failed)
    return dict(rewound)


def _last_passed(order: Sequence[str], saved: Mapping[str, Any]) -> str:
    """The last of the stages an item has a result of (the first stage, for none): where it completes."""
    return next((name for name in reversed(order) if name in saved), order[0])


def sent(job: Job, stage: Stage, items: Sequence[StartedItem]) -> protocol.BatchItems:
    """What a batch of ``stage`` sends: each item as stored, or, in a pipeline, the stage's fields of its state."""
    if not job.staged:
        return protocol.BatchItems([item.input for item in items])
    payloads = []
    for item in items:
        record, results = json.loads(item.input), json.loads(item.results)
        payloads.append(protocol.item_payload(
            item.key, sent_fields(stage.prompt.fields, state_of(record, results), results)))
    return protocol.BatchItems.of(payloads)


def boundary(
    job: Job, work: StageWork, items: Sequence[StartedItem], settlement: Settlement, results: Mapping[int, Any]
) -> Settlement:
    """The settlement with where each completed item goes (a pipeline's: the next stage, pending there, or none:
    completed) and the fingerprint its results are saved with.

    ``results``: item id -> the stage's validated result (as read from the answer, or its saved output).
    """
    if not job.staged:  # one stage: its result is the item's output, as ever (no second copy in ``results``)
        return settlement
    settlement.fingerprint = work.fingerprint
    by_id = {item.id: item for item in items}
    for item_id in settlement.completed:
        item = by_id[item_id]
        passed = {**json.loads(item.results), work.stage.name: results[item_id]}
        going = next_stage(job.stages, work.stage.name, state_of(json.loads(item.input), passed))
        if going.stage is not None:
            settlement.next_stage[item_id] = going.stage
        if going.skipped:
            settlement.skipped[item_id] = going.skipped
    return settlement
