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
kind (the default: its provider's), ``python`` (a function the notebook API
is given for the stage makes its calls: ``Run.from_job_file(...,
handlers={"extract": f})``; ``handler = "label"`` names it, for people and
for the stage's fingerprint, by default the stage's name), ``decide`` (a
person decides; no call) or ``join`` (see below), neither of which has the
sections of a call (``[stage.provider]``, ``prompt``, ``output``, ``batch``,
``retry``); a job needs a stage that calls (or a ``python`` one).

A fan-out (issue 17, seed 001's WeKnora count)::

    [[stage]]
    name = "split"
    fan_out = "chunks"          # each element of the result's list "chunks" becomes a sub-item
    max_fan_out = 1000          # guards, per item: more sub-items, or a bigger state (JSON bytes),
    max_state_bytes = 1000000   # fail the item (item_invalid)
    [[stage]]
    name = "summarize_chunk"    # the sub-items go through the stages up to the join
    [stage.prompt]
    fields = ["_chunk"]         # a sub-item's state is its parent's, plus its element under "_chunk"
    [[stage]]
    name = "gather"
    kind = "join"               # no call: the parent waits here for its sub-items
    allow_failures = true       # else one failed sub-item fails the parent (sub_item_failed)

A fan-out stage is followed by at least one stage, then its join; the stage
right after it takes every sub-item (no ``when``); a join has no ``when``;
fan-outs do not nest; a person's decision (``decide``) is not a stage of
sub-items. ``[batch] concurrency`` is the run's, shared by every stage: a stage
cannot set its own. A ``stage.field`` in ``fields`` or ``when`` names an
earlier stage. Every problem is one JobError naming the stage.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import batch_api, kinds, words
from .errors import JobError
from .job_queue import Cache
from .job_values import typed
from .rules.fanout import CHUNK
from .jobs import (
    DECIDE, JOIN, NO_CALL, PROVIDER_KINDS, PYTHON, SECTIONS, BatchLimits, Job, ProviderConfig, RetryLimits, Stage,
    _check_values, _output, _prompt_from_json, _refuse_unknown, _text, _value, file_keys,
)

STAGE_KEYS = ("name", "kind", "handler", "when", "provider", "prompt", "output", "batch", "retry", "cache", "fan_out",
              "max_fan_out", "max_state_bytes", "allow_failures")
#: A fan-out's keys, and a join's.
FAN_OUT_KEYS = ("fan_out", "max_fan_out", "max_state_bytes")
JOIN_KEYS = ("allow_failures",)
KEY_TYPES = {"fan_out": str, "max_fan_out": int, "max_state_bytes": int, "allow_failures": bool}
WHEN_KEYS = ("field", "in", "equals", "exists")
KINDS = (*PROVIDER_KINDS, PYTHON, *NO_CALL)
#: The export's own columns (``runner.export``), beside which each stage's result is a column of its own.
COLUMNS = ("key", "group", "state", "stage", "input", "kind", "message", "attempts", "paid_calls", "maybe_paid",
           "not_billed", "reused", "tokens_in", "tokens_out", "cost")


@dataclass(frozen=True)
class When:
    """Which items a stage takes: those whose state's ``field`` (``stage.field`` for a result) passes one test."""

    field: str
    #: The value must be one of these (None: not asked).
    in_: tuple[Any, ...] | None = None
    #: The value must equal this (``missing``: not asked).
    equals: Any = None
    #: Whether the value must be present (true) or absent (false); None: not asked.
    exists: bool | None = None
    #: ``equals`` was given (its value may be anything, even false).
    has_equals: bool = False



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
    _check_fan_outs(stages, where)
    return tuple(stages)


def _stage(job: Job, data: Mapping[str, Any], table: dict[str, Any], earlier: list[Stage], *, base: Path,
           where: str) -> Stage:
    _refuse_unknown(table, STAGE_KEYS, where)
    if "name" not in table:
        raise JobError(f"{where}: 'name' is required (a stage's result is saved under it)")
    name = _text(table, "name", where)
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
    for key in ("queue", "queue_priority"):
        if key in given["provider"]:
            raise JobError(f"{where} [stage.provider]: {key!r} is the run's, shared by every stage: "
                           "set it in [provider]")
    # A stage's batching starts from the keys [batch] gives, not from the top level's kind's defaults (a chat
    # stage of a job whose top level is the Batch API must not take 50,000 items a call).
    inherited = {**vars(job), "batch": _plain(job.batch, data.get("batch", {}))}
    sections = {section: _override(inherited[section], value, f"{where} [stage.{section}]")
                for section, value in given.items()}
    kind = _text(table, "kind", where) if "kind" in table else sections["provider"].kind
    if kind not in KINDS:
        raise JobError(f"{where}: {words.unknown('kind', kind, KINDS)}")
    unused = [section for section in (*SECTIONS, "output") if section in table]
    if kind in NO_CALL and unused:
        raise JobError(f"{where} [stage.{unused[0]}]: a stage of kind {kind!r} makes no call, so it has no "
                       f"[stage.{unused[0]}]")
    if kind not in NO_CALL:
        sections["provider"] = kinds.defaults(dataclasses.replace(sections["provider"], kind=kind), kind,
                                              given=[*data.get("provider", {}), *given["provider"]])
    sections["provider"] = dataclasses.replace(sections["provider"], handler=_handler(table, kind, name, where))
    sections["batch"] = batch_api.limits_for(
        kind, sections["batch"], given=[*data.get("batch", {}), *given["batch"]], where=f"{where} [stage.batch]")
    schema = _output(table["output"], base, f"{where} [stage.output]") if "output" in table else job.output_schema
    if "when" in table and not earlier:
        raise JobError(f"{where}: the first stage takes every item: it has no 'when'")
    stage = Stage(name, kind, output_schema=schema, when=_when(table.get("when"), earlier, where), **sections,
                  **_fan_keys(table, kind, where))
    _check_values(stage, where)
    _check_reads(stage, earlier, where)
    return stage


def _handler(table: dict[str, Any], kind: str, name: str, where: str) -> str:
    """A ``python`` stage's handler label: given, or the stage's name; no other stage has one."""
    if kind != PYTHON:
        if "handler" in table:
            raise JobError(f"{where}: 'handler' belongs on a stage of kind 'python' (its function, given from Python)")
        return ""
    label = _text(table, "handler", where) if "handler" in table else name
    if not label.isprintable():
        raise JobError(f"{where}: 'handler' must be printable (messages stay one line)")
    return label


def _plain(batch: BatchLimits, given: Mapping[str, Any]) -> BatchLimits:
    """The job's batching as ``[batch]`` gives it, every key it does not give at its default."""
    return dataclasses.replace(BatchLimits(), **{key: getattr(batch, key) for key in given})


def _fan_keys(table: dict[str, Any], kind: str, where: str) -> dict[str, Any]:
    """A stage's fan-out keys (a stage that calls) or join key (a join), each read as the type it wants."""
    fan = FAN_OUT_KEYS if kind not in NO_CALL else ()
    allowed = (*fan, *(JOIN_KEYS if kind == JOIN else ()))
    for key in (*FAN_OUT_KEYS, *JOIN_KEYS):
        if key in table and key not in allowed:
            raise JobError(f"{where}: {key!r} belongs on a {'join' if key in JOIN_KEYS else 'fan-out'} stage")
    if "fan_out" not in table and any(key in table for key in FAN_OUT_KEYS):
        raise JobError(f"{where}: 'max_fan_out' and 'max_state_bytes' go with 'fan_out'")
    keys = {key: typed(table[key], KEY_TYPES[key], key, where) for key in allowed if key in table}
    if "fan_out" in keys and (not keys["fan_out"] or "." in keys["fan_out"]):
        raise JobError(f"{where}: 'fan_out' must name a field of the stage's result (no '.')")
    for key in ("max_fan_out", "max_state_bytes"):
        if keys.get(key, 1) < 1:
            raise JobError(f"{where}: {key!r} must be at least 1")
    return keys


def _check_fan_outs(stages: list[Stage], where: str) -> None:
    """Each fan-out is followed by at least one stage, then its join; the stage after it takes every sub-item."""
    open_at: int | None = None
    for number, stage in enumerate(stages):
        here = f"{where} [[stage]] {number + 1} \"{stage.name}\""
        if stage.kind == JOIN:
            if open_at is None:
                raise JobError(f"{here}: a join comes after a stage with 'fan_out'")
            if number == open_at + 1:
                raise JobError(f"{here}: a join needs at least one stage between it and its fan-out")
            if stage.when is not None:
                raise JobError(f"{here}: a join has no 'when' (every parent of its fan-out waits there)")
            open_at = None
        elif stage.fan_out:
            if open_at is not None:
                raise JobError(f"{here}: fan-outs do not nest: join stage {stages[open_at].name!r}'s sub-items first")
            open_at = number
        elif open_at is not None and number == open_at + 1 and stage.when is not None:
            raise JobError(f"{here}: the stage after a fan-out takes every sub-item: it has no 'when'")
        elif open_at is not None and stage.kind == DECIDE:
            raise JobError(f"{here}: a person decides for an item, not for its sub-items: put the 'decide' stage "
                           f"before {stages[open_at].name!r} or after its join")
    if open_at is not None:
        raise JobError(f"{where}: stage {stages[open_at].name!r} fans out: a stage of kind 'join' must follow")


def _override(defaults: Any, value: dict[str, Any], where: str) -> Any:
    """A top-level section with a stage's keys put over it, each read as the type it wants."""
    _refuse_unknown(value, file_keys(type(defaults)), where)
    return dataclasses.replace(
        defaults, **{key: _value(getattr(defaults, key), given, key, where) for key, given in value.items()})


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
        exists=typed(value["exists"], bool, "exists", where) if "exists" in value else None,
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
    if name == CHUNK:  # a sub-item's element, whatever its shape
        return
    if name not in {stage.name for stage in earlier}:
        known = ", ".join(stage.name for stage in earlier) or "none"
        raise JobError(f"{where}: {field!r} reads stage {name!r}, which is not an earlier stage (earlier: {known})")


def from_json(data: dict[str, Any]) -> Stage:
    """A stage as the store keeps it in its run's job (``Job.to_json``)."""
    when = data["when"]
    return Stage(
        name=data["name"], kind=data["kind"], provider=ProviderConfig(**data["provider"]),
        prompt=_prompt_from_json(data["prompt"]), output_schema=data["output_schema"],
        batch=BatchLimits(**data["batch"]), retry=RetryLimits(**data["retry"]), cache=Cache(**data.get("cache", {})),
        when=None if when is None else When(**{**when, "in_": None if when["in_"] is None else tuple(when["in_"])}),
        **{key: data[key] for key in (*FAN_OUT_KEYS, *JOIN_KEYS) if key in data},
    )
