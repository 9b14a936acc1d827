"""A run of kind ``anthropic-batch`` really killed while its batch's create is on the wire, then recovered."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support import ROOT, posts, write_jsonl

from runner.sim import Simulator

JOB = """name = "crash"
input = "posts.jsonl"
group = "month"
[batch]
max_items = 5
concurrency = 1
[provider]
kind = "anthropic-batch"
base_url = "{base_url}"
timeout = 2
create_margin = 0.5
[retry]
backoff = 0.02
max_backoff = 0.2
"""


class KillAtCreate:
    """Kills the engine as its first create arrives: the simulator makes the batch, the answer has nowhere to go."""

    def __init__(self) -> None:
        self.pid: int | None = None

    def on_call(self, method: str, path: str) -> None:
        if (method, path) == ("POST", "/v1/messages/batches") and self.pid is not None:
            os.kill(self.pid, signal.SIGKILL)
            self.pid = None


@pytest.mark.slow
def test_a_kill_during_a_message_batch_create_is_recovered_by_adopting_that_batch_never_a_second(
    tmp_path: Path,
) -> None:
    write_jsonl(tmp_path / "posts.jsonl", posts(5))
    killer = KillAtCreate()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "runner"]

    def runner(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*command, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)

    with Simulator(batch_seconds=0.05, on_call=killer.on_call).start() as sim:
        (tmp_path / "job.toml").write_text(JOB.format(base_url=sim.base_url.removesuffix("/v1")))
        killed = subprocess.Popen([*command, "run", "job.toml"], cwd=tmp_path, env=env, stderr=subprocess.DEVNULL)
        killer.pid = killed.pid
        assert killed.wait(timeout=60) == -signal.SIGKILL
        held = runner("run", "crash")
        status = runner("status", "crash")
        confirmed = runner("confirm", "crash", "--all", "--yes")
        resumed = runner("run", "crash")
        ledger = sim.ledger.snapshot()
    assert held.returncode == 4 and "adopt" in status.stdout, status.stdout
    assert confirmed.returncode == 0, confirmed.stderr
    assert resumed.returncode == 0, resumed.stderr
    assert ledger["batches_created"] == 1 and ledger["billed"] == {f"p{i:03d}": 1 for i in range(5)}
