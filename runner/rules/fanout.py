"""Fan-out and join: pure rules over an item's result and its sub-items' ends.

A stage with ``fan_out = "chunks"`` makes each element of its result's list
``chunks`` a sub-item; the sub-items go through the stages up to the join,
where their parent waits (:func:`span`).

- :func:`fanned`: an item's fan-out (each sub-item's input: the parent's,
  with its element under ``_chunk``; the result the sub-items keep: the
  fan-out stage's, its list left out), or why the item fails instead: the
  list missing, more elements than ``max_fan_out``, or a state (input and
  results, as JSON) over ``max_state_bytes``;
- :func:`joined`: a parent's join, once every sub-item settled: its result
  ``{"results": [...], "failed": [...]}`` (each sub-item's last result in
  order, None for a failed one; the failed ones' ``key``, ``kind`` and
  ``message``), and why the parent fails (``sub_item_failed``) when a
  sub-item failed and the join does not ``allow_failures``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Protocol, TypeVar

#: A sub-item's element of its parent's list, in its state.
CHUNK = "_chunk"


class Spanning(Protocol):
    """A stage as :func:`inside` reads it: its name, kind and what it fans out."""

    @property
    def name(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def fan_out(self) -> str: ...


class Fanning(Spanning, Protocol):
    """A stage as these rules read it (:class:`runner.jobs.Stage`)."""

    @property
    def max_fan_out(self) -> int: ...
    @property
    def max_state_bytes(self) -> int: ...
    @property
    def allow_failures(self) -> bool: ...


class Fan(NamedTuple):
    """An item's fan-out: each sub-item's input (JSON), and the fan-out stage's result the sub-items keep (JSON)."""

    inputs: tuple[str, ...]
    result: str


class Settled(NamedTuple):
    """A settled sub-item's end: its key, state (``completed`` or ``failed``), last result, failure."""

    key: str
    state: str
    output: str | None
    kind: str | None
    message: str | None


def span(stages: Sequence[Fanning], fan_stage: str) -> tuple[str, str]:
    """The stage a fan-out's sub-items start at, and its join stage."""
    names = [stage.name for stage in stages]
    at = names.index(fan_stage)
    join = next(stage.name for stage in stages[at + 1:] if stage.kind == "join")
    return names[at + 1], join


def inside(stages: Sequence[Spanning], name: str) -> bool:
    """Whether stage ``name`` lies between a fan-out and its join: only sub-items reach it."""
    open_fan = False
    for stage in stages:
        if stage.name == name:
            return open_fan and stage.kind != "join"
        open_fan = bool(stage.fan_out) or (open_fan and stage.kind != "join")
    return False


S = TypeVar("S", bound=Fanning)


def sub_item_stages(stages: Sequence[S], saved: Mapping[str, Any]) -> list[S]:
    """The stages a sub-item goes through, as a re-run reads them: those of its parent it has a result of (its
    state so far), then those inside its fan-out (the last fan-out stage it has a result of) up to its join;
    none when the job no longer fans out where it came from."""
    fans = [stage.name for stage in stages if stage.fan_out and stage.name in saved]
    if not fans:
        return []
    at = [stage.name for stage in stages].index(fans[-1])
    span = stages[at + 1:]
    end = next((n for n, stage in enumerate(span) if stage.kind == "join"), len(span))
    return [stage for stage in stages[:at + 1] if stage.name in saved] + list(span[:end])


def fan_out_stands(stages: Sequence[Fanning], saved: Mapping[str, Any], *, to: str | None) -> bool:
    """Whether an item a re-run moves to stage ``to`` (None: completed where it is) keeps its fan-out's sub-items:
    it keeps the result of a fan-out stage of the job, the last it has, and goes on after it."""
    names = [stage.name for stage in stages]
    fans = [stage.name for stage in stages if stage.fan_out and stage.name in saved]
    return bool(fans) and (to is None or names.index(to) > names.index(fans[-1]))


def fanned(stage: Fanning, record: Mapping[str, Any], results: Mapping[str, Any]) -> Fan | str:
    """An item's fan-out at ``stage`` (``results`` has the stage's own), or the message its failure gives."""
    result = results[stage.name]
    chunks = result.get(stage.fan_out) if isinstance(result, dict) else None
    if not isinstance(chunks, list):
        return f"stage {stage.name!r} fans out its result's {stage.fan_out!r}, which is not a list"
    if len(chunks) > stage.max_fan_out:
        return f"fans out to {len(chunks):,} sub-items, over max_fan_out ({stage.max_fan_out:,})"
    size = len(json.dumps({**record, **results}, ensure_ascii=False).encode())
    if size > stage.max_state_bytes:
        return f"its state is {size:,} bytes, over max_state_bytes ({stage.max_state_bytes:,})"
    kept = {field: value for field, value in result.items() if field != stage.fan_out}
    inputs = tuple(json.dumps({**record, CHUNK: chunk}, ensure_ascii=False) for chunk in chunks)
    return Fan(inputs, json.dumps(kept, ensure_ascii=False))


def joined(join: Fanning, subs: Sequence[Settled]) -> tuple[dict[str, Any], str | None]:
    """A parent's join over its settled sub-items, in order: its result, and why it fails (None: it does not)."""
    failed = [{"key": sub.key, "kind": sub.kind, "message": sub.message} for sub in subs if sub.state == "failed"]
    result = {"results": [None if sub.state == "failed" or sub.output is None else json.loads(sub.output)
                          for sub in subs], "failed": failed}
    if not failed or join.allow_failures:
        return result, None
    first = failed[0]
    return result, (f"{len(failed)} of {len(subs)} sub-items failed (first: {first['key']}, {first['kind']}: "
                    f"{first['message']}); allow_failures = true in stage {join.name!r} would join without them")
