"""Where an item goes between stages: a pure rule over its state.

An item's **state** is its input fields plus ``{stage name: result}`` of the
stages it passed. A stage's ``when`` (``field`` with ``in``, ``equals`` or
``exists``) reads that state; ``field`` is an input field, or
``stage.field`` for a path into an earlier stage's result. A stage whose
``when`` is false is skipped: it saves no result. Values compare as JSON
does, except that ``true`` and ``false`` are never the numbers 1 and 0;
``exists`` takes a null for absent (a result's field that is null was not
found), and a path through a non-object finds nothing. A fan-out stage
skipped takes the stages up to its join, and the join, with it: they are its
sub-items' (there are none), and the item goes on after the join.

- :func:`next_stage`: after a stage completes, the next stage whose ``when``
  holds (None: past the last), and the stages skipped on the way (each with
  the fan-out it was skipped with, if any: :class:`runner.model.Skip`);
- :func:`resume_at`: on a run started again with changed stages, the first
  stage whose result is missing or stale (its fingerprint changed), or None
  when every stage the item goes through has a fresh result;
- :func:`onward`: where an item whose results may not stand goes on a
  re-run (:class:`Onward`); :func:`from_gone_stage`, one left at a stage
  the job no longer has;
- :func:`sent_fields`: what a stage sends of the state, each field under
  its own (dotted) name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from ..model import ItemState, Skip

#: A missing value (a field absent, a path through a non-object).
MISSING: Any = object()


class Test(Protocol):
    """A stage's ``when`` (:class:`runner.jobs.When`)."""

    @property
    def field(self) -> str: ...
    @property
    def in_(self) -> tuple[Any, ...] | None: ...
    @property
    def equals(self) -> Any: ...
    @property
    def exists(self) -> bool | None: ...
    @property
    def has_equals(self) -> bool: ...


class StageLike(Protocol):
    """A stage as these rules read it (:class:`runner.jobs.Stage`)."""

    @property
    def name(self) -> str: ...
    @property
    def when(self) -> Test | None: ...
    @property
    def kind(self) -> str: ...
    @property
    def fan_out(self) -> str: ...


class Next(NamedTuple):
    """Where an item goes after a stage: the next stage (None: completed) and the stages it skips on the way."""

    stage: str | None
    skipped: tuple[Skip, ...] = ()


def state_of(record: Mapping[str, Any], results: Mapping[str, Any]) -> dict[str, Any]:
    """An item's state: its input fields, and each passed stage's result under the stage's name."""
    return {**record, **results}


def value_at(state: Mapping[str, Any], field: str) -> Any:
    """The state's value of an input field, or of ``stage.path`` inside a result; MISSING when there is none."""
    if field in state:
        return state[field]
    head, _, rest = field.partition(".")
    value: Any = state.get(head, MISSING)
    for part in rest.split(".") if rest else []:
        value = value.get(part, MISSING) if isinstance(value, dict) else MISSING
    return value


def holds(when: Test | None, state: Mapping[str, Any]) -> bool:
    """Whether a stage's ``when`` lets an item in (no ``when``: always)."""
    if when is None:
        return True
    value = value_at(state, when.field)
    if when.exists is not None:
        return (value is not MISSING and value is not None) == when.exists
    if when.has_equals:
        return value is not MISSING and _same(value, when.equals)
    return value is not MISSING and when.in_ is not None and _scalar(value) and any(
        _same(value, listed) for listed in when.in_)


def _same(value: Any, wanted: Any) -> bool:
    """Equal as JSON values: true is not 1, false is not 0 (Python's ``==`` says they are)."""
    return isinstance(value, bool) == isinstance(wanted, bool) and value == wanted


def _scalar(value: Any) -> bool:
    return not isinstance(value, (dict, list))


def next_stage(stages: Sequence[StageLike], after: str, state: Mapping[str, Any]) -> Next:
    """The stage an item goes to once ``after`` completed, skipping those whose ``when`` is false."""
    names = [stage.name for stage in stages]
    skipped: list[Skip] = []
    at = names.index(after) + 1
    while at < len(stages):
        if holds(stages[at].when, state):
            return Next(names[at], tuple(skipped))
        through = _through(stages, at)
        skipped.extend([Skip(names[at]), *(Skip(name, names[at]) for name in names[at + 1:through + 1])])
        at = through + 1
    return Next(None, tuple(skipped))


