"""The boundary between two stages is one transaction: an engine SIGKILLed anywhere in a two-stage run loses no
item and sends no call again that a person was not told might run twice (the simulator's ledger says so)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest
from pipelines import pipeline
from support import ROOT

from runner import export, recovery
from runner.model import ItemState
from runner.sim import Simulator
from runner.store import Store, views

#: Where the kill lands: the n-th call, before its answer is sent or just after (the answer then lost).
KILLS = [(call, mode) for call in (1, 2, 3, 4) for mode in ("before answer", "after answer")]


class KillAt:
    """Kills the engine at its n-th call: as the call arrives, or once its answer is on its way."""

    def __init__(self, call: int, mode: str) -> None:
        self.call, self.mode, self.seen = call, mode, 0
        self.pid: int | None = None

    def __call__(self, ids: list[str]) -> None:
        self.seen += 1
        if self.pid is not None and self.seen == self.call:
            pid, self.pid = self.pid, None
            if self.mode == "before answer":
                os.kill(pid, signal.SIGKILL)
            else:
                threading.Timer(0.005, _kill_quietly, [pid]).start()


def _kill_quietly(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run(folder: Path, *args: str, killer: KillAt | None = None) -> int:
    engine = subprocess.Popen([sys.executable, "-m", "runner", *args], cwd=folder,
                              env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)
    if killer is not None:
        killer.pid = engine.pid
    _, stderr = engine.communicate(timeout=120)
    assert engine.returncode in (0, 4, -signal.SIGKILL), stderr
    return engine.returncode


def until_done(folder: Path, name: str, confirmed: Counter[str]) -> None:
    """Run ``name`` again until it is done, a person confirming what it held (``confirmed``: those that may charge
    twice), a few times at most."""
    for _ in range(4):
        if run(folder, "run", name) == 0:
            return
        with Store(folder / "runs.db") as store:
            held = recovery.held(store, name)
            confirmed.update(item.key for item in held if item.case.may_charge_twice)
            recovery.confirm(store, name, now=0)


@pytest.mark.slow
@pytest.mark.parametrize("call, mode", KILLS, ids=[f"call {c} {m}" for c, m in KILLS])
def test_a_kill_between_stages_loses_nothing_and_sends_no_call_again_unannounced(
    tmp_path: Path, call: int, mode: str
) -> None:
    killer = KillAt(call, mode)
    confirmed: Counter[str] = Counter()
    with Simulator(latency=0.01, on_request=killer).start() as sim:
        pipeline(tmp_path, sim.base_url, count=8, stages="classify summarize", max_items=4)
        assert run(tmp_path, "run", "pipeline.toml", killer=killer) == -signal.SIGKILL
        until_done(tmp_path, "triage", confirmed)
        calls = sim.ledger.snapshot()["calls"]
    with Store(tmp_path / "runs.db") as store:
        assert views.status(store, "triage", now=0)["counts"][ItemState.COMPLETED] == 8
        assert all({"classify", "summarize"} <= set(row) for row in export.rows(store, "triage"))
    sent = Counter((c["model"], key) for c in calls for key in c["ids"])
    assert {key for _, key in sent} == {f"p{i:03d}" for i in range(8)}
    assert all(n <= 1 + confirmed[key] for (_, key), n in sent.items()), (sent, confirmed)
    # A stage that was passed before the kill is never sent again: only the call the kill cut short may be.
    again = {model for (model, key), n in sent.items() if n > 1}
    assert len(again) <= 1
