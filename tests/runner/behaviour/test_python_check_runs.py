"""A run given a Python check (``check=``) goes on only where its check is given: the store keeps only that it has one.

Continued without it (``runner run NAME``, ``Run.attach(NAME).go()``), it
would check its results as it did not before, saying nothing: it is refused
in one message naming the call that goes on with its check, as a run defined
with a Python handler is.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from scenes import db_named, location_of
from support import make_job, posts, runner_cli

from runner import runs
from runner.errors import JobError
from runner.notebook import Run
from runner.sim import Simulator
from runner.store import Store, views

def call(store: Store) -> str:
    """The call that goes on with the run, as the refusals name it."""
    return f"await runner.notebook.Run.attach('test', db={db_named(store)!r}, check=<its check>).go()"


def refuse_p001(result: dict[str, Any]) -> str | None:
    return "p001 is refused" if result["id"] == "p001" else None


async def checked_run(tmp_path: Path, sim: Simulator, store: Store) -> None:
    """The run ``test`` of four posts given the check ``refuse_p001``: p001 failed, then retried (pending)."""
    job = make_job(tmp_path, sim.base_url, posts(4), max_attempts=1, check=refuse_p001)
    assert (await runs.execute(store, job)).exit_code == 3
    retried = runner_cli("retry", "test", "--yes", cwd=tmp_path)
    assert retried.stdout.endswith(f"to go on (from Python):\n{call(store)}\n"), retried.stdout


async def test_runner_run_of_a_run_given_a_python_check_is_refused_in_one_line_naming_the_call_with_its_check(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    await checked_run(tmp_path, sim, store)
    before = runner_cli("status", "test", "--json", cwd=tmp_path).stdout
    refused = runner_cli("run", "test", cwd=tmp_path)
    assert (refused.returncode, refused.stdout, refused.stderr) == (1, "", (
        f"error: run 'test' was defined with a Python check (check=) and is continued from Python: {call(store)}\n"))
    assert runner_cli("status", "test", "--json", cwd=tmp_path).stdout == before
    assert json.loads(before)["counts"]["pending"] == 1
    assert views.run_view(store, "test", now=0.0).go_on.endswith(", check=<its check>).go()")  # the TUI's go-on


async def test_a_run_given_a_python_check_attached_without_it_is_refused_in_the_cell(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    await checked_run(tmp_path, sim, store)
    attached = Run.attach("test", db=location_of(store))
    with pytest.raises(JobError, match=r"defined with a Python check \(check=\) .* check=<its check>\)\.go\(\)"):
        await attached.go()
    with pytest.raises(JobError, match="defined with a Python check"):
        attached.start()
    assert sim.ledger.snapshot()["requests"] == 1  # the first run's one batch: nothing sent since


async def test_a_run_given_a_python_check_attached_with_it_goes_on_checked(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    await checked_run(tmp_path, sim, store)
    outcome = await Run.attach("test", db=location_of(store), check=refuse_p001).go()
    assert outcome.exit_code == 3 and outcome.status["counts"]["completed"] == 3
    assert [failure["key"] for failure in Run.attach("test", db=location_of(store)).failures()] == ["p001"]
