"""A pipeline's ``python`` stages: the functions given for them, checked before anything runs.

A job file's stage of kind ``python`` has its calls made by a function the
notebook API is given for it (``handlers={"extract": f}``), under the same
contract as a run's own Python handler (:mod:`runner.providers.handler`):
it receives a batch's payloads (its ``fields``, earlier stages' results
among them) and its results are judged, retried and validated as any
stage's. Given handlers, every python stage needs one and each names a
python stage: anything else is one :class:`~runner.errors.JobError` before
anything runs. Given none (``runner run``), the run goes through the other
stages and stops where its items reach a python stage (:func:`waiting`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from .errors import JobError
from .jobs import PYTHON, Job
from .model import UNFINISHED
from .words import python_go_on

T = TypeVar("T")


def names(job: Job) -> list[str]:
    """The job file's ``python`` stages, in order (none for a job without ``[[stage]]``)."""
    return [stage.name for stage in job.stages if stage.kind == PYTHON] if job.staged else []


def checked(job: Job, handlers: Mapping[str, T]) -> dict[str, T]:
    """``handlers`` by stage, each naming a python stage and every python stage given one (when any is given)."""
    wanted = names(job)
    if not handlers:
        return {}
    for name in handlers:
        if name not in {stage.name for stage in job.stages}:
            raise JobError(f"run {job.name!r} has no stage {name!r} to give a handler (its python stages: "
                           f"{_listed(wanted)})")
        if name not in wanted:
            raise JobError(f"stage {name!r} of run {job.name!r} is of kind {job.stage(name).kind!r}: a handler is "
                           f"given for a stage of kind 'python' only (its python stages: {_listed(wanted)})")
    missing = [name for name in wanted if name not in handlers]
    if missing:
        raise JobError(f"run {job.name!r}: python stage {', '.join(map(repr, missing))} given no handler: give one "
                       f"for each python stage, handlers={_handlers(wanted)}")
    return dict(handlers)


def single(job: Job, handler: T) -> dict[str, T]:
    """What one handler given for a pipeline means: its one python stage's; more or none is a JobError."""
    wanted = names(job)
    if len(wanted) == 1:
        return {wanted[0]: handler}
    if not wanted:
        raise JobError(f"run {job.name!r} has no stage of kind 'python' for a handler (its stages call their "
                       "providers; a stage of kind = \"python\" in the job file takes one)")
    raise JobError(f"run {job.name!r} has {len(wanted)} python stages ({_listed(wanted)}): give a handler for "
                   f"each, handlers={_handlers(wanted)}")


def waiting(job: Job, worked: Mapping[str, Any], stages: Mapping[str, Mapping[str, int]]) -> list[str]:
    """The python stages given no handler here (not in ``worked``) at which items wait, by the store's
    counts per stage and state (``stages``)."""
    return [name for name in names(job)
            if name not in worked and any(stages.get(name, {}).get(state) for state in UNFINISHED)]


def go_on(job: Job, db: str | Path, stages: list[str]) -> str:
    """Why the run stopped at its python ``stages``, and the notebook call that goes on with their handlers."""
    return (f"items wait at python stage {', '.join(map(repr, stages))} for a handler, given from Python: "
            f"{python_go_on(job, db, handlers=_handlers(names(job)))}")


def _listed(stages: list[str]) -> str:
    return ", ".join(stages) or "none"


def _handlers(stages: list[str]) -> str:
    """``{'extract': <its handler>}``: the argument that gives each python stage its function."""
    return "{" + ", ".join(f"{name!r}: <its handler>" for name in stages) + "}"
