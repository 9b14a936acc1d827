"""A job file's ``[[stage]]`` tables: each stage the top-level sections, overridden key by key.

::

    [[stage]]
    name = "extract"
    when = { field = "classify.label", in = ["bug", "complaint"] }
    [stage.prompt]
    instructions = "Extract the app version."
    fields = ["title", "body", "classify.label"]      # earlier results are fields too

A stage's name is unique, not empty, printable (messages stay one line),
has no ``.`` (``stage.field`` reads a result) and no ``"``, does not start
with ``_`` (reserved) and is not a column of the export (``COLUMNS``:
``message``, ...); the first stage takes
every item (no ``when``). ``kind`` is a provider
kind (the default: its provider's) or ``decide`` (a person decides; no
call); a job needs a stage that calls. ``[batch] concurrency`` is the run's, shared by every stage: a stage
cannot set its own. A ``stage.field`` in ``fields`` or ``when`` names an
earlier stage. Every problem is one JobError naming the stage.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from . import batch_api, kinds, words
from .errors import JobError
from .jobs import (
    DECIDE, PROVIDER_KINDS, SECTIONS, BatchLimits, Job, ProviderConfig, RetryLimits, Stage, When, _check_values,
    _output, _prompt_from_json, _refuse_unknown, _text, _typed, file_keys,
)

STAGE_KEYS = ("name", "kind", "when", "provider", "prompt", "output", "batch", "retry")
WHEN_KEYS = ("field", "in", "equals", "exists")
KINDS = (*PROVIDER_KINDS, DECIDE)
#: The export's own columns (``runner.export``), beside which each stage's result is a column of its own.
COLUMNS = ("key", "group", "state", "stage", "input", "kind", "message", "attempts", "paid_calls", "maybe_paid")


def read(job: Job, data: Mapping[str, Any], *, base: Path, where: str) -> tuple[Stage, ...]:
    """The job file's stages, in order, each resolved against ``job``'s top-level sections."""
    tables = data["stage"]
    if not isinstance(tables, list) or not tables or not all(isinstance(t, dict) for t in tables):
        raise JobError(f"{where}: 'stage' must be one or more [[stage]] tables")
    stages: list[Stage] = []
    for number, table in enumerate(tables, 1):
        # JSON's quoting: a name that is refused for a newline in it is named on one line
        named = json.dumps(table["name"], ensure_ascii=False) if isinstance(table.get("name"), str) else "(no name)"
        stages.append(_stage(job, data, table, stages, base=base, where=f"{where} [[stage]] {number} {named}"))
    if all(stage.kind == DECIDE for stage in stages):
        raise JobError(f"{where}: every stage is of kind 'decide': a job needs a stage that calls")
    return tuple(stages)


def _stage(job: Job, data: Mapping[str, Any], table: dict[str, Any], earlier: list[Stage], *, base: Path,
           where: str) -> Stage:
    _refuse_unknown(table, STAGE_KEYS, where)
    name = _text(table, "name", where) if "name" in table else ""
    if not name or name.startswith("_") or "." in name or '"' in name or not name.isprintable():
        raise JobError(f"{where}: 'name' must be a name, printable, without '.' or '\"', not starting with '_' "
                       "(reserved)")
    if name in COLUMNS:
        raise JobError(f"{where}: stage {name!r} has the name of a column of the export (rename the stage; taken: "
                       f"{', '.join(COLUMNS)})")
    if name in {stage.name for stage in earlier}:
        raise JobError(f"{where}: stage {name!r} is named twice")
    given = {section: table.get(section, {}) for section in SECTIONS}
    for section, value in given.items():
        if not isinstance(value, dict):
            raise JobError(f"{where} [stage.{section}]: must be a table")
    if "concurrency" in given["batch"]:
        raise JobError(f"{where} [stage.batch]: 'concurrency' is the run's, shared by every stage: set it in [batch]")
    # A stage's batching starts from the keys [batch] gives, not from the top level's kind's defaults (a chat
    # stage of a job whose top level is the Batch API must not take 50,000 items a call).
    inherited = {**vars(job), "batch": _plain(job.batch, data.get("batch", {}))}
    sections = {section: _override(inherited[section], value, f"{where} [stage.{section}]")
                for section, value in given.items()}
    kind = _text(table, "kind", where) if "kind" in table else sections["provider"].kind
    if kind not in KINDS:
        raise JobError(f"{where}: {words.unknown('kind', kind, KINDS)}")
    if kind != DECIDE:
        sections["provider"] = kinds.defaults(dataclasses.replace(sections["provider"], kind=kind), kind,
                                              given=[*data.get("provider", {}), *given["provider"]])
    sections["batch"] = batch_api.limits_for(
        kind, sections["batch"], given=[*data.get("batch", {}), *given["batch"]], where=f"{where} [stage.batch]")
    schema = _output(table["output"], base, f"{where} [stage.output]") if "output" in table else job.output_schema
    if "when" in table and not earlier:
        raise JobError(f"{where}: the first stage takes every item: it has no 'when'")
    stage = Stage(name, kind, output_schema=schema, when=_when(table.get("when"), earlier, where), **sections)
    _check_values(stage, where)
    _check_reads(stage, earlier, where)
    return stage


def _plain(batch: BatchLimits, given: Mapping[str, Any]) -> BatchLimits:
    """The job's batching as ``[batch]`` gives it, every key it does not give at its default."""
    return dataclasses.replace(BatchLimits(), **{key: getattr(batch, key) for key in given})


