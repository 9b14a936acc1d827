"""The commands of a run's archive (issue 19): ``runner archive`` moves finished items in, ``runner restore`` out."""

from __future__ import annotations

import time

import click

from .cli_options import db_option, plain_errors
from .cli_words import hint
from .errors import RunError
from .retention import FINISHED
from .words import plural


@click.command()
@click.argument("name")
@click.option("--older", metavar="AGE", help="Items finished longer ago than AGE: 30d, 12h, 90m "
              "(default: the job's [retention]).")
@click.option("--state", type=click.Choice(FINISHED), help="Items of this state alone (default: both).")
@click.option("--vacuum", is_flag=True, help="Then shrink the store file, saying its size before and after.")
@db_option
@plain_errors
def archive(name: str, older: str | None, state: str | None, vacuum: bool, db: str) -> None:
    """Move a run's finished items, whole, to its archive.

    Completed and failed items go (never an unfinished one), with their
    input, results, history and charges; the run's counts, calls and cost
    stay as they were, and status counts them as archived. A run never sends
    an archived item again; runner restore brings it back. Without --older
    or --state, the job's [retention] says how old each state's items must be.
    Each chunk of items is one transaction: other writers go on between them.

    Example: runner archive demo --older 30d --state completed --vacuum
    """
    from . import archiving, retention
    from .store import Store

    if older is not None:
        retention.seconds(older, "--older")
    with Store(db, create=False) as store:
        ages = retention.ages(store.job(name).retention, older=older, state=state)
        if not ages:
            raise RunError(f"run {name!r}: its job has no [retention]; say which items: --older AGE or --state")
        moved = archiving.archive(store, name, ages=ages, now=time.time())
        click.echo(archiving.said(name, moved, ages, "--older" if older else "--state" if state else "[retention]"))
        if vacuum:
            size = store.file_size()
            store.vacuum()
            click.echo(f"store file {_mb(size)} before the vacuum, {_mb(store.file_size())} after")
        elif sum(moved.values()):
            hint("the file keeps its size until a vacuum (it rewrites the file, holding the store meanwhile):",
                 archiving.vacuum_command(name, older=older, state=state, db=db))


@click.command()
@click.argument("name")
@click.argument("keys", nargs=-1)
@click.option("--all", "every", is_flag=True, help="Every archived item of the run.")
@db_option
@plain_errors
def restore(name: str, keys: tuple[str, ...], every: bool, db: str) -> None:
    """Bring archived items back into their run, each as it was.

    Name the items by their KEYS (a sub-item brings its parent's whole
    fan-out), or --all. A key the archive does not hold is named, and
    nothing comes back (exit 1).

    Example: runner restore demo p017 p042
    """
    from . import archiving
    from .store import Store

    if bool(keys) == every:
        raise click.UsageError("name the items to restore: KEYS, or --all")
    with Store(db, create=False) as store:
        count = archiving.restore(store, name, keys=None if every else keys, now=time.time())
    click.echo(f"{plural(count, 'item')} of run {name!r} restored from its archive")


def _mb(size: int) -> str:
    """A file size as a person reads it: ``1.2 MB``, ``48 KB``."""
    return f"{size / 1e6:.1f} MB" if size >= 1e6 else f"{size / 1e3:.0f} KB"