def _through(stages: Sequence[StageLike], at: int) -> int:
    """The last of the stages skipped with the stage at ``at``: a fan-out's join (the stages up to it are its
    sub-items', and an item that does not fan out has none), else that stage alone."""
    if not stages[at].fan_out:
        return at
    return next((n for n in range(at + 1, len(stages)) if stages[n].kind == "join"), len(stages) - 1)


def resume_at(
    stages: Sequence[StageLike], fingerprints: Mapping[str, str], record: Mapping[str, Any],
    saved: Mapping[str, tuple[Any, str]],
) -> str | None:
    """The first stage an item must go through again: its result missing or saved under another fingerprint.

    ``fingerprints``: each stage's now; ``saved``: stage -> (result, fingerprint) as the store keeps them.
    Stages whose ``when`` is false for the state so far are passed over (a fan-out's with its stages up to its
    join); None: every result stands.
    """
    results: dict[str, Any] = {}
    at = 0
    while at < len(stages):
        stage = stages[at]
        if not holds(stage.when, state_of(record, results)):
            at = _through(stages, at) + 1
            continue
        kept = saved.get(stage.name)
        if kept is None or kept[1] != fingerprints[stage.name]:
            return stage.name
        results[stage.name] = kept[0]
        at += 1
    return None


class Onward(NamedTuple):
    """Where an item whose results may not stand goes, as a re-run starts.

    ``move``: ``rewind`` (pending at ``stage``, a fresh budget), ``restage``
    (failed still, at ``stage``: a failure stands, and a person's retry
    sends it there), ``finish`` (completed, at ``stage``: the last it passed)
    or ``keep`` (left as it is).
    """

    move: str
    stage: str | None = None


def onward(
    stages: Sequence[StageLike], fingerprints: Mapping[str, str], record: Mapping[str, Any],
    saved: Mapping[str, tuple[Any, str]], *, state: str, at: str, failed_by_a_person: bool,
) -> Onward:
    """Where an item at stage ``at`` in ``state`` goes (at a stage gone: :func:`from_gone_stage`): to the first
    stage whose result it lacks or holds stale (:func:`resume_at`), when it is completed or that is not where it
    stands; failed, it stays failed, moved back to that stage when it comes before its own (a person's retry
    then sends it from there, not on from a stale result); pending or waiting at a stage it no longer needs,
    every stage it needs done, it completes."""
    names = [stage.name for stage in stages]
    if at not in names:
        return from_gone_stage(stages, fingerprints, record, saved, failed_by_a_person=failed_by_a_person)
    again = resume_at(stages, fingerprints, record, saved)
    if again is None:
        done = state in (ItemState.COMPLETED, ItemState.FAILED)
        return Onward("keep") if done else Onward("finish", _last_passed(stages, saved))
    if state == ItemState.FAILED:
        return Onward("restage", again) if names.index(again) < names.index(at) else Onward("keep")
    return Onward("rewind", again) if state == ItemState.COMPLETED or again != at else Onward("keep")


def from_gone_stage(
    stages: Sequence[StageLike], fingerprints: Mapping[str, str], record: Mapping[str, Any],
    saved: Mapping[str, tuple[Any, str]], *, failed_by_a_person: bool,
) -> Onward:
    """Where an item at a stage gone goes: on to the first stage it needs again (:func:`resume_at`), whatever it
    was doing at the stage gone (waiting, answered, held, failed: that stage's call no longer matters), or
    completed when every stage it needs has its result. An item a person failed (cancelled, rejected) stays
    failed, at the stage a retry would send it to."""
    again = resume_at(stages, fingerprints, record, saved)
    if failed_by_a_person:
        return Onward("restage", again) if again is not None else Onward("keep")
    if again is not None:
        return Onward("rewind", again)
    return Onward("finish", _last_passed(stages, saved))


def _last_passed(stages: Sequence[StageLike], saved: Mapping[str, Any]) -> str:
    """The last of the stages an item has a result of: where it completes."""
    return [stage.name for stage in stages if stage.name in saved][-1]


def sent_fields(fields: Sequence[str], state: Mapping[str, Any], results: Mapping[str, Any]) -> dict[str, Any]:
    """What a stage sends: its ``fields`` of the state, each under its name (``classify.label`` as such);
    without ``fields``, the input fields (``state`` without the results)."""
    if not fields:
        return {key: value for key, value in state.items() if key not in results}
    return {field: None if (value := value_at(state, field)) is MISSING else value for field in fields}
