"""A person's decision at a ``decide`` stage: approve (with data) or reject, from the shell, the TUI or a notebook.

Each decision is one store transaction, logged, with or without an engine
running: an item waiting at the stage is decided at once (an approval saves
its data as the stage's result and sends it on to the next stage, or
completes it; a rejection fails it as ``rejected``, which ``runner retry
NAME --kind rejected`` sends back to wait at the stage); an item still
before the stage keeps the decision until it arrives there, when the engine
applies it at its next turn (:func:`apply_kept`). The rule is
:func:`runner.rules.deciding.plan`, over the run's job as the store saved it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .errors import RunError
from .jobs import DECIDE, Job
from .rules import deciding
from .rules.deciding import At, Plan
from .store.decisions import Decided, Planner
from .store.protocol import RunStore


def planner(job: Job) -> Planner:
    """The rule over ``job``'s stages, as the store asks it for each item."""

    def plan(at: At, approve: bool, data: Mapping[str, Any]) -> Plan:
        return deciding.plan(job.stages, at, approve=approve, data=data)

    return plan


def fingerprints(job: Job) -> dict[str, str]:
    """Each decide stage's fingerprint, saved with the results its decisions make."""
    return {stage.name: stage.fingerprint(job.version) for stage in job.stages if stage.kind == DECIDE}


def decide(
    store: RunStore, name: str, keys: Sequence[str] = (), *, approve: bool, data: Mapping[str, Any] | None = None,
    now: float,
) -> Decided:
    """Approve (with ``data``, the stage's result; default ``{}``) or reject items of run ``name``: the ``keys``
    given, or (none) every item waiting for a decision.

    A key the run does not have, or an item past its decide stage (or failed),
    refuses the whole decision (``RunError``), and nothing changes.
    """
    if data is not None and not isinstance(data, Mapping):
        raise RunError(f"data must be a mapping (a dict, saved as the stage's result), not {type(data).__name__}")
    job = store.job(name)
    if not any(stage.kind == DECIDE for stage in job.stages):
        raise RunError(f"run {name!r} has no decide stage: nothing to decide")
    return store.decide(store.run_id(name), keys, approve=approve, data=dict(data or {}), plan=planner(job),
                        fingerprints=fingerprints(job), now=now)


def apply_kept(store: RunStore, run_id: int, job: Job, *, now: float) -> int:
    """Apply the decisions kept for items that have since reached their decide stage; how many."""
    return store.apply_kept(run_id, plan=planner(job), fingerprints=fingerprints(job), now=now)


def kept_words(job: Job, kept: int = 1) -> str:
    """What happens to a decision kept for items not at their decide stage yet, in words: applied when they
    arrive, or, at a decide stage with a ``when``, only if they do (a ``when`` false drops it, in the run's log)."""
    maybe = [stage.name for stage in job.stages if stage.kind == DECIDE and stage.when is not None]
    if not maybe:
        return f"the decision is kept and applied when {'it arrives' if kept == 1 else 'they arrive'}"
    stages = " or ".join(f"stage {name}" for name in maybe)
    return (f"kept; applied if the item reaches {stages} (its when may skip it: the decision is then dropped, "
            "and the run's log says so)")


def parse_data(text: str | None) -> dict[str, Any]:
    """A decision's ``--data``: a JSON object (None: ``{}``); anything else raises ValueError, saying what it is."""
    if text is None:
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg} at character {exc.pos})") from exc
    if not isinstance(data, dict):
        raise ValueError(f"a JSON object {{...}} is wanted, not {type(data).__name__ if data is not None else 'null'}")
    return data
