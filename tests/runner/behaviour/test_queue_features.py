"""Issue 19's queue features over the simulator: scheduled items, priorities, a person's prioritize, SkipRetry."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from support import LedgerWatch, StepClock, add_all, make_job, posts, runner_cli

from runner import SkipRetry, control, runs
from runner.job_queue import Schedule
from runner.jobs import BatchLimits
from runner.model import FailureKind, ItemState
from runner.providers.handler import PythonHandler
from runner.sim import Simulator
from runner.store import Store, views

START = 1_800_000_000.0
#: An hour after the test clock starts, as ISO 8601 with ``Z``.
IN_AN_HOUR = datetime.fromtimestamp(START + 3_600, UTC).isoformat().replace("+00:00", "Z")


async def test_nothing_is_sent_for_a_scheduled_item_before_its_time(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    records = posts(4)
    records[1]["send_at"] = IN_AN_HOUR
    records[3]["send_at"] = START + 7_200  # epoch seconds
    job = replace(make_job(tmp_path, sim.base_url, records, max_items=10), schedule=Schedule("send_at"))
    clock = LedgerWatch(sim, START)
    outcome = await runs.execute(store, job, clock=clock)
    assert outcome.status["counts"][ItemState.COMPLETED] == 4
    assert [call["ids"] for call in sim.ledger.snapshot()["calls"]] == [["p000", "p002"], ["p001"], ["p003"]]
    assert all("p001" not in billed for at, billed in clock.seen if at < START + 3_600)
    assert all("p003" not in billed for at, billed in clock.seen if at < START + 7_200)
    assert any("p001" in billed for _, billed in clock.seen)  # the engine waited on, not stopped


class StatusWatch(StepClock):
    """A test clock that reads the run's status from the store each time the engine waits."""

    def __init__(self, store: Store) -> None:
        super().__init__(START)
        self.store = store
        self.seen: list[dict[str, Any]] = []

    async def sleep(self, seconds: float) -> None:
        if "test" in self.store.run_names():
            self.seen.append(views.status(self.store, "test", now=self.time))
        await super().sleep(seconds)


async def test_scheduled_items_are_counted_apart_from_back_off_waits(tmp_path: Path, sim: Simulator,
                                                                       store: Store) -> None:
    records = posts(3)
    records[0]["send_at"] = IN_AN_HOUR
    job = replace(make_job(tmp_path, sim.base_url, records), schedule=Schedule("send_at"))
    sim.set_faults({"rules": [{"fault": "http_429", "times": 1, "retry_after": 30}]})
    clock = StatusWatch(store)
    outcome = await runs.execute(store, job, clock=clock)
    both = [status for status in clock.seen if status["counts"][ItemState.WAITING] == 3]
    assert outcome.status["counts"][ItemState.COMPLETED] == 3
    assert both, "a 429's wait and the schedule's overlapped"
    assert {(status["scheduled"], status["next_scheduled_at"]) for status in both} == {(1, START + 3_600)}
    assert outcome.status["scheduled"] == 0 and outcome.status["next_scheduled_at"] is None


