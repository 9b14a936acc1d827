"""The commands of a run's queue (issue 19): which items go first, and more items for it."""

from __future__ import annotations

import time
from pathlib import Path

import click

from .cli_options import db_option, plain_errors
from .cli_words import go_on
from .words import few, plural, scheduled_for


@click.command()
@click.argument("name")
@click.argument("keys", nargs=-1)
@click.option("--to", "to", type=int, required=True, help="The priority to give (higher first; items start at 0).")
@click.option("--group", help="The items of this group (with KEYS: those of them in it).")
@db_option
@plain_errors
def prioritize(name: str, keys: tuple[str, ...], to: int, group: str | None, db: str) -> None:
    """Give items a priority: the highest are sent first.

    Name the items by their KEYS, by --group, or both. The engine reads it
    when it forms its next batch (a batch already formed keeps its items).
    A key the run does not have is named, and nothing changes (exit 1).

    Example: runner prioritize demo p017 p042 --to 10
    """
    from . import control
    from .store import Store

    store = Store(db, create=False)
    count = control.prioritize(store, name, to=to, now=time.time(), keys=keys, group=group)
    go_on(f"{plural(count, 'item')} of run {name!r} at priority {to}", store, name)


@click.command()
@click.argument("name")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--at", "at", metavar="TIME", help="Send the added items no sooner than TIME (ISO 8601 with an offset, "
              "epoch seconds, or in 10m, 2h, 1d), unless their record names a time ([schedule] field).")
@db_option
@plain_errors
def add(name: str, file: Path, at: str | None, db: str) -> None:
    """Add the records of FILE (JSONL or CSV) to the run NAME.

    They are read as the run's input is (its key, group and fields) and
    checked whole before anything is added. A key the run already has is
    skipped and its item left as it is: adding the same file again adds
    nothing. The run's job and input file are not changed.

    Example: runner add demo late-posts.jsonl --at 2026-12-24T09:00:00Z
    """
    from . import adding
    from .job_queue import parse_time
    from .store import Store

    now = time.time()
    when = None if at is None else parse_time(at, "--at", now=now)
    store = Store(db, create=False)
    done = adding.add(store, name, file, at=when, now=now)
    said = f"added {plural(done.added, 'item')} to run {name!r}"
    if done.added and when is not None and when > now:
        said += f", {scheduled_for(when, now=now)}"
    if done.skipped:
        said += (f"; skipped {plural(done.skipped, 'key')} the run already has, their items left as they are: "
                 f"{few(done.first_skipped, total=done.skipped)}")
    go_on(said, store, name)
