"""The commands of a run's queue (issue 19): which items go first."""

from __future__ import annotations

import time

import click

from .cli_options import db_option, plain_errors
from .cli_words import go_on
from .words import plural


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
