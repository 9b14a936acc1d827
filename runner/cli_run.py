"""The commands that start work: ``runner demo``, ``runner run`` and the simulator, ``runner sim``.

Each imports the engine, the simulator and the store inside itself, so that
``runner --help`` and the light commands never load them.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from . import cli_words
from .cli_options import db_option, plain_errors, wait_option
from .errors import InputError, JobError, RunError, StoreError
from . import words
from .words import command as spelt

if TYPE_CHECKING:
    from .jobs import Job

SAMPLE_JOB = Path(__file__).resolve().parent.parent / "sample_data" / "job.toml"
SAMPLE_PIPELINE = SAMPLE_JOB.with_name("pipeline.toml")


@click.command()
@db_option
@click.option("--latency", default=0.05, show_default=True, help="Simulated seconds per call.")
@click.option("--pipeline", is_flag=True,
              help="Run the sample pipeline (sample_data/pipeline.toml: classify, extract, summarize) instead.")
@wait_option
@plain_errors
def demo(db: str, latency: float, pipeline: bool, wait: bool | None) -> None:
    """Run the sample job on a local simulator: no key, no network.

    With --pipeline, the sample pipeline (run 'pipeline'): each post is
    classified, bug reports and complaints have their version and steps
    extracted, a person reviews each post, then every approved one is
    summarized. It stops at the review (exit 4; --wait waits there instead)
    with the commands that decide, and says what each stage did; run it
    again once decided to go on.
    While it runs, `runner tui demo` (or `runner tui pipeline`) in another
    terminal can pause, step and resume it; in a terminal the demo waits for
    a person while paused.

    Example: runner demo --pipeline
    """
    sample = SAMPLE_PIPELINE if pipeline else SAMPLE_JOB
    if not sample.exists():
        raise JobError(f"{sample}: the sample job is missing; the demo runs from a source checkout (pip install -e .)")
    from . import jobs
    from .sim import Simulator
    from .store import Store, views
    from .terminal_run import run_in_terminal, waits

    job = jobs.load(sample)
    name = job.name if pipeline else "demo"
    store = Store(db)
    done = name in store.run_names() and not views.standing(store, name, now=time.time()).unfinished
    with Simulator(latency=latency, jitter=latency, seed=1).start() as sim:
        job = dataclasses.replace(job.with_provider(base_url=sim.base_url, api_key_env="", demo=True), name=name)
        # the pipeline stops at its review (a person decides there, at leisure) unless told to wait
        outcome = run_in_terminal(store, job, read_input=True, wait_for_person=bool(wait) if pipeline else waits(wait))
    if done:  # the engine calls for unfinished items only
        click.echo(f"Every item of run {name!r} was already done: no call was made.")
    if pipeline:
        cli_words.show_stages(views.stage_tallies(store, name))
        if outcome.status.get("needs_decision"):
            cli_words.hint("Once decided, the demo goes on from there:", spelt("demo", "--pipeline", db=db))
    cli_words.hint(f"Run {name!r} is in {db}; see it with:", spelt("status", name, db=db))
    cli_words.show_results(name, db)
    cli_words.show_demo_cost(job, views.standing(store, name, now=time.time()).cost)
    sys.exit(outcome.exit_code)


@click.command()
@click.argument("job_or_name")
@click.option("--at", "at", metavar="TIME", help="Send the items this run adds no sooner than TIME (ISO 8601 with an "
              "offset, epoch seconds, or in 10m, 2h, 1d), unless their record names a time ([schedule] field).")
@db_option
@wait_option
@plain_errors
def run(job_or_name: str, db: str, wait: bool | None, at: str | None) -> None:
    """Run a job file, or continue a run by name.

    Completed items are kept: running the same job again goes on. Exits 0
    when all completed, 3 with failed items, 4 when stopped for a person
    (paused, breaker open, confirmations pending), 1 on bad input. In a
    terminal it waits for a person instead of exiting 4 (--no-wait exits);
    in a script it exits 4 (--wait waits).

    Example: runner run sample_data/job.toml --at 2026-12-24T09:00:00Z
    """
    from . import jobs, lease
    from .store import Store, views
    from .location import is_new_file
    from .store.connection import remove_if_no_run
    from .terminal_run import run_in_terminal, waits

    if job_or_name.endswith(".toml"):
        job = jobs.load(job_or_name)
        if at is not None:
            from .job_queue import parse_time

            when = parse_time(at, "--at", now=time.time())
            job = dataclasses.replace(job, schedule=dataclasses.replace(job.schedule, at=when))
        job.input.require()  # before the store is opened: a missing input leaves no new store behind
        new = is_new_file(db)
        try:
            with Store(db) as store:
                read_at = store.input_unchanged_since(job, job.input.fingerprint())
                if read_at is not None and not views.engine_alive(store, job.name, now=time.time()):  # else it joins
                    click.echo(f"input unchanged since {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(read_at))}"
                               ", not read again", err=True)
                outcome = run_in_terminal(store, job, wait_for_person=waits(wait), read_input=read_at is None)
        except InputError:
            if new:  # nor does a bad one: the store it made holds no run
                remove_if_no_run(db)
            raise
    else:
        if at is not None:
            raise click.UsageError("--at schedules the items a job file adds: give the job file, not the run's name")
        store = Store(db, create=False)
        job = lease.job_once_made(store, job_or_name, now=time.time, sleep=time.sleep, waiting=lambda worker: (
            click.echo(f"run {job_or_name!r} is being set up by another worker (pid {worker.pid} on {worker.host}, "
                       "reading its input); this one joins it once the run is set up", err=True)))
        if job.provider.demo:  # its simulator stopped with the demo: every call would fail
            raise JobError(f"run {job.name!r} is runner demo's: its simulator stops with the demo; "
                           f"go on with: {words.go_on(job, db)}")
        outcome = run_in_terminal(store, job, wait_for_person=waits(wait), read_input=False)
    _apply_retention(db, job)
    _show_cost(db, job.name)
    sys.exit(outcome.exit_code)


def _show_cost(db: str, name: str) -> None:
    """The run's cost line, as ``runner status`` shows it under its table; a store that cannot be read then is a
    warning, not the run's failure."""
    from .cli_read import echo_cost
    from .store import Store
    from .store.cost_view import run_cost

    try:
        with Store(db, read_only=True) as store:
            echo_cost(*run_cost(store, store.run_id(name)))
    except StoreError as exc:  # the run's own outcome stands: its exit code is the run's
        click.echo(f"warning: its cost not read ({exc}); see it with: {spelt('status', name, db=db)}")


def _apply_retention(db: str, job: Job) -> None:
    """The job's ``[retention]`` applied once its run stopped, saying what it archived (nothing: no retention); a
    store that cannot be written then is a warning, not the run's failure."""
    from .archiving import at_run_end
    from .store import Store

    try:
        with Store(db, create=False) as store:
            said = at_run_end(store, job.name, job.retention, now=time.time())
    except StoreError as exc:  # the run's own outcome stands: its exit code is the run's
        said = f"warning: [retention] not applied ({exc}); it applies with: {spelt('archive', job.name, db=db)}"
    if said is not None:
        click.echo(said)


@click.command(epilog=cli_words.FAULTS)
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

    It answers chat completions and the Batch API as OpenAI does, Messages
    and Message Batches as Anthropic does (its base URL: the host, without
    /v1), and plays the faults of its plan (listed below). The plan can be changed while it
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
