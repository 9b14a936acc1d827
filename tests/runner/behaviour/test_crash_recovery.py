"""Crash recovery: engines really SIGKILLed at seeded random moments, restarted, confirmed where asked (the calls'
trial on a PostgreSQL store too).

Checked against the simulator's ledger: no item is lost, none is billed twice
unless a person confirmed a plan that said it might be, and every item ends
completed.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from postgres_server import fresh_schema
from support import ROOT, posts, until, write_jsonl

from runner import recovery
from runner.store import views
from runner.sim import Simulator
from runner.model import ItemState
from runner.store import Store

TRIALS = 30
ITEMS = 40


class Killer:
    """Kills the engine process at the k-th upstream request: before it is handled, or just after."""

    def __init__(
        self, rng: random.Random, *, target: int | None = None, mode: str | None = None, span: int = 8
    ) -> None:
        self.rng = rng
        self.span = span
        self.pid: int | None = None
        self.fixed = (target, mode)
        self.target = 0
        self.seen = 0
        self.mode = ""
        #: Where each kill landed: (when, which call).
        self.landed: Counter[str] = Counter()

    def arm(self, pid: int) -> None:
        self.pid, self.seen = pid, 0
        self.target = self.fixed[0] or self.rng.randint(1, self.span)
        self.mode = self.fixed[1] or self.rng.choice(["before answer", "after answer"])

    def disarm(self) -> None:
        self.pid = None

    def on_call(self, method: str, path: str) -> None:
        """The calls of the Batch API and of Message Batches: upload, create, list, poll, read results."""
        listed = "create" if method == "POST" else "list"
        names = {"/v1/files": "upload", "/v1/batches": listed, "/v1/messages/batches": listed}
        self(names.get(path, "read a file" if path.endswith(("/content", "/results")) else "poll"))

    def __call__(self, what: object) -> None:
        self.seen += 1
        if self.pid is None or self.seen != self.target:
            return
        pid, self.pid = self.pid, None
        self.landed[f"{self.mode}: {what if isinstance(what, str) else 'call'}"] += 1
        if self.mode == "before answer":
            os.kill(pid, signal.SIGKILL)
        else:
            threading.Timer(self.rng.uniform(0.0, 0.02), _kill_quietly, [pid]).start()


def _kill_quietly(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_engine(folder: Path, killer: Killer, *, kill: bool, db: Path | str | None = None) -> int:
    """``runner run job.toml`` in ``folder``, on the store ``db`` (a URL, given as ``RUNNER_DB``; None: the folder's
    ``runs.db``), killed as ``killer`` chooses when ``kill``: its exit code."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **({"RUNNER_DB": str(db)} if db is not None else {})}
    engine = subprocess.Popen([sys.executable, "-m", "runner", "run", "job.toml"], cwd=folder, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if kill:
        killer.arm(engine.pid)
    _, stderr = engine.communicate(timeout=120)
    killer.disarm()
    assert engine.returncode in (0, 4, -signal.SIGKILL), stderr
    return engine.returncode


def confirm_held(db: Path | str, totals: Counter[str], confirmed: Counter[str]) -> None:
    """A person confirms every item held in run ``crash``: each case counted, and each item that may charge twice."""
    with Store(db) as store:
        held = recovery.held(store, "crash")
        totals.update(f"case {item.case.value}" for item in held)
        confirmed.update(item.key for item in held if item.case.may_charge_twice)
        recovery.confirm(store, "crash", now=0)


def states_of(db: Path | str) -> set[str]:
    with Store(db) as store:
        counts = views.status(store, "crash", now=0)["counts"]
    return {state for state, n in counts.items() if n}


JOB = """name = "crash"
input = "posts.jsonl"
group = "month"
[batch]
max_items = 5
concurrency = 2
[provider]
kind = "{kind}"
base_url = "{base_url}"
timeout = 2
create_margin = 0.5
[retry]
backoff = 0.02
max_backoff = 0.2
"""


@contextmanager
def trial_store(backend: str, folder: Path, request: pytest.FixtureRequest) -> Iterator[Path | str]:
    """A trial's store: the folder's ``runs.db``, or a fresh PostgreSQL schema's URL."""
    if backend == "sqlite":
        yield folder / "runs.db"
        return
    with fresh_schema(request.getfixturevalue("pg_server")) as url:
        yield url


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "backend"), [
    ("openai-chat", "sqlite"), ("openai-batch", "sqlite"), ("anthropic-messages", "sqlite"),
    ("anthropic-batch", "sqlite"), ("openai-chat", "postgres"),
])
def test_killed_engines_never_lose_an_item_nor_pay_twice_unannounced(
    tmp_path: Path, kind: str, backend: str, request: pytest.FixtureRequest
) -> None:
    rng = random.Random(20261130)
    seen_at_kill: Counter[str] = Counter()
    totals: Counter[str] = Counter()
    landed: Counter[str] = Counter()
    for trial in range(TRIALS):
        folder = tmp_path / f"trial-{trial}"
        folder.mkdir()
        with trial_store(backend, folder, request) as db:
            write_jsonl(folder / "posts.jsonl", posts(ITEMS, groups=4))
            calls = kind in ("openai-chat", "anthropic-messages")
            killer = Killer(rng, span=8 if calls else 24)
            hooks = {"on_request": killer} if calls else {"on_call": killer.on_call}
            confirmed: Counter[str] = Counter()
            # Some creates take a while upstream, and land after an engine killed during them.
            slow = {"seed": trial, "rules": [{"fault": "create_slow", "seconds": 0.3, "rate": 0.5}]}
            with Simulator(latency=0.005, jitter=0.01, seed=trial, batch_seconds=0.05, faults=slow,
                           **hooks).start() as sim:
                (folder / "job.toml").write_text(JOB.format(kind=kind, base_url=sim.base_url))
                for attempt in range(8):
                    code = run_engine(folder, killer, kill=attempt < 2, db=db)
                    if code == -signal.SIGKILL:
                        totals["kills"] += 1
                        seen_at_kill.update(states_of(db))
                        continue
                    if code == 0:
                        break
                    confirm_held(db, totals, confirmed)
                billed = sim.ledger.snapshot()["billed"]
            landed += killer.landed
            assert code == 0, f"trial {trial} did not finish"
            with Store(db) as store:
                assert views.status(store, "crash", now=0)["counts"][ItemState.COMPLETED] == ITEMS
        assert set(billed) == {f"p{i:03d}" for i in range(ITEMS)}
        twice = {key: n for key, n in billed.items() if n > 1}
        assert all(n <= 1 + confirmed[key] for key, n in twice.items()), (trial, twice, confirmed)
        totals["billed"] += sum(billed.values())
        totals["billed twice, as confirmed"] += len(twice)
    print(f"\n{kind}: {TRIALS} trials, {totals.pop('kills')} kills; states present at a kill: {dict(seen_at_kill)}")
    print(f"kills landed: {dict(landed)}")
    print(f"ledger: {totals.pop('billed')} billable item-calls for {TRIALS * ITEMS} items; {dict(totals)}")
    assert {ItemState.RUNNING, ItemState.PENDING, ItemState.COMPLETED} <= set(seen_at_kill)


