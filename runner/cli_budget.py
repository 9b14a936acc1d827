"""``runner budget``: a person gives a run a new budget (issue 18's guard), and a run stopped at its budget goes on."""

from __future__ import annotations

import time

import click

from .cli_options import db_option, plain_errors
from .cli_words import go_on


@click.command()
@click.argument("name")
@click.option("--max", "max_cost", type=float, help="The most the run may commit to, in USD.")
@click.option("--max-tokens", type=int, help="The most tokens the run may commit to.")
@click.option("--none", "none", is_flag=True, help="Remove the budget (the job file's [budget] too).")
@db_option
@plain_errors
def budget(name: str, max_cost: float | None, max_tokens: int | None, none: bool, db: str) -> None:
    """Give a run a new budget, in USD or tokens, or none.

    A batch starts only while what was spent, the batches in flight and the
    unknown charges (at their estimates), and its own estimate, stay within
    it. A limit not given keeps its value. A run stopped at its budget goes
    on (a running engine goes on by itself). A budget below what the run
    has committed to is kept: the run stops before its next batch. A budget
    given here holds until the job file's [budget] changes.

    Example: runner budget demo --max 10
    """
    from . import control
    from .store import Store
    from .store.cost_view import run_cost

    store = Store(db, create=False)
    control.budget(store, name, now=time.time(), max_cost=max_cost, max_tokens=max_tokens, none=none)
    _, shown = run_cost(store, store.run_id(name))
    if shown.passed:
        click.echo(f"run {name!r}: {shown.given()}")
        return
    go_on(f"run {name!r}: {shown.given()}", store, name, engine="goes on within it")
