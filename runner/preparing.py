"""Preparing a run: its whole input checked first, then its items added in chunks, under the engine's lease.

Bad input must leave the store untouched, and a million records must
neither sit in memory nor hold the store's write lock for minutes. So the
input is read twice: once to check it (:func:`runner.item_rows.check`), with
nothing written but the lease's heartbeat every ``BEAT_SECONDS``; then again
to add its items, ``chunk_rows`` at a time, each chunk one transaction of its
own that renews the lease (:meth:`~runner.store.additions.Additions.add_items`).
Other processes write between chunks; the run is marked prepared only by the
last chunk's transaction, so a prepare cut short is read again by the next
engine. An input file that changed between the two reads is refused (its
run stays unprepared): its fingerprint is compared before each chunk is
added, and a key found twice when added (the check found none) says so too.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterator
from typing import TypeVar

from . import item_rows, lease, revalidating
from .errors import InputChanged, RunError
from .inputs import Fingerprint
from .item_rows import ItemRow
from .jobs import Job
from .store.additions import Preparing
from .store.protocol import RunStore

T = TypeVar("T")

#: Items added in one transaction: well under a second of the write lock on a busy two-core machine.
CHUNK_ROWS = 5_000
#: Seconds between two heartbeats of the lease while the input is checked (well within ``LEASE_SECONDS``).
BEAT_SECONDS = 2.0


def prepare(
    store: RunStore, job: Job, *, lease_token: str, now: Callable[[], float], chunk_rows: int = CHUNK_ROWS,
    reading: Callable[[int], None] | None = None, adding: Callable[[int, int], None] | None = None,
) -> int:
    """Check the job's input, then add its items in chunks; the run's id. The engine holds the run's lease.

    ``reading`` is told how many records were checked so far; ``adding``, how
    many items were added so far, and of how many. ``now`` is the clock.
    """
    held = (job.name, lease_token)
    source = job.input.fingerprint()
    last_beat = now()

    def checked(count: int) -> None:
        nonlocal last_beat
        if now() - last_beat >= BEAT_SECONDS:
            last_beat = now()
            if not lease.beat(store, job.name, token=lease_token, now=last_beat):
                raise RunError(f"run {job.name!r} was taken over by another engine while its input was checked")
        if reading is not None:
            reading(count)

    total = item_rows.check(job, every=checked)
    _to_pipeline(store, job, now)
    given = revalidating.until_revalidated(store.job(job.name) if job.name in store.run_names() else None, job)
    preparing, added = Preparing(), 0
    read = chunks(item_rows.rows(job), chunk_rows)
    chunk = next(read, [])
    for following in read:
        unchanged(job, source)
        store.add_items(given, chunk, preparing, now=now(), lease=held)
        added += len(chunk)
        if adding is not None:
            adding(added, total)
        chunk = following
    unchanged(job, source)
    store.add_items(given, chunk, preparing, now=now(), lease=held, last=True, source=source)
    return preparing.run_id


def _to_pipeline(store: RunStore, job: Job, now: Callable[[], float]) -> None:
    """A run of one stage given ``[[stage]]`` tables: its items whose input is the same under the old job's
    rule take the pipeline's fingerprint in place (their input did not change), each completed one keeping
    its result as the first stage's when that stage asks what the old job asked (its fingerprint is the old
    stage's); the engine then sends each item through the stages it lacks (``stages.rewind``)."""
    if not job.staged or job.name not in store.run_names():
        return
    was = store.job(job.name)
    if was.staged:
        return
    before = dataclasses.replace(was, input=job.input)
    first = job.stages[0].fingerprint(job.version)
    kept = first if was.stages[0].fingerprint(was.version) == first else None
    for chunk in chunks(zip(item_rows.rows(before), item_rows.rows(job), strict=True), CHUNK_ROWS):
        store.to_pipeline(job.name, chunk, first=job.stages[0].name, kept=kept, now=now())


def unchanged(job: Job, source: Fingerprint | None) -> None:
    """Refuse an input file changed since it was checked, before a chunk read from it is added."""
    if job.input.fingerprint() != source:
        raise InputChanged(job.input.describe())


def chunks(rows: Iterator[T], size: int) -> Iterator[list[T]]:
    while chunk := list(itertools.islice(rows, size)):
        yield chunk