def test_a_held_item_is_shown_with_its_case_and_the_double_charge_warning(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "posts.jsonl", posts(5))
    killer = Killer(random.Random(1), target=1, mode="before answer")
    with Simulator(on_request=killer).start() as sim:
        (tmp_path / "job.toml").write_text(f'name = "crash"\ninput = "posts.jsonl"\n[provider]\nbase_url = "{sim.base_url}"\n')
        run_engine(tmp_path, killer, kill=True)
        held_run = run_engine(tmp_path, killer, kill=False)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        status = subprocess.run([sys.executable, "-m", "runner", "status", "crash"], cwd=tmp_path, env=env,
                                capture_output=True, text=True)
        confirmed = subprocess.run([sys.executable, "-m", "runner", "confirm", "crash", "--all", "--yes"],
                                   cwd=tmp_path, env=env, capture_output=True, text=True)
        done = run_engine(tmp_path, killer, kill=False)
        billed = sim.ledger.snapshot()["billed"]
    assert held_run == 4
    assert "resubmit" in status.stdout and "may run and charge twice" in " ".join(status.stdout.split())
    assert confirmed.stdout.startswith("plan: 5 items · 0 charge-safe · 5 may be billed again (est. $0.0006)\n"
                                       "5 items: sends the items again: the first call may have run")
    assert done == 0
    assert billed == {f"p{i:03d}": 2 for i in range(5)}
    assert json.loads(subprocess.run([sys.executable, "-m", "runner", "status", "crash", "--json"], cwd=tmp_path,
                                     env=env, capture_output=True, text=True).stdout)["needs_confirmation"] == 0


class SlowCreate:
    """Kills the engine as its create arrives, and lands that create only once the test lets it."""

    def __init__(self) -> None:
        self.pid: int | None = None
        self.land = threading.Event()
        self.listed = threading.Event()

    def on_call(self, method: str, path: str) -> None:
        if (method, path) == ("POST", "/v1/batches") and self.pid is not None:
            os.kill(self.pid, signal.SIGKILL)
            self.pid = None
            self.land.wait(timeout=60)
        elif (method, path) == ("GET", "/v1/batches"):
            self.listed.set()


