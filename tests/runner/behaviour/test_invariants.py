"""The brief's five invariants, each over real HTTP against the simulator."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from scenes import location_of, reopened
from support import ROOT, StepClock, events_into, make_job, posts, runner_cli, write_jsonl

from runner import lease, runs
from runner.store import views
from runner.sim import Simulator
from runner.model import ItemState
from runner.store import Settlement, Store

ENGINE_SCRIPT = """
import asyncio, json, os, signal, sys
sys.path[:0] = [{root!r}, {tests!r}]
from support import make_job
from runner import runs
from runner.sim import Simulator
from runner.store import Store
from pathlib import Path

def kill_self(result):
    os.kill(os.getpid(), signal.SIGKILL)

job = make_job(Path({folder!r}), {base_url!r}, json.loads({records!r}), check={check})
asyncio.run(runs.execute(Store({db!r}), job))
"""


def start_engine(tmp_path: Path, sim: Simulator, records: list[dict[str, object]], *, check: str) -> subprocess.Popen[bytes]:
    """An engine in a process of its own, so that the test can really kill it."""
    script = ENGINE_SCRIPT.format(
        root=str(ROOT), tests=str(ROOT / "tests"), base_url=sim.base_url, folder=str(tmp_path),
        records=json.dumps(records), check=check, db=str(tmp_path / "runs.db"),
    )
    return subprocess.Popen([sys.executable, "-c", script])


def item_rows(db: Path | str) -> dict[str, tuple[str, int, str | None]]:
    """Each item's state, attempts and output, as another connection reads them now."""
    with Store(db, read_only=True) as store:
        return {r["key"]: (r["state"], r["attempts"], r["output"]) for r in views.items(store, store.run_id("test"))}


def states(store: Store, run_id: int) -> dict[str, int]:
    """How many of the run's items are in each state, counted item by item."""
    return dict(Counter(r["state"] for r in views.items(store, run_id)))


async def test_running_is_committed_before_any_upstream_request(tmp_path: Path, store: Store) -> None:
    seen: dict[str, tuple[str, int]] = {}

    def look_in_the_store(ids: list[str]) -> None:
        rows = item_rows(location_of(store))
        for key in ids:
            seen[key] = rows[key][:2]

    with Simulator(on_request=look_in_the_store).start() as sim:
        job = make_job(tmp_path, sim.base_url, posts(60, groups=2), max_items=10)
        await runs.execute(store, job)
    assert len(seen) == 60
    assert set(seen.values()) == {(ItemState.RUNNING, 1)}


def test_a_killed_engine_leaves_every_sent_item_running(tmp_path: Path) -> None:
    arrived = threading.Event()
    hold = threading.Event()

    def hold_the_request(ids: list[str]) -> None:
        arrived.set()
        hold.wait(timeout=30)

    with Simulator(on_request=hold_the_request).start() as sim:
        engine = start_engine(tmp_path, sim, posts(20), check="None")
        assert arrived.wait(timeout=30)
        engine.send_signal(signal.SIGKILL)
        engine.wait()
        hold.set()
        sent = {key for call in sim.ledger.snapshot()["calls"] for key in call["ids"]}
    rows = item_rows(tmp_path / "runs.db")
    assert sent and {rows[key][:2] for key in sent} == {(ItemState.RUNNING, 1)}


def test_output_is_committed_as_received_before_validation(tmp_path: Path, sim: Simulator) -> None:
    engine = start_engine(tmp_path, sim, posts(3), check="kill_self")
    assert engine.wait(timeout=60) == -signal.SIGKILL
    rows = item_rows(tmp_path / "runs.db")
    assert {state for state, _, _ in rows.values()} == {ItemState.RECEIVED}
    assert all(json.loads(output)["id"] == key for key, (_, _, output) in rows.items())


async def test_received_output_is_completed_locally_after_a_crash(tmp_path: Path, sim: Simulator) -> None:
    engine = start_engine(tmp_path, sim, posts(3), check="kill_self")
    engine.wait(timeout=60)
    paid = sim.ledger.snapshot()["requests"]
    with Store(tmp_path / "runs.db") as store:
        job = dataclasses.replace(store.job("test"), check=lambda result: None)  # its check killed it: one that passes
        outcome = await runs.execute(store, job)
    assert outcome.status["counts"][ItemState.COMPLETED] == 3
    assert sim.ledger.snapshot()["requests"] == paid == 1


