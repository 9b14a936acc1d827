"""``runner copy``: a run copied whole from one run store to another (issue 20), SQLite or PostgreSQL either way."""

from __future__ import annotations

import time
from pathlib import Path

import click

from .cli_options import plain_errors, store_location
from .cli_words import hint
from .errors import RunError
from .plurals import plural
from .words import command


@click.command()
@click.argument("name", required=False)
@click.option("--from", "source", required=True, type=store_location, metavar="PATH|URL",
              help="The store to copy from (read, never changed): a SQLite file or a PostgreSQL URL.")
@click.option("--to", "destination", required=True, type=store_location, metavar="PATH|URL",
              help="The store to copy to (made if new): a SQLite file or a PostgreSQL URL.")
@plain_errors
def copy(name: str | None, source: str, destination: str) -> None:
    """Copy a run whole to another store, SQLite or PostgreSQL.

    Every row of the run goes: items, inputs, results, decisions, events,
    batches, commands, ledger and archive. Without NAME, every run of the source, each in one transaction. The
    source stays as it was; the copy is numbered anew and continues with
    runner run NAME --db DEST (items held for a person stay held). Refused,
    with nothing written, while an engine works the run, or when the
    destination holds a run of that name.

    Example: runner copy --from runs.db --to postgresql://me@host/runs demo
    """
    from . import copying
    from .location import is_new_file
    from .store.connection import remove_if_no_run

    new = is_new_file(destination)
    copied: list[str] = []
    try:
        for run in copying.copy_runs(source, destination, name=name, clock=time.time):
            click.echo(copying.said(run, source, destination))
            copied.append(run.run)
    except BaseException as exc:
        if new and Path(destination).exists():  # a store file the copy made and left with no run goes with it
            remove_if_no_run(destination)
        if isinstance(exc, KeyboardInterrupt):
            raise RunError(f"stopped by Ctrl-C: {plural(len(copied), 'run')} copied; the one being copied was not "
                           "(a run is copied whole or not at all)") from None
        raise
    hint("the source keeps what was copied as it was; go on with the copy:",
         command("run", copied[0] if len(copied) == 1 else "NAME", db=destination))
