"""A run copied whole from one run store to another (``runner copy``, issue 20): a SQLite file or a PostgreSQL
database on either side.

The source is opened read-only and never changed: the run stays there as it
was, and the copy is a run of its own that ``runner run NAME --db DEST``
continues (what was held for a person is held there too). Without a name,
every run of the source is copied, each in a transaction of its own. Refused
before anything is written, in one line: the same store on both sides, a
source that is no run store (or of a schema this runner does not read), a
run the source does not hold, one a live engine works in the source, one
the destination holds already.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from . import liveness
from .errors import RunError
from .location import named, same_store
from .store import Store
from .store.copying import CHUNK_ROWS, Copied, copy_run
from .words import plural


def copy_runs(
    source: str | Path, destination: str | Path, *, name: str | None = None, clock: Callable[[], float],
    chunk_rows: int = CHUNK_ROWS,
) -> Iterator[Copied]:
    """Copy the run ``name`` (None: every run) from the store at ``source`` to the one at ``destination`` (made if
    new), yielding each run once it is written there. Refusals (RunError, StoreError) come before the first."""
    if same_store(source, destination):
        raise RunError(f"--from and --to name the same store ({named(source)}); nothing was copied")
    with Store(source, read_only=True) as reading:
        names = chosen(reading, name)
        for each in names:
            refuse_engine(reading, each, now=clock())
        with Store(destination) as writing:
            there = sorted(set(names) & set(writing.run_names()))
            if there:
                raise RunError(f"run {there[0]!r} is in {named(destination)} already; nothing was copied")
            for each in names:
                refuse_engine(reading, each, now=clock())
                yield copy_run(reading, writing, each, chunk_rows=chunk_rows)


def chosen(store: Store, name: str | None) -> list[str]:
    """The runs to copy: ``name``, or every run of the store; refused when it holds no such run."""
    names = store.run_names()
    if not names:
        raise RunError(f"{named(store.path)} holds no run; nothing was copied")
    if name is None:
        return names
    if name not in names:
        raise RunError(f"no run {name!r} in {named(store.path)}: it holds {', '.join(names)}")
    return [name]


def refuse_engine(store: Store, name: str, *, now: float) -> None:
    """Refuse a run a live worker works (as ``runner status`` tells it): its rows change while they are read."""
    living = [worker for worker in store.workers(name) if liveness.lives(worker, now)]
    if living:
        first = living[0]
        raise RunError(
            f"run {name!r} is being run by an engine (pid {first.pid} on {first.host}, heartbeat "
            f"{now - first.heartbeat_at:.0f}s ago); stop it first, or wait {liveness.LEASE_SECONDS:.0f}s if it "
            "died; nothing was copied"
        )


def said(copied: Copied, source: str | Path, destination: str | Path) -> str:
    """One run's copy, in a line."""
    archived = f" ({copied.archived:,} of them archived)" if copied.archived else ""
    return (f"run {copied.run!r}: {plural(copied.items + copied.archived, 'item')}{archived}, "
            f"{plural(copied.batches, 'batch', 'batches')} and {plural(copied.events, 'event')} copied from {named(source)} "
            f"to {named(destination)}")
