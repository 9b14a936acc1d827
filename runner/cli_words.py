"""What the CLI says beyond each command's own lines: the commands' order, hints that carry a command, the faults.

A hint's command is printed alone on its line, as :func:`runner.words.command`
spells it, so that a person copies it whole. Every fault of
:data:`runner.sim.faults.FAULTS` is named in :data:`FAULTS` (a test checks
it); ``\\b`` keeps click from rewrapping its table.
"""

from __future__ import annotations

import itertools
import time
from typing import TYPE_CHECKING

import click

from . import words

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .breaker import Control
    from .costs import Cost
    from .jobs import Job
    from .store import Store
    from .store.answers import StageTally


#: The commands in the order a user meets them, as ``runner --help`` lists them.
ORDER = ("demo", "run", "status", "failures", "export", "tui", "pause", "resume", "step", "retry", "confirm", "cancel",
         "decide", "revalidate", "prioritize", "add", "queue", "budget", "archive", "restore", "copy", "sim")


class Commands(click.Group):
    """The ``runner`` group: its commands listed in the order a user meets them (one not in ORDER last)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(self.commands, key=lambda name: ORDER.index(name) if name in ORDER else len(ORDER))


def hint(said: str, command: str) -> None:
    """``said``, then the command alone on the next line, as it is."""
    click.echo(said)
    click.echo(command)


def go_on(said: str, store: Store, name: str, *, engine: str | None = "takes them") -> None:
    """``said`` and how to go on with the run: ``runner run NAME``, or the Python call for a run defined in Python.

    While an engine runs the run (``views.engine_alive``, as the TUI asks),
    it takes the items (``engine``: what it does with what was said): a new
    run would be refused, so none is named. ``engine`` None: the command gave
    a run nothing to take, so ``said`` alone.
    """
    from .store import views

    if engine is None:
        click.echo(said)
        return
    if views.engine_alive(store, name, now=time.time()):
        click.echo(f"{said}; the running engine {engine}")
        return
    job = store.job(name)
    hint(f"{said}; to go on{' (from Python)' if words.from_python(job) else ''}:", words.go_on(job, store.path))


FAULTS = """\b
A fault plan is a list of rules; the first rule that matches a request
decides its fault. A rule is {"fault": NAME, selectors, parameters}, the
selectors all optional: "rate" (0 to 1, drawn from the plan's "seed"),
"times" (the first N matches only), "keys" (a request holding these ids).

\b
Faults of POST /v1/chat/completions:
  http_400, http_401, http_402, http_403, http_500
                       that status, never billed
  http_503             a 503, never billed (retry_after: seconds)
  overloaded           Anthropic's 529 overloaded_error (retry_after: seconds)
  credit_balance       Anthropic's 400 "credit balance is too low"
  http_429             a 429, never billed (retry_after, retry_after_ms,
                       http_date: true, header: retry-after, retry-after-ms,
                       llm_provider-retry-after or none)
  insufficient_quota   a 429 not worth retrying (spent balance)
  budget_exceeded      LiteLLM's 422 budget_exceeded
  context_length       a 400 context_length_exceeded for the "keys" given
  invalid_model        LiteLLM's 400 "Invalid model name passed in model=..."
  model_not_found      OpenAI's 404 for the request's model
  echo_key             a 401 whose message holds the key the client sent
  timeout              waits "seconds" (default 30), then answers
  drop                 closes the connection with nothing sent, not billed
  billed_then_dropped  bills the answer, then closes with nothing sent
  malformed            billed: cut-off JSON, finish reason length
  wrong_ids            billed: every result's id gets a -x
  missing_ids          billed: the results of "keys" (else the second half)
                       are left out
  invalid_items        billed: the results of "keys" (else a "share", default
                       0.5) keep only their id
  duplicate_ids        billed: a result comes again with other values
  content_parts        billed: the answer as "parts" text parts (default 2)
  fenced               billed: the JSON inside a Markdown code fence

\b
Faults of the Batch API (the batch is made all the same unless said):
  upload_lost          POST /v1/files: stored, then closed with nothing sent
  create_lost          POST /v1/batches: closed with nothing sent
  create_500           the create answers a 500 server_error
  create_slow          the create waits "seconds" (default 5) before it
                       makes the batch and answers
  create_twice         two batches of the same file, both run and bill
  batch_unknown        from then on a 404: the batch is gone, never billed
  expire               ends expired: half its lines answered, the rest not
  missing_rows         completes, but the lines of "keys" (else the second
                       half) are in neither file, not billed
  batch_failed         fails validation, as for a spent token quota
  errored_lines        Message Batches: the requests of "keys" (else all)
                       end errored (api_error), not billed
  poll_503, list_503   GET /v1/batches/{id}, GET /v1/batches answer a 503

\b
Anthropic's Messages and Message Batches (POST /v1/messages, /v1/messages/
batches) take the same faults, each worded as Anthropic words it (a 503 as
its 529 overloaded_error, a spent quota as its 429 spend limit).

\b
Example plan: {"seed": 7, "rules": [{"fault": "http_503", "rate": 0.3},
  {"fault": "http_429", "times": 2, "retry_after": 1},
  {"fault": "invalid_items", "keys": ["p001"]}]}
"""


def show_stages(stages: Sequence[StageTally]) -> None:
    """What each stage of a pipeline did: its results saved, the items that skipped it, those failed or left there."""
    click.echo("Per stage:")
    for stage in stages:
        said = [f"{words.plural(stage.passed, 'result')} saved"]
        if stage.skipped:
            said.append(f"{words.plural(stage.skipped, 'item')} skipped it (its when)")
        said += [f"{n:,} {state} there" for state, n in stage.counts.items() if n and state != "completed"]
        click.echo(f"  {stage.stage}: {', '.join(said)}")


def show_results(name: str, db: str) -> None:
    """A few results of a run (a pipeline's: its first and last stages' first fields), and the command that writes
    them all; nothing while no item has completed (a pipeline stopped at its review, say)."""
    from . import export
    from .store import Store

    with Store(db, read_only=True) as store:
        first = list(itertools.islice(export.rows(store, name, state="completed"), 3))
    if not first:
        return
    click.echo("Its first results:")
    for row in first:
        click.echo(f"  {row['key']}: {_first_fields(row)}")
    hint("All results:", words.command("export", name, "--format", "csv", "--out", f"{name}.csv", db=db))


def show_demo_cost(job: Job, cost: Cost) -> None:
    """What the demo would have cost upstream at its sample model's price (the simulator charges nothing)."""
    from . import pricing
    from .jobs import NO_CALL

    models = ", ".join(dict.fromkeys(stage.provider.model for stage in job.stages if stage.kind not in NO_CALL))
    click.echo(f"At {models}'s price ({pricing.TAKEN}), this run would have cost {pricing.money(cost.spent)} "
               f"({pricing.CURRENCY}) upstream: {cost.tokens.input:,} input and {cost.tokens.output:,} output tokens.")


def _first_fields(row: dict[str, object]) -> str:
    """A result's label; a pipeline's first field of its first stage's result and of its last's, ``·`` between."""
    if "stage" not in row:
        return str(row.get("label", ""))
    stages = [value for name, value in row.items() if isinstance(value, dict) and name != "input"]
    ends = stages[:1] + stages[1:][-1:]
    return " · ".join(str(next(iter(result.values()), "")) for result in ends)


def show_control(name: str, now: Control) -> None:
    state = f"breaker {now.breaker.value}" + (", paused" if now.paused else "")
    steps = f", {words.plural(now.steps, 'step')} allowed" if now.steps else ""
    click.echo(f"run {name!r}: {state}{steps}")