async def test_batches_are_formed_from_the_highest_priority_items_first(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    records = [{**post, "priority": rank} for post, rank in zip(posts(6), [0, 5, 1, 5, 9, 0], strict=True)]
    job = make_job(tmp_path, sim.base_url, records, max_items=2, concurrency=1)
    job = replace(job, batch=replace(job.batch, priority_field="priority"))
    await runs.execute(store, job)
    assert [sorted(call["ids"]) for call in sim.ledger.snapshot()["calls"]] == [
        ["p001", "p004"], ["p002", "p003"], ["p000", "p005"]]


async def test_a_person_prioritizes_items_and_the_next_batch_takes_them(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    job = make_job(tmp_path, sim.base_url, posts(6, groups=2), max_items=2, concurrency=1)
    add_all(store, job, now=START)
    assert control.prioritize(store, "test", keys=["p005"], to=3, now=START) == 1
    assert control.prioritize(store, "test", group="2026-01", keys=["p002"], to=2, now=START) == 1
    await runs.execute(store, job)
    calls = [call["ids"] for call in sim.ledger.snapshot()["calls"]]
    assert [sorted(call) for call in calls] == [["p001", "p005"], ["p000", "p002"], ["p004"], ["p003"]]
    assert "prioritize" in [row["command"] for row in views.command_tail(store, store.run_id("test"), limit=10)]


async def test_skip_retry_fails_the_items_at_once_retryable_by_a_person(tmp_path: Path, store: Store) -> None:
    calls: list[list[str]] = []

    async def handler(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        calls.append([item["id"] for item in items])
        if any(item["id"] == "p001" for item in items):
            raise SkipRetry("p001 cannot be read")
        return [{"id": item["id"], "label": "question"} for item in items]

    job = make_job(tmp_path, "http://127.0.0.1:9/v1", posts(3), max_items=1, max_attempts=5)
    outcome = await runs.execute(store, job, provider=PythonHandler(handler))
    assert outcome.status["counts"][ItemState.COMPLETED] == 2
    assert calls.count(["p001"]) == 1
    (failure,) = views.failures(store, "test")
    assert (failure["key"], failure["kind"], failure["attempts"], failure["retryable"]) == (
        "p001", FailureKind.SKIPPED_RETRY, 1, True)
    assert failure["message"] == "p001 cannot be read"


def test_runner_status_counts_scheduled_items_apart_in_text_and_json(tmp_path: Path) -> None:
    records = posts(3)
    records[2]["send_at"] = 4_000_000_000  # in 2096
    job = replace(make_job(tmp_path, "http://127.0.0.1:9/v1", records), schedule=Schedule("send_at"))
    with Store(tmp_path / "runs.db") as store:
        add_all(store, job, now=START)
    said = runner_cli("status", "test", "--db", "runs.db", cwd=tmp_path, columns=200)
    data = json.loads(runner_cli("status", "test", "--db", "runs.db", "--json", cwd=tmp_path).stdout)
    assert "1 item scheduled, the next at 2096-" in said.stdout
    assert (data["scheduled"], data["next_scheduled_at"], data["counts"]["waiting"]) == (1, 4_000_000_000.0, 1)


async def test_nothing_is_sent_before_the_time_a_run_was_given_for_the_items_it_adds(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    records = posts(3)
    records[2]["send_at"] = START + 60  # its own time stands
    job = replace(make_job(tmp_path, sim.base_url, records), schedule=Schedule("send_at", at=START + 3_600))
    clock = LedgerWatch(sim, START)
    await runs.execute(store, job, clock=clock)
    assert [sorted(call["ids"]) for call in sim.ledger.snapshot()["calls"]] == [["p002"], ["p000", "p001"]]
    assert all(billed <= {"p002"} for at, billed in clock.seen if at < START + 3_600)
    again = replace(job, schedule=Schedule("send_at"))  # run again without it: no input changed
    assert (await runs.execute(store, again, clock=clock)).status["counts"][ItemState.COMPLETED] == 3
    assert len(sim.ledger.snapshot()["calls"]) == 2


def test_a_bad_time_given_to_runner_run_is_one_line_exit_1_and_no_store(tmp_path: Path) -> None:
    make_job(tmp_path, "http://127.0.0.1:9/v1", posts(2))
    (tmp_path / "job.toml").write_text('name = "t"\ninput = "test.jsonl"\n', encoding="utf-8")
    said = runner_cli("run", "job.toml", "--at", "tomorrow", cwd=tmp_path)
    assert (said.returncode, said.stdout) == (1, "")
    assert len(said.stderr.strip().splitlines()) == 1 and "'tomorrow'" in said.stderr
    assert not (tmp_path / "runs.db").exists()
