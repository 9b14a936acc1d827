"""A job's input as the store's item rows: the whole input checked first, then read again as rows.

:func:`check` reads every record once and checks its key and group, and
that no key comes twice (remembered compactly, in a :class:`KeySet`), so
that bad input is refused before the store is touched; :func:`rows` then
streams the rows to add, in chunks of the caller's choosing. Neither keeps
more than one record in memory. :func:`items` does both, for a small input.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from . import job_queue, protocol
from .errors import InputError
from .inputs import read_records
from .key_set import KeySet

if TYPE_CHECKING:
    from .jobs import Job

#: The group of every item of a job that names no group field.
DEFAULT_GROUP = "all"
#: Records read between two calls of a reader's ``every``.
EVERY = 500


class ItemRow(NamedTuple):
    """One input record as the store keeps it (a tuple: a million are made in a prepare)."""

    key: str
    group: str
    seq: int
    input: str
    chars: int
    fingerprint: str
    #: Its priority (``[batch] priority_field``, higher first) and the time its input schedules it at
    #: (``[schedule] field``, seconds since the epoch; None: at once).
    priority: int = 0
    at: float | None = None


def check(job: Job, *, every: Callable[[int], None] | None = None) -> int:
    """Read the whole input and check it; how many records it has.

    The first problem, in the input's order, is an InputError naming the
    file and line (both lines for a duplicate key); an input without records
    is one too. ``every`` is told how many records so far, every ``EVERY``.
    """
    keys = KeySet()
    count = 0
    for count, (where, record) in enumerate(read_records(job.input), 1):
        key = _field(record, job.key, where)
        if not keys.add(key) and (first := _first(job, key, where)) is not None:
            source = job.input.describe()
            raise InputError(f"{source}: duplicate key {key!r}, on {first.removeprefix(source + ' ')} "
                             f"and on {where.removeprefix(source + ' ')}")
        if job.group:
            _field(record, job.group, where)
        _queue_fields(job, record, where)
        if job.staged:
            _no_stage_named_like_a_field(job, record, where)
        if every is not None and count % EVERY == 0:
            every(count)
    if not count:
        raise InputError(f"{job.input.describe()}: no records")
    return count


def _no_stage_named_like_a_field(job: Job, record: Mapping[str, Any], where: str) -> None:
    """A stage named like an input field would make ``stage.field`` in ``fields`` and ``when`` mean two things."""
    both = sorted({stage.name for stage in job.stages} & set(record))
    if both:
        raise InputError(f"{where}: field {both[0]!r} has the name of a stage (rename the stage)")


def _queue_fields(job: Job, record: Mapping[str, Any], where: str) -> tuple[int, float | None]:
    """The record's priority and scheduled time, as the job's ``[batch] priority_field`` and ``[schedule] field``
    name them (0 and None when it names none); a bad value is an InputError naming the record and the field."""
    priority = job_queue.priority(record, job.batch.priority_field, where) if job.batch.priority_field else 0
    return priority, job_queue.send_at(record, job.schedule.field, where) if job.schedule.field else None


def _first(job: Job, key: str, again: str) -> str | None:
    """Where ``key`` came before ``again``; None when no record did (another key only shares its hash)."""
    for where, record in read_records(job.input):
        if where == again:
            return None
        if _field(record, job.key, where) == key:
            return where
    return None


def rows(job: Job) -> Iterator[ItemRow]:
    """The job's items, in input order, as the store keeps them; the input was checked (``check``)."""
    # A pipeline's items keep their whole record, each stage picking its fields as it sends (its own fingerprint
    # hashes its model and prompt): only the record and the job's version make the item's.
    context = protocol.encode([job.version] if job.staged else [
        job.provider.model, job.prompt.system, job.prompt.template, job.prompt.instructions, job.version])
    # Every fingerprint hashes the context first: hashed once, its state copied for each item.
    hashed_context = hashlib.sha256(f"{context}\n".encode())
    for seq, (where, record) in enumerate(read_records(job.input)):
        key = _field(record, job.key, where)
        group = _field(record, job.group, where) if job.group else DEFAULT_GROUP
        fields = {f: record.get(f) for f in job.prompt.fields} if job.prompt.fields and not job.staged else record
        text = protocol.encode(protocol.item_payload(key, fields))
        digest = hashed_context.copy()
        digest.update(text.encode())
        priority, at = _queue_fields(job, record, where)
        if at is not None:  # a new time is a new input, whichever fields the prompt sends
            digest.update(f"\nat {at!r}".encode())
        yield ItemRow(key, group, seq, text, len(text), digest.hexdigest(), priority, at)


def items(job: Job) -> Iterator[ItemRow]:
    """Every item of a job's input, the whole input checked before the first is given."""
    check(job)
    yield from rows(job)


def _field(record: Mapping[str, Any], name: str, where: str) -> str:
    """A key or group value as text: ``2026`` and ``2026.0`` are both ``"2026"``."""
    value = record.get(name)
    if value is None or value == "":
        fields = ", ".join(map(str, record)) or "none"
        raise InputError(f"{where}: no value for field {name!r} (fields: {fields})")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str):
        return value
    if isinstance(value, (bool, dict, list)):
        return protocol.encode(value)
    return str(value)
