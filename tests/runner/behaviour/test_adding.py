"""``runner add``: a file's records added to a run that exists, scheduled with ``--at``, keys it has skipped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import LedgerWatch, StepClock, add_all, make_job, posts, runner_cli, write_jsonl

from runner import adding, item_rows, lease, runs
from runner.errors import RunError
from runner.job_queue import parse_time
from runner.model import ItemState
from runner.sim import Simulator
from runner.store import Store, views
from runner.store.additions import Preparing

START = 1_800_000_000.0


async def test_nothing_is_sent_for_items_added_with_a_time_before_it_and_they_are_sent_after(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    job = make_job(tmp_path, sim.base_url, posts(2), max_items=10)
    await runs.execute(store, job, clock=StepClock(START))
    later = write_jsonl(tmp_path / "later.jsonl", posts(4)[2:])
    done = adding.add(store, "test", later, at=START + 3_600, now=START)
    assert (done.added, done.skipped) == (2, 0)
    clock = LedgerWatch(sim, START)
    outcome = await runs.execute(store, job, clock=clock, read_input=False)
    assert outcome.status["counts"][ItemState.COMPLETED] == 4
    assert [sorted(call["ids"]) for call in sim.ledger.snapshot()["calls"]] == [["p000", "p001"], ["p002", "p003"]]
    assert all(billed == {"p000", "p001"} for at, billed in clock.seen if at < START + 3_600)
    assert any(at < START + 3_600 for at, _ in clock.seen)  # the engine waited for the time, not stopped


async def test_keys_the_run_has_are_skipped_their_items_and_results_left_as_they_are(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    job = make_job(tmp_path, sim.base_url, posts(2))
    await runs.execute(store, job, clock=StepClock(START))
    before = {row["key"]: row["result"] for row in views.results(store, store.run_id("test"))}
    again = posts(3)
    again[1]["body"] = "a new body for a key the run has"
    added = write_jsonl(tmp_path / "added.jsonl", again)
    assert adding.add(store, "test", added, at=None, now=START) == adding.Added(1, 2, ("p000", "p001"))
    assert adding.add(store, "test", added, at=None, now=START) == adding.Added(0, 3, ("p000", "p001", "p002"))
    outcome = await runs.execute(store, job, clock=StepClock(START), read_input=False)
    assert outcome.status["counts"][ItemState.COMPLETED] == 3
    after = {row["key"]: row["result"] for row in views.results(store, store.run_id("test"))}
    assert {key: after[key] for key in before} == before
    assert [call["ids"] for call in sim.ledger.snapshot()["calls"]] == [["p000", "p001"], ["p002"]]


def test_runner_add_says_what_it_added_when_they_are_sent_and_which_keys_it_skipped(tmp_path: Path) -> None:
    job = make_job(tmp_path, "http://127.0.0.1:9/v1", posts(7))
    with Store(tmp_path / "runs.db") as store:
        add_all(store, job, now=START)
    write_jsonl(tmp_path / "more.jsonl", posts(9))
    said = runner_cli("add", "test", "more.jsonl", "--at", "4000000000", "--db", "runs.db", cwd=tmp_path)
    assert said.returncode == 0, said.stderr
    assert said.stdout.startswith("added 2 items to run 'test', scheduled for 2096-")
    assert "skipped 7 keys the run already has, their items left as they are: p000, p001, p002, p003, p004 " \
           "and 2 more" in said.stdout
    data = json.loads(runner_cli("status", "test", "--db", "runs.db", "--json", cwd=tmp_path).stdout)
    assert (data["scheduled"], data["next_scheduled_at"], data["counts"]["pending"]) == (2, 4_000_000_000.0, 7)


@pytest.mark.parametrize(("args", "message"), [
    (["nope", "more.jsonl"], "no run named 'nope'"),
    (["test", "missing.jsonl"], "missing.jsonl: input file not found"),
    (["test", "bad.jsonl"], "bad.jsonl line 2: no value for field 'id'"),
    (["test", "more.jsonl", "--at", "tomorrow"], "--at: 'tomorrow' is not a time (accepted: ISO 8601 with an offset"),
    (["test", "more.jsonl", "--at", "in 3 weeks"], "--at: not a time from now: 'in 3 weeks'"),
    (["test", "dupes.jsonl"], "dupes.jsonl: duplicate key 'p005', on line 1 and on line 2"),
])
def test_a_bad_add_is_one_line_exit_1_and_the_run_untouched(tmp_path: Path, args: list[str], message: str) -> None:
    job = make_job(tmp_path, "http://127.0.0.1:9/v1", posts(2))
    with Store(tmp_path / "runs.db") as store:
        add_all(store, job, now=START)
    write_jsonl(tmp_path / "more.jsonl", posts(4))
    write_jsonl(tmp_path / "bad.jsonl", [posts(6)[5], {"body": "no key"}])
    write_jsonl(tmp_path / "dupes.jsonl", [posts(6)[5], posts(6)[5]])
    said = runner_cli("add", *args, "--db", "runs.db", cwd=tmp_path)
    assert (said.returncode, said.stdout) == (1, "")
    assert said.stderr.count("\n") == 1 and message in said.stderr
    with Store(tmp_path / "runs.db", read_only=True) as store:
        assert views.standing(store, "test", now=START).total == 2


def test_a_time_from_now_is_counted_from_now() -> None:
    assert [parse_time(text, "--at", now=START) for text in ("in 90s", "in 10m", "in 2h", "in 1d")] == [
        START + 90, START + 600, START + 7_200, START + 86_400]


def test_a_run_whose_engine_is_reading_its_input_is_refused_until_it_is_done(tmp_path: Path, store: Store) -> None:
    job = make_job(tmp_path, "http://127.0.0.1:9/v1", posts(4))
    lease.acquire(store, "test", token="reading", now=START)
    store.add_items(job, list(item_rows.items(job))[:2], Preparing(), now=START, lease=("test", "reading"))
    with pytest.raises(RunError, match="run 'test' is reading its input: add to it once that is done"):
        adding.add(store, "test", write_jsonl(tmp_path / "more.jsonl", posts(6)[3:]), at=None, now=START)
    lease.release(store, "test", token="reading")
    assert adding.add(store, "test", tmp_path / "more.jsonl", at=None, now=START) == adding.Added(3, 0, ())
