"""A shared queue's holds in the store: what the other runs hold counts only while their engine lives."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from scenes import reopened
from support import add_all, make_job, posts
from test_contract import rule

from runner import liveness
from runner.store import Store

NOW = 1_800_000_000.0
URL = "http://127.0.0.1:9/v1"


def engine_of(store: Store, tmp_path: Path, name: str, *, priority: int = 0) -> int:
    """The run ``name`` made, its lease taken at ``NOW`` by the engine ``name`` (this process), in the queue ``q``."""
    job = make_job(tmp_path, URL, posts(2), name=name)
    run_id = add_all(store, dataclasses.replace(job, provider=dataclasses.replace(job.provider, queue="q")), now=NOW)
    store.join_run(name, token=name, pid=os.getpid(), host=liveness.this_host(), now=NOW, choose=rule(name, NOW))
    store.join_queue(run_id, "q", token=name, priority=priority, concurrency=2)
    return run_id


def test_the_slots_of_an_engine_whose_lease_died_come_back_to_the_queue(tmp_path: Path, store: Store) -> None:
    a, b = engine_of(store, tmp_path, "a"), engine_of(store, tmp_path, "b")
    store.hold_in_queue(a, token="a", held=2, waiting=0)
    held_while_alive = store.run_queue(b, token="b")
    store.beat("b", token="b", now=NOW + liveness.LEASE_SECONDS)
    dropped = store.sweep_queue("q", lives=lambda holder: liveness.lives(holder, NOW + liveness.LEASE_SECONDS))
    assert held_while_alive is not None and held_while_alive.others == 2
    assert dropped == 1
    assert (queue := store.run_queue(b, token="b")) is not None and queue.others == 0


def test_what_an_engine_that_left_its_run_held_does_not_count(tmp_path: Path, store: Store) -> None:
    a, b = engine_of(store, tmp_path, "a"), engine_of(store, tmp_path, "b")
    store.hold_in_queue(a, token="a", held=2, waiting=0)
    store.leave_run("a", token="a")
    assert (queue := store.run_queue(b, token="b")) is not None and queue.others == 0


def test_the_holds_of_two_workers_of_one_run_both_count_for_the_queues_other_runs(
    tmp_path: Path, store: Store
) -> None:
    a, b = engine_of(store, tmp_path, "a"), engine_of(store, tmp_path, "b")
    store.join_run("a", token="a2", pid=os.getpid(), host=liveness.this_host(), now=NOW, choose=rule("a2", NOW))
    store.join_queue(a, "q", token="a2", priority=0, concurrency=2)
    store.hold_in_queue(a, token="a", held=1, waiting=0)
    store.hold_in_queue(a, token="a2", held=1, waiting=1)
    assert (queue := store.run_queue(b, token="b")) is not None and queue.others == 2
    assert [(run["run"], run["held"], run["waiting"]) for run in store.queues()[0]["runs"]] == [
        ("a", 2, 1), ("b", 0, 0)]


def test_a_worker_joining_a_queue_drops_its_runs_holds_of_workers_gone_from_the_run(
    tmp_path: Path, store: Store
) -> None:
    a, b = engine_of(store, tmp_path, "a"), engine_of(store, tmp_path, "b")
    store.hold_in_queue(a, token="a", held=1, waiting=0)
    store.leave_run("a", token="a")
    store.join_run("a", token="again", pid=os.getpid(), host=liveness.this_host(), now=NOW, choose=rule("again", NOW))
    store.join_queue(a, "q", token="again", priority=0, concurrency=2)
    store.hold_in_queue(a, token="again", held=2, waiting=0)
    assert store.rows("SELECT token FROM queue_holds WHERE run_id = ?", [a]) == [{"token": "again"}]
    assert (queue := store.run_queue(b, token="b")) is not None and queue.others == 2


def test_only_runs_of_a_higher_priority_count_as_ahead_of_a_run_waiting_for_a_slot(
    tmp_path: Path, store: Store
) -> None:
    low, high = engine_of(store, tmp_path, "low"), engine_of(store, tmp_path, "high", priority=5)
    store.hold_in_queue(low, token="low", held=0, waiting=3)
    store.hold_in_queue(high, token="high", held=0, waiting=2)
    assert (of_low := store.run_queue(low, token="low")) is not None and of_low.ahead == 2
    assert (of_high := store.run_queue(high, token="high")) is not None and of_high.ahead == 0


def test_a_sweep_that_finds_every_hold_alive_writes_nothing(tmp_path: Path, store: Store) -> None:
    a = engine_of(store, tmp_path, "a")
    store.hold_in_queue(a, token="a", held=2, waiting=0)
    with reopened(store, read_only=True) as reading:  # a write there would fail
        assert reading.sweep_queue("q", lives=lambda holder: liveness.lives(holder, NOW)) == 0
    assert (queue := store.run_queue(engine_of(store, tmp_path, "b"), token="b")) is not None and queue.others == 2