def _override(defaults: Any, value: dict[str, Any], where: str) -> Any:
    """A top-level section with a stage's keys put over it, each read as the type it wants."""
    _refuse_unknown(value, file_keys(type(defaults)), where)
    return dataclasses.replace(
        defaults, **{key: _typed(given, type(getattr(defaults, key)), key, where) for key, given in value.items()})


def _when(value: Any, earlier: list[Stage], where: str) -> When | None:
    if value is None:
        return None
    where = f"{where} when"
    if not isinstance(value, dict):
        raise JobError(f"{where}: must be a table {{ field, in | equals | exists }}")
    _refuse_unknown(value, WHEN_KEYS, where)
    field = _text(value, "field", where) if "field" in value else ""
    tests = [key for key in ("in", "equals", "exists") if key in value]
    if not field or len(tests) != 1:
        raise JobError(f"{where}: give a 'field' and one of 'in', 'equals' or 'exists'")
    _check_path(field, earlier, where)
    if "in" in value and not (isinstance(value["in"], list) and value["in"]):
        raise JobError(f"{where}: 'in' must be a list of one value or more")
    for key in ("in", "equals"):
        if key in value and not _is_json(value[key]):
            raise JobError(f"{where}: {key!r} must be strings, numbers, true or false (lists and tables of them), "
                           "not a date or time")
    return When(
        field, in_=tuple(value["in"]) if "in" in value else None, equals=value.get("equals"),
        exists=_typed(value["exists"], bool, "exists", where) if "exists" in value else None,
        has_equals="equals" in value,
    )


def _is_json(value: Any) -> bool:
    """A value the store can keep in its job's JSON: no TOML date or time, no inf or nan."""
    if isinstance(value, list):
        return all(_is_json(v) for v in value)
    if isinstance(value, dict):
        return all(_is_json(v) for v in value.values())
    return isinstance(value, (str, int, bool)) or isinstance(value, float) and math.isfinite(value)


def _check_reads(stage: Stage, earlier: list[Stage], where: str) -> None:
    for field in stage.prompt.fields:
        _check_path(field, earlier, f"{where} [stage.prompt] fields")


def _check_path(field: str, earlier: list[Stage], where: str) -> None:
    """A dotted name reads an earlier stage's result: that stage must come before."""
    if "." not in field:
        return
    if not all(field.split(".")):
        raise JobError(f"{where}: {field!r} is not a path (stage.field, each part named)")
    name = field.split(".", 1)[0]
    if name not in {stage.name for stage in earlier}:
        known = ", ".join(stage.name for stage in earlier) or "none"
        raise JobError(f"{where}: {field!r} reads stage {name!r}, which is not an earlier stage (earlier: {known})")


def from_json(data: dict[str, Any]) -> Stage:
    """A stage as the store keeps it in its run's job (``Job.to_json``)."""
    when = data["when"]
    return Stage(
        name=data["name"], kind=data["kind"], provider=ProviderConfig(**data["provider"]),
        prompt=_prompt_from_json(data["prompt"]), output_schema=data["output_schema"],
        batch=BatchLimits(**data["batch"]), retry=RetryLimits(**data["retry"]),
        when=None if when is None else When(**{**when, "in_": None if when["in_"] is None else tuple(when["in_"])}),
    )
