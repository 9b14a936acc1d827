"""The commands that read a run: ``status``, ``failures``, ``export`` and the terminal UI, ``tui``.

``status`` and ``failures`` print plain columns (:mod:`runner.tables`), not
rich's tables: they start in a fraction of the time (bench/cold_start.py).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import TYPE_CHECKING

import click

from .cli_options import db_option, json_option, plain_errors
from .cli_words import hint
from .location import named
from .model import ITEM_FAILURE_KINDS
from .words import command as spelt, duration, go_on, plural

if TYPE_CHECKING:
    from .budgets import BudgetView
    from .costs import Cost
    from .store import Store
    from .store.answers import Standing


@click.command()
@click.argument("name", required=False)
@db_option
@json_option
@plain_errors
def status(name: str | None, db: str, as_json: bool) -> None:
    """Show where a run stands (every run without NAME).

    It counts the items by state and group from the store, and shows the
    breaker, a pause, and the items held for a person (for a confirmation
    after a crash, or a decision at a decide stage).

    Example: runner status demo --json
    """
    from . import tables
    from .store import Store, views

    with Store(db, read_only=True) as store:
        standings = [views.standing(store, n, now=time.time()) for n in ([name] if name else store.run_names())]
        if as_json:
            statuses = [standing.status() for standing in standings]
            click.echo(json.dumps(statuses[0] if name else statuses, indent=2))
            return
        if not standings:
            click.echo(f"no runs in {named(db)}")
            return
        for index, standing in enumerate(standings):
            if index:
                click.echo()  # a blank line between two runs
            tables.echo(tables.status_table(standing))
            echo_cost(standing.cost, standing.budget)
            if standing.archived:
                hint(f"{plural(standing.archived, 'item')} archived (counted above); bring them back:",
                     spelt("restore", standing.name, "--all", db=db))
            if standing.held:
                tables.echo(tables.held_table(views.held(store, standing.name)))
                hint("release them (all, or the KEYS given):", spelt("confirm", standing.name, "--all", db=db))
            if standing.needs_decision:
                hint(f"{plural(standing.needs_decision, 'item waits', 'items wait')} for a person's decision; decide "
                     "(the KEYS given, or every one waiting; d in runner tui shows them):",
                     spelt("decide", standing.name, "--all-waiting", "--approve", db=db))
            if standing.duplicate_tasks:
                hint("they may have billed; see them:", spelt("failures", standing.name, db=db))
            if standing.expiring:
                _warn_expiring(store, standing, db)


def _warn_expiring(store: Store, standing: Standing, db: str) -> None:
    """Saved tasks whose results were not fetched and expire within a day: a run fetches them (no new charge)."""
    now = time.time()
    for task in standing.expiring:
        when = (f"expire in {duration(task.expires_at - now)}" if task.expires_at > now
                else f"may have expired {duration(now - task.expires_at)} ago")
        click.echo(f"warning: the results of task {task.task} ({plural(task.items, 'item')}, stage {task.stage}, "
                   f"group {task.group}) were not fetched and {when}")
    hint("fetch them now (a poll: no new charge):", go_on(store.job(standing.name), db))


@click.command()
@click.argument("name")
@click.option("--kind", type=click.Choice([kind.value for kind in ITEM_FAILURE_KINDS]),
              help="Every failed item of this kind, one a row.")
@db_option
@json_option
@plain_errors
def failures(name: str, kind: str | None, db: str, as_json: bool) -> None:
    """List a run's failed items with their reasons, by kind.

    Example: runner failures demo --kind item_invalid
    """
    from . import tables
    from .store import Store, views

    with Store(db, read_only=True) as store:
        failed = views.failures(store, name, kind=kind)
        duplicates = views.duplicates(store, store.run_id(name))
        staged = views.staged(store, store.run_id(name))
    if as_json:
        click.echo(json.dumps(failed, indent=2, ensure_ascii=False))
        return
    if kind is not None:
        if failed:
            tables.echo(tables.items_of_kind_table(name, kind, failed, staged=staged))
            click.echo(f"their calls: {tables.charges(failed)} (each item's: --json)")
            if note := tables.not_retryable_note(failed):
                click.echo(note)
        else:
            click.echo(f"no failed items of kind {kind!r} in run {name!r}")
        return
    if not failed and not duplicates:
        click.echo(f"no failed items in run {name!r}")
        return
    tables.echo(tables.failures_table(name, failed, staged=staged))
    if failed:
        click.echo(f"their calls: {tables.charges(failed)}")
        if note := tables.not_retryable_note(failed):
            click.echo(note)
    if len(failed) > 1:
        hint("every item of a kind:", spelt("failures", name, "--kind", failed[0]["kind"], db=db))
    for duplicate in duplicates:
        click.echo(f"{click.style('unknown charge:', fg='yellow')} batch {duplicate['batch_id']}: "
                   f"{tables.shown(duplicate['message'])}")


@click.command("export")
@click.argument("name")
@click.option("--format", "fmt", default="jsonl", show_default=True, help="jsonl, csv or parquet (needs pyarrow).")
@click.option("--out", default="-", show_default=True, help="The file to write; - is stdout.")
@click.option("--state", default="all", show_default=True, help="The items written: completed, failed or all.")
@click.option("--archived", is_flag=True, help="The items of the run's archive instead (runner archive).")
@db_option
@plain_errors
def export_items(name: str, fmt: str, out: str, state: str, archived: bool, db: str) -> None:
    """Write a run's items as JSONL, CSV or Parquet, one row each.

    A row holds the key, group, state, result fields and input sent; failed
    items carry kind, message, attempts and paid calls. CSV and Parquet
    flatten nested fields into dotted columns (input.title).

    Example: runner export demo --format csv --out demo.csv
    """
    from . import export
    from .store import Store

    with Store(db, read_only=True) as store:
        try:
            count = export.write(store, name, out, fmt=fmt, state=state, archived=archived)
        except BrokenPipeError:  # the reader stopped reading (| head): what it took was written
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return
        note = None if count else export.archive_note(store, name, archived=archived)
    if out != "-":
        click.echo(f"{plural(count, 'row')} of {name!r} written to {out}", err=True)
    if note:
        click.echo(f"no rows: {note}", err=True)


@click.command()
@click.argument("name", required=False)
@db_option
@plain_errors
def tui(name: str | None, db: str) -> None:
    """Watch and steer runs in a terminal UI (all runs without NAME).

    Example: runner tui demo
    """
    from .store import Store

    Store(db, read_only=True).close()
    from tui.app import run_tui  # the UI is imported only when asked for

    run_tui(db, name)


def echo_cost(cost: Cost, budget: BudgetView) -> None:
    """The cost line under a run's status, the budget beside it: the run's, then each stage's where there are
    several."""
    from . import budgets, costs

    click.echo(budgets.cost_line(cost, budget))
    if len(cost.stages) > 1:
        for name, stage in cost.stages.items():
            click.echo(f"  {name}: {costs.line(stage)}")
