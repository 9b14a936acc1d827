"""What the ``runner`` commands share: the ``--db``, ``--json`` and ``--wait`` options, and one-line errors.

Imported by ``runner --help``: it loads click and nothing of the store.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from .errors import RunnerError
from .location import SCHEMES
from .words import DEFAULT_DB

F = TypeVar("F", bound=Callable[..., Any])



def store_location(value: str) -> str:
    """``--db``: a PostgreSQL URL as it is, else a file's path (not a folder)."""
    if value.startswith(SCHEMES):
        return value
    return str(click.Path(dir_okay=False).convert(value, None, None))


db_option = click.option(
    "--db", default=DEFAULT_DB, show_default=True, type=store_location, metavar="PATH|URL", envvar="RUNNER_DB",
    show_envvar=True,
    help="The run store: a SQLite file, or a PostgreSQL URL (postgresql://user:password@host:port/dbname).",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print data as JSON.")
wait_option = click.option(
    "--wait/--no-wait", default=None,
    help="While paused, the breaker open or items held, wait for a person (resume, step, confirm) or exit 4. "
         "Default: wait in a terminal.",
)


def plain_errors(command: F) -> F:
    """Turn runner's errors into one line on stderr and exit code 1."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except RunnerError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(1)

    return wrapper  # type: ignore[return-value]