def test_a_kill_during_a_slow_create_holds_its_items_until_that_create_can_no_longer_land(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "posts.jsonl", posts(5))
    upstream = SlowCreate()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "runner"]
    with Simulator(batch_seconds=0.05, on_call=upstream.on_call).start() as sim:
        job = JOB.format(kind="openai-batch", base_url=sim.base_url).replace("create_margin = 0.5", "create_margin = 60")
        (tmp_path / "job.toml").write_text(job)
        killed = subprocess.Popen([*command, "run", "job.toml"], cwd=tmp_path, env=env, stderr=subprocess.DEVNULL)
        upstream.pid = killed.pid
        assert killed.wait(timeout=60) == -signal.SIGKILL
        held = subprocess.run([*command, "run", "crash"], cwd=tmp_path, env=env, capture_output=True, text=True)
        status = subprocess.run([*command, "status", "crash"], cwd=tmp_path, env=env, capture_output=True, text=True)
        subprocess.run([*command, "confirm", "crash", "--all", "--yes"], cwd=tmp_path, env=env, check=True,
                       capture_output=True)
        upstream.listed.clear()
        resumed = subprocess.Popen([*command, "run", "crash"], cwd=tmp_path, env=env, stderr=subprocess.PIPE)
        assert upstream.listed.wait(timeout=60)  # it looked for the batch, which has not landed yet
        upstream.land.set()
        _, stderr = resumed.communicate(timeout=120)
        ledger = sim.ledger.snapshot()
    assert held.returncode == 4
    assert "adopt" in status.stdout and "may still land until" in " ".join(status.stdout.split())
    assert resumed.returncode == 0, stderr
    assert ledger["batches_created"] == 1 and ledger["billed"] == {f"p{i:03d}": 1 for i in range(5)}


class KillAtCreate:
    """Kills the engine as its first create arrives: the simulator makes the batch, the answer has nowhere to go."""

    def __init__(self) -> None:
        self.pid: int | None = None

    def on_call(self, method: str, path: str) -> None:
        if (method, path) == ("POST", "/v1/messages/batches") and self.pid is not None:
            os.kill(self.pid, signal.SIGKILL)
            self.pid = None


@pytest.mark.slow
def test_a_kill_during_an_anthropic_batch_create_is_recovered_by_adopting_that_batch_never_a_second(
    tmp_path: Path,
) -> None:
    write_jsonl(tmp_path / "posts.jsonl", posts(5))
    killer = KillAtCreate()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "runner"]

    def runner(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*command, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)

    with Simulator(batch_seconds=0.05, on_call=killer.on_call).start() as sim:
        (tmp_path / "job.toml").write_text(JOB.format(kind="anthropic-batch", base_url=sim.base_url.removesuffix("/v1")))
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


def test_an_item_whose_input_changed_while_interrupted_is_not_restored(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "posts.jsonl", posts(5))
    killer = Killer(random.Random(1), target=1, mode="before answer")
    with Simulator(on_request=killer).start() as sim:
        (tmp_path / "job.toml").write_text(JOB.format(kind="openai-chat", base_url=sim.base_url))
        assert run_engine(tmp_path, killer, kill=True) == -signal.SIGKILL
        changed = posts(5)
        changed[2]["body"] = "edited after the crash"
        write_jsonl(tmp_path / "posts.jsonl", changed)
        assert run_engine(tmp_path, killer, kill=False) == 4
        with Store(tmp_path / "runs.db") as store:
            failures = views.failures(store, "crash")
            held = [item.key for item in recovery.held(store, "crash")]
        requests = sim.ledger.snapshot()["requests"]
    assert [(f["key"], f["kind"]) for f in failures] == [("p002", "input_changed")]
    assert held == ["p000", "p001", "p003", "p004"]
    assert requests == 1


def test_a_second_engine_on_the_same_run_joins_it_and_nothing_is_sent_twice(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "posts.jsonl", posts(10))
    arrived, release = threading.Event(), threading.Event()

    def hold(ids: list[str]) -> None:
        arrived.set()
        release.wait(timeout=30)

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with Simulator(on_request=hold).start() as sim:  # (the held call must not time out and be sent again)
        (tmp_path / "job.toml").write_text(JOB.format(kind="openai-chat", base_url=sim.base_url).replace("timeout = 2", "timeout = 60"))
        first = subprocess.Popen([sys.executable, "-m", "runner", "run", "job.toml"], cwd=tmp_path, env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        assert arrived.wait(timeout=30)
        second = subprocess.Popen([sys.executable, "-m", "runner", "run", "job.toml"], cwd=tmp_path, env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        until(tmp_path / "runs.db", "crash", lambda standing: len(standing.workers) == 2)
        release.set()  # the first's two batches hold every item: the second waits beside it, then ends
        _, first_err = first.communicate(timeout=60)
        _, second_err = second.communicate(timeout=60)
        billed = sim.ledger.snapshot()["billed"]
    assert second.returncode == 0, second_err
    assert first.returncode == 0, first_err
    assert billed == {f"p{i:03d}": 1 for i in range(10)}