async def test_completed_only_after_validation_passed(tmp_path: Path, sim: Simulator, store: Store, clock: StepClock) -> None:
    def only_two_labels(result: dict[str, object]) -> str | None:
        return None if result["label"] in ("question", "bug_report") else "label not allowed"

    job = make_job(tmp_path, sim.base_url, posts(40), max_attempts=2, check=only_two_labels)
    outcome = await runs.execute(store, job, clock=clock)
    rows = {r["key"]: r for r in views.items(store, store.run_id("test"))}
    results = {r["key"]: json.loads(r["result"]) for r in views.results(store, store.run_id("test"))}
    completed = {k for k, r in rows.items() if r["state"] == ItemState.COMPLETED}
    valid = {k for k, r in rows.items() if json.loads(r["output"])["label"] in ("question", "bug_report")}
    assert completed == valid == set(results) and 0 < len(completed) < 40
    assert all(result["label"] in ("question", "bug_report") for result in results.values())
    assert outcome.status["counts"][ItemState.FAILED] == 40 - len(completed)
    assert {r["paid_calls"] for k, r in rows.items() if k not in completed} == {2}


async def test_an_empty_queue_does_not_end_the_run(tmp_path: Path, sim: Simulator, store: Store, clock: StepClock) -> None:
    """Re-attempts wait in the store, not in a queue: the run ends only when the store says so."""
    job = make_job(tmp_path, sim.base_url, posts(30), check=lambda r: "no 'other'" if r["label"] == "other" else None)
    outcome = await runs.execute(store, job, clock=clock)
    assert outcome.status["counts"][ItemState.WAITING] == 0
    assert outcome.status["counts"][ItemState.COMPLETED] + outcome.status["counts"][ItemState.FAILED] == 30
    failed_attempts = {r["attempts"] for r in views.items(store, store.run_id("test")) if r["state"] == "failed"}
    assert failed_attempts == {3}


async def test_two_batches_of_one_group_finishing_at_once_lose_no_update(tmp_path: Path, store: Store) -> None:
    both_in_flight = threading.Barrier(2, timeout=30)
    with Simulator(on_request=lambda ids: both_in_flight.wait()).start() as sim:
        job = make_job(tmp_path, sim.base_url, posts(50), max_items=25, concurrency=2)
        outcome = await runs.execute(store, job)
        billed = sim.ledger.snapshot()["billed"]
    assert outcome.status["counts"][ItemState.COMPLETED] == 50
    assert billed == {f"p{i:03d}": 1 for i in range(50)}
    completions = sum(event["items"] for event in events_into(store, "completed"))
    assert completions == 50


def test_two_connections_settling_one_group_at_once_lose_no_update(tmp_path: Path, store: Store) -> None:
    """The same at the store level: two connections commit two batches of one group at once."""
    job = make_job(tmp_path, "http://127.0.0.1:9/v1", posts(50))
    run_id = runs.prepare(store, job, now=1.0)
    lease.acquire(store, "test", token="engine", now=1.0)
    batches = [store.claim_batch(run_id, max_items=25, max_chars=10**6, now=1.0, owner="engine") for _ in range(2)]
    started = {
        b.id: store.start_batch(b.id, lease=("test", "engine"), max_attempts=3, now=2.0) for b in batches if b
    }
    for batch_id, items in started.items():
        store.record_answer(batch_id, {item.id: "{}" for item in items}, raw="{}", now=2.5)
    together = threading.Barrier(2, timeout=30)

    def settle(batch_id: int) -> None:
        with reopened(store) as own:
            together.wait()
            done = Settlement(completed=[item.id for item in started[batch_id]])
            own.settle_batch(batch_id, done, now=3.0)

    threads = [threading.Thread(target=settle, args=(batch_id,)) for batch_id in started]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    recount = [r["state"] for r in views.items(store, run_id)].count(ItemState.COMPLETED)
    assert views.counts(store, run_id)["2026-01"][ItemState.COMPLETED] == recount == 50


