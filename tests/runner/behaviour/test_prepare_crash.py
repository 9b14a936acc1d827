"""An engine adding a large input is alive to everyone, and one killed part way leaves a run that is not prepared.

The engine here really runs in a process of its own and is really killed;
the test moves in step with it through its output (it stops after its first
chunk until told to go on), never by sleeping.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from scenes import states_of_items, states_told_by_events
from support import ROOT, label_all_but_p001, make_job, posts, until

from runner import runs
from runner.errors import RunError
from runner.model import ItemState
from runner.providers.handler import PythonHandler
from runner.store import Store, views

ITEMS = 35

#: An engine that takes the lease and adds the job's input in chunks of 10, stopping after the first until told.
ENGINE = """
import sys, time
from pathlib import Path
from runner import lease, preparing
from runner.jobs import Job
from runner.store import Store

job = Job.from_json(Path(sys.argv[2]).read_text())

def adding(added, total):
    print(added, flush=True)
    sys.stdin.readline()

with Store(sys.argv[1]) as store:
    lease.acquire(store, job.name, token="first", now=time.time())
    preparing.prepare(store, job, lease_token="first", now=time.time, chunk_rows=10, adding=adding)
"""


@pytest.fixture
def engine_after_its_first_chunk(tmp_path: Path) -> subprocess.Popen[str]:
    """The engine's process, its first chunk committed and the rest not yet added."""
    job = make_job(tmp_path, "http://127.0.0.1:9/v1", posts(ITEMS, groups=3))
    (tmp_path / "job.json").write_text(job.to_json())
    engine = subprocess.Popen([sys.executable, "-c", ENGINE, str(tmp_path / "runs.db"), str(tmp_path / "job.json")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert engine.stdout is not None
    assert engine.stdout.readline() == "10\n"
    return engine


def test_an_engine_adding_its_input_is_alive_a_prepare_beside_it_is_refused_and_a_second_engine_waits(
    tmp_path: Path, engine_after_its_first_chunk: subprocess.Popen[str]
) -> None:
    db = tmp_path / "runs.db"
    with Store(db, read_only=True) as view:
        assert views.engine_alive(view, "test", now=time.time())
        assert view.preparing("test")
    with Store(db) as second, pytest.raises(RunError, match="being run by another engine"):
        runs.prepare(second, second.job("test"), now=time.time())
    second_engine = subprocess.Popen([sys.executable, "-m", "runner", "run", "test", "--db", str(db)], cwd=tmp_path,
                                     env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
    waiting = until(db, "test", lambda standing: len(standing.workers) == 2)
    second_engine.kill()  # it waited for the first to set the run up: nothing of its own was added
    second_engine.communicate()
    assert sum(waiting.counts.values()) == 10
    out, _ = engine_after_its_first_chunk.communicate("\n" * ITEMS)
    assert engine_after_its_first_chunk.returncode == 0
    with Store(db, read_only=True) as view:
        assert not view.preparing("test")
        assert sum(states_of_items(view).values()) == ITEMS


def test_an_engine_killed_while_adding_leaves_a_run_that_is_read_again_and_completes(
    tmp_path: Path, engine_after_its_first_chunk: subprocess.Popen[str]
) -> None:
    engine_after_its_first_chunk.send_signal(signal.SIGKILL)
    engine_after_its_first_chunk.communicate()
    db = tmp_path / "runs.db"
    with Store(db) as store:
        job = store.job("test")
        assert store.preparing("test")
        assert not views.engine_alive(store, "test", now=time.time())
        assert store.input_unchanged_since(job, job.input.fingerprint()) is None
        assert sum(states_of_items(store).values()) == 10
        # Continued by name, as `runner run test` does: the input is read again, not taken as it was left.
        outcome = asyncio.run(runs.execute(store, job, provider=PythonHandler(label_all_but_p001), read_input=False))
        assert outcome.status["counts"][ItemState.COMPLETED] == ITEMS
        assert not store.preparing("test")
        assert states_told_by_events(store) == states_of_items(store)
