"""A person's hand on a run from the shell: ``pause``, ``resume``, ``step``, ``retry``, ``confirm``, ``cancel``
and ``decide``.

Each opens the store, calls one function of :mod:`runner.control`,
:mod:`runner.recovery` or :mod:`runner.deciding`, and says what changed and how to go on.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

import click

from .cli_options import db_option, plain_errors
from .cli_words import go_on, hint, show_control
from .errors import RunError, UnknownStage
from .model import ITEM_FAILURE_KINDS, FailureKind
from .words import command as spelt, few, go_on as go_on_command, plural, retried

if TYPE_CHECKING:
    from .store import Store


def _steering(verb: str, about: str) -> click.Command:
    """``runner VERB NAME``: ``control.VERB`` on the run, then how it stands; ``about`` is its help."""

    @click.command(verb, help=about)
    @click.argument("name")
    @db_option
    @plain_errors
    def command(name: str, db: str) -> None:
        from . import control
        from .store import Store

        show_control(name, getattr(control, verb)(Store(db, create=False), name, now=time.time()))

    return command


pause = _steering("pause", """Pause a run: no new batch starts; those in flight finish.

    Example: runner pause demo
    """)
resume = _steering("resume", """Lift a pause or an open breaker, one batch at a time at first.

    The run goes on one batch at a time until one succeeds. On a run neither
    paused nor open it changes nothing, says so and exits 1.

    Example: runner resume demo
    """)
step = _steering("step", """Let exactly one batch run on a paused run; it stays paused.

    Example: runner step demo
    """)


@click.command()
@click.argument("name")
@click.argument("keys", nargs=-1)
@click.option("--kind", type=click.Choice([k.value for k in ITEM_FAILURE_KINDS]), help="Only failures of this kind.")
@click.option("--stage", help="Only items that failed at this stage (of a job with [[stage]] tables).")
@click.option("--yes", is_flag=True, help="Do not ask (for scripts); without a terminal it is required when some "
                                          "items may be billed again.")
@db_option
@plain_errors
def retry(name: str, keys: tuple[str, ...], kind: str | None, stage: str | None, yes: bool, db: str) -> None:
    """Send failed items again, each with a fresh attempt budget.

    All of them, one kind, those failed at one --stage, or the KEYS given.
    Each is sent again at the stage where it failed; the results of the
    stages before it are kept. Items a person cancelled (kind cancelled) are
    left alone unless named: by --kind cancelled or by their KEYS. The plan
    is shown first: the items charge-safe (refused, never run) and those
    that may be billed again (answered before, or sent with the answer
    lost), each with its estimated cost; when some may be billed again it
    asks (y/N, or --yes). A key the run does not have is named, and nothing
    changes (exit 1); so is a stage it does not have, with the stages it
    has (exit 2).

    Example: runner retry demo --kind transport
    """
    from . import control
    from .store import Store, rerun_plans

    store = Store(db, create=False)
    try:
        shown = rerun_plans.retry_plan(store, name, kind=kind, keys=keys, stage=stage)
    except UnknownStage as exc:
        raise click.UsageError(str(exc)) from exc
    if shown.items:
        click.echo(shown)
    if shown.may_repeat.items and not yes:
        asked = [*keys, *(["--kind", kind] if kind else []), *(["--stage", stage] if stage else []), "--yes"]
        _ask(f"retry {plural(shown.items, 'failed item')} of {name!r} ({shown.may_repeat.items:,} may be billed "
             "again)?", declined="nothing was retried",
             refused="runner retry asks before it sends items that may be billed again; nothing was changed; in a "
                     f"script add --yes: {spelt('retry', name, *asked, db=store.path)}")
    done = control.retry(store, name, now=time.time(), kind=kind, keys=keys, stage=stage)
    if not done.again:
        chosen = (f" of kind {kind}" if kind else (" among the KEYS given" if keys else "")) + (
            f" at stage {stage}" if stage else "")
        click.echo(f"nothing to retry: run {name!r} has no failed item{chosen}")
        _cancelled_left(store, name, asked=kind is None and not keys, stage=stage)
        return
    go_on(retried(done, of=f" of run {name!r}"), store, name)


def _cancelled_left(store: Store, name: str, *, asked: bool, stage: str | None) -> None:
    """A retry of every failed item (or every one of a stage) leaves the cancelled ones: say so, with the command
    that retries them."""
    from .store import views

    cancelled = views.cancelled_count(store, store.run_id(name), stage=stage) if asked else 0
    if cancelled:
        at_stage = ["--stage", stage] if stage is not None else []
        hint(f"{plural(cancelled, 'item')} cancelled by a person {'is' if cancelled == 1 else 'are'} retried only "
             "when named:", spelt("retry", name, "--kind", FailureKind.CANCELLED.value, *at_stage, db=store.path))


@click.command()
@click.argument("name")
@click.argument("keys", nargs=-1)
@click.option("--all", "everything", is_flag=True, help="Release every held item.")
@click.option("--yes", is_flag=True, help="Do not ask (for scripts); without a terminal it is required.")
@db_option
@plain_errors
def confirm(name: str, keys: tuple[str, ...], everything: bool, yes: bool, db: str) -> None:
    """Release held items after a crash, saying first what each does.

    All of them, or the KEYS given; it shows the plan (the items
    charge-safe and those that may be billed again, each with its estimated
    cost), then asks (y/N). Items whose task id was saved are polled (no new
    charge); the others are sent again, and may run and charge twice.
    `runner status NAME` lists them.

    Example: runner confirm demo --all
    """
    from . import recovery
    from .store import Store, rerun_plans

    if everything == bool(keys):
        raise click.UsageError("give either --all or the KEYS to release")
    store = Store(db, create=False)
    shown = rerun_plans.confirm_plan(store, name, keys=keys)
    if shown.items:
        click.echo(shown)
    if not yes:
        _ask_to_confirm(store, name, keys)
    released = recovery.confirm(store, name, now=time.time(), keys=keys)
    if not any(released.values()):
        _nothing_released(store, name, keys)
        return
    for case, count in released.items():
        if count:
            click.echo(f"{plural(count, 'item')}: {case.warning}")
    go_on(f"released {plural(sum(released.values()), 'item')}", store, name)


def _ask_to_confirm(store: Store, name: str, keys: tuple[str, ...]) -> None:
    """Show the held items chosen, with what confirming each case does, and ask (y/N); only a yes returns."""
    from . import recovery
    from .store import views

    store.refuse_unknown(store.run_id(name), keys)
    held = [item for item in views.held(store, name) if not keys or item.key in keys]
    if not held:
        return  # nothing to release: nothing to ask
    refused = (f"runner confirm asks before it releases held items; in a script add --yes: "
               f"{spelt('confirm', name, *(keys or ['--all']), '--yes', db=store.path)}")
    if sys.stdin.isatty():
        for case in recovery.Case:
            chosen = [item.key for item in held if item.case is case]
            if chosen:
                click.echo(f"{case.value}: {len(chosen)} ({few(chosen)}): {case.warning}")
    _ask(f"release {plural(len(held), 'held item')} of {name!r}?", refused=refused, declined="nothing was released")


def _ask(question: str, *, refused: str, declined: str) -> None:
    """Ask a person (y/N) once the plan is shown; only a yes returns. Without a terminal: ``refused``, saying to
    add --yes; a no: ``declined``."""
    if not sys.stdin.isatty():
        raise RunError(refused)
    if not click.confirm(question, default=False):
        raise RunError(declined)


def _nothing_released(store: Store, name: str, keys: tuple[str, ...]) -> None:
    """Why nothing was released: nothing is held, or an engine that is gone left items running, not held yet."""
    from .store import views

    left = views.left_running(store, name, now=time.time())
    if left:
        hint(f"nothing to release yet: {plural(left, 'item')} of run {name!r} {'was' if left == 1 else 'were'} left "
             "running by an engine that is gone; the next run holds for confirmation those whose call may have "
             "been billed:",
             go_on_command(store.job(name), store.path))
        return
    chosen = " among the KEYS given" if keys else ""
    click.echo(f"nothing to release: no item of run {name!r} is held for confirmation{chosen}")


@click.command()
@click.argument("name")
@click.argument("keys", nargs=-1)
@db_option
@plain_errors
def cancel(name: str, keys: tuple[str, ...], db: str) -> None:
    """Fail unfinished items as cancelled; batches in flight finish.

    All of the run's, or the KEYS given. Items not in flight (pending,
    queued, waiting, held for confirmation) fail at once. A batch in flight
    finishes: its answers are saved and paid for, an item its answer
    completes stays completed, and its other items fail as cancelled. An
    upstream Batch API batch whose every item is cancelled is cancelled
    upstream: the lines it ran before are billed. With no engine running
    (or items held for confirmation), the next run does that first, and
    validates answers already saved. A `runner run` of a run cancelled
    whole ends (exit 3). `runner retry NAME --kind cancelled` sends them
    again. A key the run does not have is named, and nothing changes
    (exit 1).

    Example: runner cancel demo
    """
    from . import control
    from .store import Store, views

    store = Store(db, create=False)
    done = control.cancel(store, name, now=time.time(), keys=keys)
    if not done.failed and not done.finishing:
        chosen = " among the KEYS given" if keys else ""
        click.echo(f"nothing to cancel: run {name!r} has no unfinished item{chosen}")
        return
    if done.failed:
        click.echo(f"{plural(done.failed, 'item')} of run {name!r} cancelled (failed, kind cancelled)")
    if done.finishing and views.engine_alive(store, name, now=time.time()):
        click.echo(f"{plural(done.finishing, 'item')} in flight: cancelled when their batch finishes "
                   "(its answers are saved and paid for)")
    elif done.finishing:
        go_on(f"{plural(done.finishing, 'item')} in flight when their engine stopped: settled when the run next runs "
              "(an upstream task of theirs is cancelled then, the lines it ran billed; a saved answer is validated)",
              store, name)
    hint("to send them again:", spelt("retry", name, "--kind", FailureKind.CANCELLED.value, db=store.path))


@click.command()
@click.argument("name")
@click.argument("keys", nargs=-1)
@click.option("--approve", is_flag=True, help="Approve: the item goes on to the next stage.")
@click.option("--reject", is_flag=True, help="Reject: the item fails (kind rejected).")
@click.option("--data", metavar="JSON", help="With --approve: a JSON object, saved as the stage's result (default {}).")
@click.option("--all-waiting", is_flag=True, help="Every item waiting for a decision now.")
@db_option
@plain_errors
def decide(
    name: str, keys: tuple[str, ...], approve: bool, reject: bool, data: str | None, all_waiting: bool, db: str
) -> None:
    """Approve or reject items at a decide stage (kind = "decide").

    The KEYS given, or --all-waiting. An approval saves --data (a JSON
    object; default {}) as the stage's result, under its name, and sends the
    item on: pending at the next stage, or completed after the last. A
    rejection fails it as kind rejected; `runner retry NAME --kind rejected`
    sends it back to wait for a decision. A decision for an item not there
    yet is kept and applied when it arrives. It works with or without an
    engine running. A key the run does not have, or an item already past the
    stage (or failed elsewhere), is named, and nothing changes (exit 1).

    Example: runner decide pipeline p001 p002 --approve --data '{"ok": true}'
    """
    from . import deciding
    from .store import Store

    if approve == reject:
        raise click.UsageError("give one of --approve or --reject")
    if all_waiting == bool(keys):
        raise click.UsageError("give either the KEYS to decide or --all-waiting")
    if data is not None and reject:
        raise click.UsageError("--data goes with --approve (a rejection saves no result)")
    try:
        given = deciding.parse_data(data)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--data") from exc
    store = Store(db, create=False)
    done = deciding.decide(store, name, keys, approve=approve, data=given, now=time.time())
    if not any(done):
        click.echo(f"nothing to decide: no item of run {name!r} waits for a decision")
        return
    if done.approved:
        click.echo(f"{plural(done.approved, 'item')} of run {name!r} approved")
    if done.rejected:
        click.echo(f"{plural(done.rejected, 'item')} of run {name!r} rejected (failed, kind rejected)")
    if done.kept:
        kept = deciding.kept_words(store.job(name), done.kept)
        click.echo(f"{plural(done.kept, 'item')} not at the decide stage yet: {kept}")
    if done.rejected:
        hint("to send them back for a decision:", spelt("retry", name, "--kind", FailureKind.REJECTED.value, db=store.path))
    if done.approved:
        go_on("the approved items go on", store, name)


@click.command()
@click.argument("job_or_name")
@click.option("--stage", help="Only this stage (of a job with [[stage]] tables); by default every stage that calls.")
@click.option("--yes", is_flag=True, help="Do not ask (for scripts); without a terminal it is required when some "
                                          "results would be sent again.")
@db_option
@plain_errors
def revalidate(job_or_name: str, stage: str | None, yes: bool, db: str) -> None:
    """Check saved outputs against the output schema again, no call.

    Which schema: a job file's (JOB.toml, as you edited it; its run is the
    one of the job's name, and only output schemas may differ from the job
    the run was last given), or, given a run's NAME, the schema of the job
    the run was last given. Items that failed as invalid whose saved answer
    passes now complete their stage; results still valid are kept as the
    job's now, so a run does not send them again; results that no longer
    pass are sent again only once you agree (y/N, or --yes): they were
    answered, so this may repeat a charge. The plan is shown first, before
    anything changes. Applied, the run's job takes the job file's output
    schemas of the stages checked (said in one line): a run by name checks
    against them. A stage the run does not have, or a decide stage, is
    refused (exit 2).

    Example: runner revalidate sample_data/job.toml --stage classify
    """
    from . import jobs, revalidating
    from .store import Store

    edited = jobs.load(job_or_name) if job_or_name.endswith(".toml") else None
    name = edited.name if edited is not None else job_or_name
    store = Store(db, create=False)
    try:
        revalidation, priced = revalidating.priced(store, name, job=edited, stage=stage)
    except UnknownStage as exc:
        raise click.UsageError(str(exc)) from exc
    revalidating.refuse_while_worked(store, revalidation, now=time.time())
    shown = revalidation.plan
    if shown.changes:
        click.echo(priced)
    asks = bool(shown.may_repeat) and not yes
    if asks:  # as it would be, then the question; else as it was done
        click.echo("\n".join(revalidating.plan_lines(shown, will=True)))
        _ask_to_revalidate(store, name, job_or_name, stage, shown.may_repeat)
    taken = revalidating.taken_line(revalidation)
    done = revalidating.apply(store, revalidation, now=time.time(), again=True) if shown.changes or taken else None
    if not asks and shown.stages:
        click.echo("\n".join(revalidating.plan_lines(shown, will=False)))
    if taken:  # the run's job took the file's schemas, as runner run JOB.toml gives a run its job
        click.echo(taken)
    if done is None or not shown.changes:
        click.echo(revalidating.nothing_line(name))
        return
    said = revalidating.done_line(name, done)
    if edited is None:
        go_on(said, store, name)
    else:  # the job file's other edits, if any, are the run's when it is run
        hint(f"{said}; to go on with the job file:", spelt("run", job_or_name, db=store.path))


def _ask_to_revalidate(store: Store, name: str, given: str, stage: str | None, again: int) -> None:
    """Ask (y/N) before results now invalid are sent again; only a yes returns. Without a terminal: the command
    (with the job file or run name ``given``)."""
    asked = spelt("revalidate", given, *(["--stage", stage] if stage else []), "--yes", db=store.path)
    _ask(f"send {plural(again, 'item')} of {name!r} again (may repeat a charge)?", declined="nothing was changed",
         refused=f"runner revalidate asks before it sends answered items again; nothing was changed; "
                 f"in a script add --yes: {asked}")
