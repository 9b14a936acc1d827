"""The commands of queues (issue 19): which items of a run go first, more items for a run, and the shared
queues runs take turns in."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from .cli_options import db_option, json_option, plain_errors
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
    go_on(said, store, name, engine="takes them" if done.added else None)


@click.group()
def queue() -> None:
    """Shared queues: one limit, rate limit and breaker for runs.

    Every run naming a queue ([provider] queue) shares its concurrency
    limit, the quiet time a 429 asks for, and its breaker.

    Example: runner queue set openai-main --concurrency 8
    """


@queue.command(name="set")
@click.argument("name")
@click.option("--concurrency", type=int, required=True, help="Batches in flight at most, all its runs together.")
@db_option
@plain_errors
def set_queue(name: str, concurrency: int, db: str) -> None:
    """Set a shared queue's limit (made if no run named it yet).

    Engines of its runs read it before their next start. Without this, a
    queue takes the [batch] concurrency of the first run that names it.

    Example: runner queue set openai-main --concurrency 8
    """
    from . import control
    from .store import Store

    with Store(db, create=False) as store:
        control.set_queue(store, name, concurrency=concurrency)
    click.echo(f"queue {name}: at most {plural(concurrency, 'batch', 'batches')} in flight, all its runs together")


@queue.command(name="list")
@db_option
@json_option
@plain_errors
def list_queues(db: str, as_json: bool) -> None:
    """List the shared queues and what each run holds of them.

    Per queue its limit, breaker and a 429's quiet time; per run its
    priority, its batches in flight and those waiting for a slot.

    Example: runner queue list --json
    """
    from . import tables
    from .store import Store

    with Store(db, read_only=True) as store:
        found = store.queues()
    if as_json:
        click.echo(json.dumps(found, indent=2))
    elif not found:
        click.echo(f"no shared queues in {db} (a run names one with [provider] queue)")
    for shared in [] if as_json else found:
        tables.echo(tables.queue_table(shared, now=time.time()))


@queue.command(name="resume")
@click.argument("name")
@db_option
@plain_errors
def resume_queue(name: str, db: str) -> None:
    """Lift a shared queue's open breaker, one batch at a time at first.

    One batch at a time, all its runs together, until one succeeds.

    Example: runner queue resume openai-main
    """
    from . import control
    from .store import Store

    with Store(db, create=False) as store:
        now = control.resume_queue(store, name)
    click.echo(f"queue {name}: breaker {now.breaker.value} ({now.reason})")
