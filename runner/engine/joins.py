"""The engine's joins: each parent whose sub-items have all settled joined, on every turn of the loop.

A sub-item's last move counts its parent down in the store, in that move's
transaction (:mod:`runner.store.fanout`); the parent waits at its join stage
until the engine's next turn reads it (``joinable``), asks the rule how it
ends (:func:`runner.rules.fanout.joined`, then the next stage over its state
with the join's result) and has the store make that end in one transaction.
A crash in between loses nothing: the parent is read again on the next start.
"""

from __future__ import annotations

import json

from ..jobs import JOIN, Job
from ..rules import fanout
from ..rules.stages import next_stage, state_of
from ..store.fanout import Joined, Parent
from ..store.protocol import RunStore


def join(store: RunStore, run_id: int, job: Job, *, now: float) -> int:
    """Join every parent of the run whose sub-items have all settled; how many."""
    stages = [stage.name for stage in job.stages if stage.kind == JOIN]
    parents = store.joinable(run_id, stages) if stages else []
    if parents:
        store.join([end_of(job, parent) for parent in parents], now=now)
    return len(parents)


def end_of(job: Job, parent: Parent) -> Joined:
    """How a parent's join ends: its result and next stage (None: completed), or why it fails."""
    stage = job.stage(parent.stage)
    result, failure = fanout.joined(stage, parent.subs)
    if failure is not None:
        return Joined(parent.id, stage.name, "", "", None, failure)
    state = state_of(json.loads(parent.input), {**parent.results, stage.name: result})
    going = next_stage(job.stages, stage.name, state)
    return Joined(parent.id, stage.name, json.dumps(result, ensure_ascii=False), stage.fingerprint(job.version),
                  going.stage, skipped=going.skipped)
