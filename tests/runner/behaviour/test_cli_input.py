"""The job file run again through the real command: an unchanged input is not read again, a missing one makes no store.

And what ``status --json`` and ``failures --json`` say of a run's money and a person's hand. On each backend, but
for what a bad input leaves in the folder (no store file).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from typing import Any

from support import runner_cli

from runner.sim import Simulator
from runner.store import Store, views

UNCHANGED = re.compile(r"^input unchanged since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d, not read again$", re.MULTILINE)


def job_file(folder: Path, base_url: str, *, count: int = 30, more: str = "") -> Path:
    """The job ``mine`` over ``count`` posts in ``posts.jsonl``, against ``base_url``."""
    (folder / "posts.jsonl").write_text(
        "".join(json.dumps({"id": f"p{i}", "body": f"hello {i}"}) + "\n" for i in range(count))
    )
    job = folder / "job.toml"
    job.write_text(f'name = "mine"\ninput = "posts.jsonl"\n[provider]\nbase_url = "{base_url}"\n{more}')
    return job


def input_read_at(store: Store) -> float | None:
    """When the store says the run's input was last read."""
    (run,) = views.runs(store)
    return run["input_read_at"]


def status(folder: Path) -> dict[str, Any]:
    result = runner_cli("status", "mine", "--json", cwd=folder)
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout))


def test_running_the_job_file_again_on_an_unchanged_input_does_not_read_it_and_says_so(
    tmp_path: Path, store: Store
) -> None:
    with Simulator().start() as sim:
        job_file(tmp_path, sim.base_url)
        first = runner_cli("run", "job.toml", cwd=tmp_path)
        read = input_read_at(store)
        again = runner_cli("run", "job.toml", cwd=tmp_path)
    assert (first.returncode, again.returncode) == (0, 0), first.stderr + again.stderr
    assert not UNCHANGED.search(first.stderr) and UNCHANGED.search(again.stderr)
    assert input_read_at(store) == read is not None
    assert status(tmp_path)["counts"]["completed"] == 30


def test_an_edit_that_keeps_the_inputs_size_and_mtime_is_still_read(
    tmp_path: Path, store: Store
) -> None:
    with Simulator().start() as sim:
        job_file(tmp_path, sim.base_url)
        first = runner_cli("run", "job.toml", cwd=tmp_path)
        read = input_read_at(store)
        posts = tmp_path / "posts.jsonl"
        before = posts.stat()
        posts.write_text(posts.read_text().replace("hello 0", "HELLO 0"))
        os.utime(posts, ns=(before.st_atime_ns, before.st_mtime_ns))
        again = runner_cli("run", "job.toml", cwd=tmp_path)
        failed = json.loads(runner_cli("failures", "mine", "--json", cwd=tmp_path).stdout)
    assert first.returncode == 0, first.stderr
    assert again.returncode == 3 and not UNCHANGED.search(again.stderr), again.stderr
    assert (read_again := input_read_at(store)) is not None and read is not None and read_again > read
    assert [(f["key"], f["kind"]) for f in failed] == [("p0", "input_changed")]


def test_an_input_of_another_size_is_read_again_and_its_new_items_run(
    tmp_path: Path, store: Store
) -> None:
    with Simulator().start() as sim:
        job_file(tmp_path, sim.base_url)
        first = runner_cli("run", "job.toml", cwd=tmp_path)
        with (tmp_path / "posts.jsonl").open("a") as grown:
            grown.write(json.dumps({"id": "p30", "body": "one more"}) + "\n")
        again = runner_cli("run", "job.toml", cwd=tmp_path)
    assert (first.returncode, again.returncode) == (0, 0), first.stderr + again.stderr
    assert not UNCHANGED.search(again.stderr)
    assert status(tmp_path)["counts"]["completed"] == 31


def test_a_job_whose_input_is_missing_is_one_line_exit_1_and_makes_no_store(tmp_path: Path) -> None:
    (tmp_path / "job.toml").write_text('name = "mine"\ninput = "nowhere.jsonl"\n')
    result = runner_cli("run", "job.toml", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr == f"error: {tmp_path.resolve() / 'nowhere.jsonl'}: input file not found\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["job.toml"]


@pytest.mark.parametrize("content, said", [
    ('{"id": "p1", "body": "a"}\n{"id": "p1", "body": "b"}\n', "duplicate key 'p1', on line 1 and on line 2"),
    ('{"id": "p1", "body": "a"}\n{"id": \n', "line 2"),
])
def test_a_job_whose_input_is_bad_is_one_line_exit_1_and_leaves_no_new_store(
    tmp_path: Path, content: str, said: str
) -> None:
    (tmp_path / "posts.jsonl").write_text(content)
    (tmp_path / "job.toml").write_text('name = "mine"\ninput = "posts.jsonl"\n')
    result = runner_cli("run", "job.toml", cwd=tmp_path)
    assert (result.returncode, result.stderr.count("\n")) == (1, 1) and said in result.stderr, result.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["job.toml", "posts.jsonl"]


def test_status_and_failures_json_count_the_calls_paid_and_maybe_paid_and_a_persons_hand(
    tmp_path: Path, store: Store
) -> None:
    faults = {"rules": [{"fault": "billed_then_dropped", "times": 1}, {"fault": "invalid_items", "keys": ["p3"]}]}
    schema = '[output.schema]\ntype = "object"\nrequired = ["label"]\n[retry]\nmax_attempts = 2\nbackoff = 0.01\n'
    with Simulator(faults=faults).start() as sim:
        job_file(tmp_path, sim.base_url, more=schema)
        ran = runner_cli("run", "job.toml", cwd=tmp_path)
        billed = sim.ledger.snapshot()["billed"]
    after_run = status(tmp_path)
    failed = json.loads(runner_cli("failures", "mine", "--json", cwd=tmp_path).stdout)
    paused = runner_cli("pause", "mine", cwd=tmp_path)
    stepped = runner_cli("step", "mine", cwd=tmp_path)
    held = status(tmp_path)
    assert ran.returncode == 3, ran.stderr
    assert after_run["paid_calls"] + after_run["maybe_paid"] == sum(billed.values())
    assert after_run["maybe_paid"] > 0 and (after_run["paused"], after_run["steps_allowed"]) == (False, 0)
    (p3,) = failed
    assert (p3["key"], p3["kind"], p3["paid_calls"]) == ("p3", "item_invalid", 2)
    assert p3["paid_calls"] + p3["maybe_paid"] == billed["p3"]
    assert (paused.returncode, stepped.returncode) == (0, 0), paused.stderr + stepped.stderr
    assert (held["paused"], held["steps_allowed"]) == (True, 1)