async def test_an_engine_another_worker_found_dead_starts_nothing_more(tmp_path: Path, store: Store) -> None:
    taken = threading.Event()

    def another_worker_finds_it_dead(ids: list[str]) -> None:
        if not taken.is_set():
            with reopened(store) as other:
                other.recover(other.run_id("test"), now=time.time(), lives=lambda worker: False)
            taken.set()

    with Simulator(on_request=another_worker_finds_it_dead).start() as sim:
        job = make_job(tmp_path, sim.base_url, posts(50), max_items=5, concurrency=1)
        outcome = await runs.execute(store, job)
        calls = sim.ledger.snapshot()["requests"]
    assert calls == 1
    assert outcome.stopped_for == "another worker found this one dead (its heartbeat was late) and took its batches over"
    assert outcome.exit_code == 4


def test_a_worker_that_stops_gives_back_only_its_own_queued_batches(tmp_path: Path, store: Store) -> None:
    """What another worker of the run formed stays queued, its to start."""
    job = make_job(tmp_path, "http://127.0.0.1:9/v1", posts(10))
    run_id = runs.prepare(store, job, now=1.0)
    lease.join(store, "test", token="stops", now=100.0)
    lease.join(store, "test", token="goes on", now=100.0)
    formed = store.claim_batch(run_id, max_items=5, max_chars=10**6, now=100.0, owner="goes on")
    assert formed is not None
    store.release_queued(run_id, lease=("test", "stops"), now=101.0)
    assert states(store, run_id) == {"pending": 5, "queued": 5}
    store.release_queued(run_id, lease=("test", "goes on"), now=102.0)
    assert states(store, run_id) == {"pending": 10}


class HeldCalls:
    """The simulator's hook that holds every call until ``release``; ``arrived`` once ``expected`` calls came."""

    def __init__(self, expected: int) -> None:
        self.expected, self.calls, self.lock = expected, 0, threading.Lock()
        self.arrived, self.release = threading.Event(), threading.Event()

    def __call__(self, ids: list[str]) -> None:
        with self.lock:  # the simulator serves each call in a thread of its own
            self.calls += 1
            if self.calls == self.expected:
                self.arrived.set()
        self.release.wait(timeout=30)


def interrupted_run(tmp_path: Path, sim: Simulator) -> subprocess.Popen[str]:
    """``runner run job.toml`` over 60 posts against ``sim``, its stderr piped for the test to read."""
    write_jsonl(tmp_path / "posts.jsonl", posts(60))
    (tmp_path / "job.toml").write_text(f'name = "test"\ninput = "posts.jsonl"\n[provider]\nbase_url = "{sim.base_url}"\n')
    return subprocess.Popen(
        [sys.executable, "-m", "runner", "run", "job.toml"], cwd=tmp_path, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )


def said_stopping(cli: subprocess.Popen[str]) -> str:
    """The line the CLI prints on its first Ctrl-C, read up to it: by then the engine was told to stop."""
    assert cli.stderr is not None
    for line in cli.stderr:
        if line.startswith("stopping:"):
            return line
    raise AssertionError("the CLI never said it was stopping")


def gently_stopped(tmp_path: Path, by: signal.Signals) -> tuple[int, str, str, int]:
    """``runner run`` sent ``by`` once its first call is with the upstream, which then answers it: its exit code,
    the line it said it was stopping with, the rest of its stderr, and how many calls it made."""
    upstream = HeldCalls(1)
    with Simulator(on_request=upstream).start() as sim:
        cli = interrupted_run(tmp_path, sim)
        assert upstream.arrived.wait(timeout=30)
        cli.send_signal(by)
        stopping = said_stopping(cli)  # an event, not a time: no call is answered before the engine heard it
        upstream.release.set()
        assert cli.stderr is not None
        stderr = cli.stderr.read()
        cli.wait(timeout=60)
        cli.stderr.close()
        return cli.returncode, stopping, stderr, sim.ledger.snapshot()["requests"]


