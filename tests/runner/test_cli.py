"""The CLI as a user meets it: the demo end to end, the status contract, help everywhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from support import ROOT

from runner.cli import main
from runner.sim import Simulator
from runner.states import ItemState


def runner_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "runner", *args], cwd=cwd, env=env, capture_output=True, text=True)


def test_the_demo_completes_every_sample_item_and_status_says_so(tmp_path: Path) -> None:
    demo = runner_cli("demo", "--latency", "0", cwd=tmp_path)
    assert demo.returncode == 0, demo.stderr
    status = json.loads(runner_cli("status", "demo", "--json", cwd=tmp_path).stdout)
    assert set(status) == {"run", "total", "counts", "groups", "breaker", "needs_confirmation", "engine"}
    assert status["counts"] == {s.value: 2400 if s == ItemState.COMPLETED else 0 for s in ItemState}
    assert sum(sum(g.values()) for g in status["groups"].values()) == status["total"] == 2400
    assert len(status["groups"]) == 12
    assert status["breaker"] == {"state": "closed", "reason": None}
    assert (status["needs_confirmation"], status["engine"]) == (0, {"alive": False})


def test_run_takes_a_job_file_then_continues_the_run_by_name(tmp_path: Path) -> None:
    (tmp_path / "posts.jsonl").write_text(
        "".join(json.dumps({"id": f"p{i}", "body": "hello"}) + "\n" for i in range(30))
    )
    with Simulator().start() as sim:
        (tmp_path / "job.toml").write_text(f'name = "mine"\ninput = "posts.jsonl"\n[provider]\nbase_url = "{sim.base_url}"\n')
        first = runner_cli("run", "job.toml", cwd=tmp_path)
        again = runner_cli("run", "mine", cwd=tmp_path)
        requests = sim.ledger.snapshot()["requests"]
    assert (first.returncode, again.returncode) == (0, 0), first.stderr + again.stderr
    assert requests == 2
    assert "completed" in first.stdout and "30" in first.stdout


@pytest.mark.parametrize("command", sorted(main.commands))
def test_every_command_has_help_with_an_example(command: str) -> None:
    result = CliRunner().invoke(main, [command, "--help"])
    assert result.exit_code == 0
    assert f"Example: runner {command}" in result.output
