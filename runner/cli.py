"""The ``runner`` command: one short function per command over the library.

The commands live by what they do: :mod:`runner.cli_run` starts work (demo,
run, sim), :mod:`runner.cli_read` reads a run (status, failures, export,
tui), :mod:`runner.cli_steer` is a person's hand (pause, resume, step,
retry, confirm, cancel, decide), :mod:`runner.cli_queue` orders and feeds a
run's queue (prioritize, add) and steers the shared queues runs take turns in
(queue set, list, resume), :mod:`runner.cli_archive` keeps a run's archive
(archive, restore), :mod:`runner.cli_copy` copies a run to another store, :mod:`runner.cli_budget` gives a
run a budget. A command imports what only it needs (the store, the
engine, the simulator, the exporter) inside itself: ``--help`` loads no
store, and ``status`` and ``failures`` no engine and no rich
(tests/runner/test_cold_start.py).

Exit codes of ``runner run`` and ``runner demo``: 0 all completed, 3 ended
with failed items, 4 stopped for a person, 1 bad input or configuration (one
line on stderr, nothing lost), 2 usage.
"""

from __future__ import annotations

import click

from . import cli_archive, cli_budget, cli_copy, cli_queue, cli_read, cli_run, cli_steer, cli_words


@click.group(cls=cli_words.Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="runner")
def main() -> None:
    """A recoverable job runner for costly calls, over one SQLite run store."""


for command in (
    cli_run.demo, cli_run.run, cli_read.status, cli_read.failures, cli_read.export_items, cli_read.tui,
    cli_steer.pause, cli_steer.resume, cli_steer.step, cli_steer.retry, cli_steer.confirm, cli_steer.cancel,
    cli_steer.decide, cli_steer.revalidate, cli_queue.prioritize, cli_queue.add, cli_queue.queue,
    cli_archive.archive, cli_archive.restore, cli_copy.copy, cli_budget.budget,
    cli_run.sim,
):
    main.add_command(command)