def test_ctrl_c_lets_the_calls_in_flight_finish_then_exits_4(tmp_path: Path) -> None:
    code, stopping, stderr, sent = gently_stopped(tmp_path, signal.SIGINT)
    rows = item_rows(tmp_path / "runs.db")
    assert code == 4, stderr
    assert stopping == ("stopping: the batches in flight finish first (Ctrl-C again cuts them short); "
                        "Ctrl-C needs no resume; to go on later:\n")
    assert stderr.startswith("runner run test\n"), "the command alone on the line after the stopping line"
    assert "stopped: interrupted by Ctrl-C\nto go on:\nrunner run test\n" in stderr
    assert {state for state, _, _ in rows.values()} == {ItemState.COMPLETED, ItemState.PENDING}
    assert sum(state == ItemState.COMPLETED for state, _, _ in rows.values()) == 25 * sent


def test_a_sigterm_stops_the_run_as_gently_as_a_ctrl_c_holding_nothing(tmp_path: Path) -> None:
    code, stopping, stderr, sent = gently_stopped(tmp_path, signal.SIGTERM)  # kill, timeout, docker stop
    rows = item_rows(tmp_path / "runs.db")
    assert code == 4, stderr
    assert stopping == ("stopping: the batches in flight finish first (a second SIGTERM or Ctrl-C cuts them short); "
                        "it needs no resume; to go on later:\n")
    assert "stopped: asked to stop by SIGTERM\nto go on:\nrunner run test\n" in stderr
    assert {state for state, _, _ in rows.values()} == {ItemState.COMPLETED, ItemState.PENDING}
    assert sum(state == ItemState.COMPLETED for state, _, _ in rows.values()) == 25 * sent


def aborted_run(tmp_path: Path, sim: Simulator, upstream: HeldCalls) -> tuple[int, str]:
    """``runner run`` given a Ctrl-C once ``upstream`` holds its calls, then a second one: its exit code and stderr.

    The upstream lets its calls go once the process has ended.
    """
    cli = interrupted_run(tmp_path, sim)
    assert upstream.arrived.wait(timeout=30)
    cli.send_signal(signal.SIGINT)
    said_stopping(cli)
    cli.send_signal(signal.SIGINT)
    assert cli.stderr is not None
    stderr = cli.stderr.read()
    cli.wait(timeout=60)
    cli.stderr.close()
    upstream.release.set()
    return cli.returncode, stderr


def test_a_second_ctrl_c_exits_4_and_the_calls_it_cut_short_are_held_for_confirmation(tmp_path: Path) -> None:
    upstream = HeldCalls(2)  # both slots' calls are with the upstream
    with Simulator(on_request=upstream).start() as sim:
        code, stderr = aborted_run(tmp_path, sim, upstream)
        again = subprocess.run([sys.executable, "-m", "runner", "run", "test"], cwd=tmp_path, text=True,
                               env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True)
    with Store(tmp_path / "runs.db", read_only=True) as store:
        status = views.status(store, "test", now=time.time())
    assert code == 4, stderr
    assert stderr == ("runner run test\n"  # the stopping line's command, alone on its line
                      "aborted: the calls cut short are held for confirmation; to see them and go on:\n"
                      "runner run test\n")
    assert again.returncode == 4, again.stderr
    assert (status["needs_confirmation"], status["counts"]["completed"]) == (50, 10)


def test_after_a_second_ctrl_c_the_held_items_are_shown_and_confirmed_before_any_new_run(tmp_path: Path) -> None:
    """The aborting engine holds what it cut short itself: ``status`` and ``confirm`` see it at once, as it says."""
    upstream = HeldCalls(2)
    with Simulator(on_request=upstream).start() as sim:
        code, _ = aborted_run(tmp_path, sim, upstream)
        status = json.loads(runner_cli("status", "test", "--json", cwd=tmp_path).stdout)
        confirmed = runner_cli("confirm", "test", "--all", "--yes", cwd=tmp_path)
    assert code == 4
    assert (status["needs_confirmation"], status["maybe_paid"], status["engine"]["alive"]) == (50, 50, False)
    assert (status["counts"]["running"], status["counts"]["pending"]) == (50, 10)
    assert confirmed.returncode == 0, confirmed.stderr
    assert confirmed.stdout.endswith("released 50 items; to go on:\nrunner run test\n")
