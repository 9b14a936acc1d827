"""The ``runner`` command: one short function per command over the library.

A command imports what only it needs (the engine, the simulator, rich's
tables, the exporter) inside itself: ``--help``, ``status --json`` and the
other light commands start without loading them (tests/runner/test_cold_start.py).

Exit codes of ``runner run`` and ``runner demo``: 0 all completed, 3 ended
with failed items, 4 stopped for a person, 1 bad input or configuration (one
line on stderr, nothing lost), 2 usage.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from . import cli_words, control, recovery
from .cli_words import go_on, hint, rich_console, show_control, show_results
from .store import views
from .errors import InputError, JobError, RunError, RunnerError
from .model import FailureKind
from .store import Store
from .store.connection import remove_if_no_run
from .words import DEFAULT_DB, command as spelt, plural

SAMPLE_JOB = Path(__file__).resolve().parent.parent / "sample_data" / "job.toml"
F = TypeVar("F", bound=Callable[..., Any])

db_option = click.option(
    "--db", default=DEFAULT_DB, show_default=True, type=click.Path(dir_okay=False), help="The run store."
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


@click.group(cls=cli_words.Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="runner")
def main() -> None:
    """A recoverable job runner for costly calls, over one SQLite run store."""


@main.command()
@db_option
@click.option("--latency", default=0.05, show_default=True, help="Simulated seconds per call.")
@wait_option
@plain_errors
def demo(db: str, latency: float, wait: bool | None) -> None:
    """Run the sample job on a built-in simulator: no key, no network.

    While it runs, `runner tui demo` in another terminal can pause, step and
    resume it; in a terminal the demo waits for a person while paused.

    Example: runner demo
    """
    if not SAMPLE_JOB.exists():
        raise JobError(f"{SAMPLE_JOB}: the sample job is missing; the demo runs from a source checkout (pip install -e .)")
    from . import jobs
    from .sim import Simulator
    from .terminal_run import run_in_terminal, waits

    job = jobs.load(SAMPLE_JOB)
    with Simulator(latency=latency, jitter=latency, seed=1).start() as sim:
        provider = dataclasses.replace(job.provider, base_url=sim.base_url, api_key_env="")
        job = dataclasses.replace(job, name="demo", provider=provider)
        outcome = run_in_terminal(Store(db), job, read_input=True, wait_for_person=waits(wait))
    hint(f"Run 'demo' is in {db}; see it with:", spelt("status", "demo", db=db))
    show_results("demo", db)
    sys.exit(outcome.exit_code)


@main.command()
@click.argument("job_or_name")
@db_option
@wait_option
@plain_errors
def run(job_or_name: str, db: str, wait: bool | None) -> None:
    """Run a job file, or continue a run by name.

    Completed items are kept: running the same job again goes on. Exits 0
    when all completed, 3 with failed items, 4 when stopped for a person
    (paused, breaker open, confirmations pending), 1 on bad input. In a
    terminal it waits for a person instead of exiting 4 (--no-wait exits);
    in a script it exits 4 (--wait waits).

    Example: runner run sample_data/job.toml
    """
    from . import jobs
    from .terminal_run import run_in_terminal, waits

    if job_or_name.endswith(".toml"):
        job = jobs.load(job_or_name)
        job.input.require()  # before the store is opened: a missing input leaves no new store behind
        new = not Path(db).exists()
        try:
            with Store(db) as store:
                read_at = store.input_unchanged_since(job, job.input.fingerprint())
                if read_at is not None and not views.engine_alive(store, job.name, now=time.time()):  # else refused
                    click.echo(f"input unchanged since {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(read_at))}"
                               ", not read again", err=True)
                outcome = run_in_terminal(store, job, wait_for_person=waits(wait), read_input=read_at is None)
        except InputError:
            if new:  # nor does a bad one: the store it made holds no run
                remove_if_no_run(db)
            raise
    else:
        store = Store(db, create=False)
        outcome = run_in_terminal(store, store.job(job_or_name), wait_for_person=waits(wait), read_input=False)
    sys.exit(outcome.exit_code)


@main.command()
@click.argument("name", required=False)
@db_option
@json_option
@plain_errors
def status(name: str | None, db: str, as_json: bool) -> None:
    """Show where a run stands (every run without NAME).

    It counts the items by state and group from the store, and shows the
    breaker, a pause, and the items held for a person.

    Example: runner status demo --json
    """
    with Store(db, read_only=True) as store:
        standings = [views.standing(store, n, now=time.time()) for n in ([name] if name else store.run_names())]
        if as_json:
            statuses = [standing.status() for standing in standings]
            click.echo(json.dumps(statuses[0] if name else statuses, indent=2))
            return
        if not standings:
            click.echo(f"no runs in {db}")
            return
        from . import tables

        console = rich_console()
        for standing in standings:
            console.print(tables.status_table(standing))
            if standing.held:
                held = views.held_view(store, standing.name, now=time.time()).items
                console.print(tables.held_table(held))
                hint("release them (all, or the KEYS given):", spelt("confirm", standing.name, "--all", db=db))
            if standing.duplicate_tasks:
                hint("they may have billed; see them:", spelt("failures", standing.name, db=db))


@main.command()
@click.argument("name")
@db_option
@json_option
@plain_errors
def failures(name: str, db: str, as_json: bool) -> None:
    """List a run's failed items with their reasons, by kind.

    Example: runner failures demo --json
    """
    with Store(db, read_only=True) as store:
        failed = views.failures(store, name)
        duplicates = views.duplicates(store, store.run_id(name))
    if as_json:
        click.echo(json.dumps(failed, indent=2, ensure_ascii=False))
        return
    if not failed and not duplicates:
        click.echo(f"no failed items in run {name!r}")
        return
    from rich.markup import escape

    from . import tables

    console = rich_console()
    console.print(tables.failures_table(name, failed))
    for duplicate in duplicates:
        console.print(f"[yellow]unknown charge:[/] batch {duplicate['batch_id']}: {escape(duplicate['message'])}")


@main.command()
@click.argument("name")
@db_option
@plain_errors
def pause(name: str, db: str) -> None:
    """Pause a run: no new batch starts; those in flight finish.

    Example: runner pause demo
    """
    show_control(name, control.pause(Store(db, create=False), name, now=time.time()))


@main.command()
@click.argument("name")
@db_option
@plain_errors
def resume(name: str, db: str) -> None:
    """Lift a pause or an open breaker, one batch at a time at first.

    The run goes on one batch at a time until one succeeds. On a run neither
    paused nor open it changes nothing, says so and exits 1.

    Example: runner resume demo
    """
    show_control(name, control.resume(Store(db, create=False), name, now=time.time()))


@main.command()
@click.argument("name")
@db_option
@plain_errors
def step(name: str, db: str) -> None:
    """Let exactly one batch run on a paused run; it stays paused.

    Example: runner step demo
    """
    show_control(name, control.step(Store(db, create=False), name, now=time.time()))


@main.command()
@click.argument("name")
@click.argument("keys", nargs=-1)
@click.option("--kind", type=click.Choice([k.value for k in FailureKind]), help="Only failures of this kind.")
@db_option
@plain_errors
def retry(name: str, keys: tuple[str, ...], kind: str | None, db: str) -> None:
    """Send failed items again, each with a fresh attempt budget.

    All of them, one kind, or the KEYS given. Each retry of an item the upstream already answered is a paid call. A key
    the run does not have is named, and nothing changes (exit 1).

    Example: runner retry demo --kind transport
    """
    store = Store(db, create=False)
    count = control.retry(store, name, now=time.time(), kind=kind, keys=keys)
    if not count:
        chosen = f" of kind {kind}" if kind else (" among the KEYS given" if keys else "")
        click.echo(f"nothing to retry: run {name!r} has no failed item{chosen}")
        return
    go_on(f"{plural(count, 'failed item')} of run {name!r} pending again", store, name)


@main.command()
@click.argument("name")
@click.argument("keys", nargs=-1)
@click.option("--all", "everything", is_flag=True, help="Release every held item.")
@click.option("--yes", is_flag=True, help="Do not ask (for scripts); without a terminal it is required.")
@db_option
@plain_errors
def confirm(name: str, keys: tuple[str, ...], everything: bool, yes: bool, db: str) -> None:
    """Release held items after a crash, saying first what each does.

    All of them, or the KEYS given; it asks first (y/N). Items whose task id
    was saved are polled (no new charge); the others are sent again, and may
    run and charge twice. `runner status NAME` lists them.

    Example: runner confirm demo --all
    """
    if everything == bool(keys):
        raise click.UsageError("give either --all or the KEYS to release")
    store = Store(db, create=False)
    if not yes:
        _ask_to_confirm(store, name, keys)
    released = recovery.confirm(store, name, now=time.time(), keys=keys)
    if not any(released.values()):
        chosen = " among the KEYS given" if keys else ""
        click.echo(f"nothing to release: no item of run {name!r} is held for confirmation{chosen}")
        return
    for case, count in released.items():
        if count:
            click.echo(f"{plural(count, 'item')}: {case.warning}")
    go_on(f"released {plural(sum(released.values()), 'item')}", store, name)


@main.command("export")
@click.argument("name")
@click.option("--format", "fmt", default="jsonl", show_default=True, help="jsonl, csv or parquet (needs pyarrow).")
@click.option("--out", default="-", show_default=True, help="The file to write; - is stdout.")
@click.option("--state", default="all", show_default=True, help="The items written: completed, failed or all.")
@db_option
@plain_errors
def export_items(name: str, fmt: str, out: str, state: str, db: str) -> None:
    """Write a run's items as JSONL, CSV or Parquet, one row each.

    A row holds the key, group, state, result fields and input sent; failed
    items carry kind, message, attempts and paid calls. CSV and Parquet
    flatten nested fields into dotted columns (input.title).

    Example: runner export demo --format csv --out demo.csv
    """
    from . import export

    with Store(db, read_only=True) as store:
        try:
            count = export.write(store, name, out, fmt=fmt, state=state)
        except BrokenPipeError:  # the reader stopped reading (| head): what it took was written
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return
    if out != "-":
        click.echo(f"{plural(count, 'row')} of {name!r} written to {out}", err=True)


@main.command()
@click.argument("name", required=False)
@db_option
@plain_errors
def tui(name: str | None, db: str) -> None:
    """Watch and steer runs in a terminal UI (every run without NAME).

    Example: runner tui demo
    """
    Store(db, read_only=True).close()
    from tui.app import run_tui  # the UI is imported only when asked for

    run_tui(db, name)


@main.command(epilog=cli_words.FAULTS)
@click.option("--port", default=8765, show_default=True, help="Port on 127.0.0.1 (0: any free one).")
@click.option("--latency", default=0.2, show_default=True, help="Seconds per call.")
@click.option("--jitter", default=0.1, show_default=True, help="Up to this many more seconds, at random.")
@click.option("--seed", default=0, show_default=True, help="Seed for every random choice.")
@click.option("--faults", "plan", help="A fault plan: JSON text or a JSON file (below).")
@click.option("--api-key", help="Accept only this key (default: any key, or none).")
@click.option("--batch-seconds", default=5.0, show_default=True, help="How long a Batch API batch runs.")
@plain_errors
def sim(
    port: int, latency: float, jitter: float, seed: int, plan: str | None, api_key: str | None, batch_seconds: float
) -> None:
    """Serve a simulated LLM upstream on 127.0.0.1 until Ctrl-C.

    It answers chat completions and the Batch API as OpenAI does, and plays
    the faults of its plan (listed below). The plan can be changed while it
    runs: PUT /_sim/faults. Its clock can be moved forward: POST /_sim/clock
    {"advance": seconds}.

    Example: runner sim --faults '{"rules": [{"fault": "drop", "rate": 0.2}]}'
    """
    from .sim import Simulator, load_plan

    try:
        faults = load_plan(plan) if plan else None
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--faults") from exc
    try:
        simulator = Simulator(
            port=port, latency=latency, jitter=jitter, seed=seed, faults=faults, api_key=api_key,
            batch_seconds=batch_seconds,
        )
    except OSError as exc:
        raise RunError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror} (is a simulator running there? "
                       "--port chooses another)") from exc
    click.echo(f"simulator on {simulator.base_url} (ledger: GET /_sim/ledger); Ctrl-C stops it")
    try:
        simulator.serve_forever()
    except KeyboardInterrupt:
        pass


def _ask_to_confirm(store: Store, name: str, keys: tuple[str, ...]) -> None:
    """Show the held items chosen, with what confirming each case does, and ask (y/N); only a yes returns."""
    store.refuse_unknown(store.run_id(name), keys)
    held = [item for item in views.held(store, name) if not keys or item.key in keys]
    if not held:
        return  # nothing to release: nothing to ask
    if not sys.stdin.isatty():
        raise RunError(f"runner confirm asks before it releases held items; in a script add --yes: "
                       f"{spelt('confirm', name, *(keys or ['--all']), '--yes', db=store.path)}")
    for case in recovery.Case:
        chosen = [item.key for item in held if item.case is case]
        if chosen:
            shown = ", ".join(chosen[:5]) + (f" and {len(chosen) - 5} more" if len(chosen) > 5 else "")
            click.echo(f"{case.value}: {len(chosen)} ({shown}): {case.warning}")
    if not click.confirm(f"release {plural(len(held), 'held item')} of {name!r}?", default=False):
        raise RunError("nothing was released")
