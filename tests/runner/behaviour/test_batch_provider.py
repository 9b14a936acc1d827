"""Providers that submit and poll: the Batch API against the simulator, and a user's own pair."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from scenes import create_never_sent, dead_engine
from support import SharedClock, StepClock, batch_job, events_into, make_job, posts, write_jsonl

from runner import jobs, recovery, runs
from runner.store import views
from runner.engine import Outcome
from runner.errors import SubmitUnknown
from runner.jobs import Job, Prompt, ProviderConfig
from runner.protocol import BatchItems
from runner.providers import Answer
from runner.providers.handler import PythonTasks
from runner.providers import openai_batch
from runner.providers.openai_batch import OpenAIBatch
from runner.sim import Simulator
from runner.sim.clock import Clock
from runner.model import FailureKind, ItemState
from runner.store import Store


@pytest.fixture
def upstream() -> Iterator[Simulator]:
    with Simulator(batch_seconds=0.0).start() as sim:
        yield sim


def tasks(store: Store) -> list[str | None]:
    return [r["upstream_id"] for r in views.batches(store, store.run_id("test"))]


def items(store: Store) -> list[dict[str, Any]]:
    return views.items(store, store.run_id("test"))



async def confirmed_then_run_on_a_healthy_upstream(
    upstream: Simulator, store: Store, job: Job, clock: StepClock
) -> tuple[Outcome, dict[str, Any]]:
    """The upstream healed, a person confirms what was held and runs the job again: its outcome and the ledger."""
    upstream.set_faults(None)
    recovery.confirm(store, "test", now=clock.now())
    done = await runs.execute(store, job, clock=clock)
    return done, upstream.ledger.snapshot()

async def test_a_batch_is_submitted_its_id_saved_and_its_lines_completed(
    tmp_path: Path, upstream: Simulator, store: Store, clock: StepClock
) -> None:
    outcome = await runs.execute(store, batch_job(tmp_path, upstream, posts(30, groups=2), max_items=10), clock=clock)
    ledger = upstream.ledger.snapshot()
    assert outcome.status["counts"][ItemState.COMPLETED] == 30
    assert ledger["batches_created"] == 4 and set(ledger["billed"].values()) == {1}
    assert all(task and task.startswith("batch_") for task in tasks(store))
    assert {r["paid_calls"] for r in items(store)} == {1}


async def test_a_create_whose_answer_was_lost_is_adopted_from_the_list_not_created_again(
    tmp_path: Path, upstream: Simulator, store: Store, clock: StepClock
) -> None:
    upstream.set_faults({"rules": [{"fault": "create_lost", "times": 1}]})
    outcome = await runs.execute(store, batch_job(tmp_path, upstream, posts(5)), clock=clock)
    ledger = upstream.ledger.snapshot()
    assert outcome.status["counts"][ItemState.COMPLETED] == 5
    assert ledger["batches_created"] == 1 and set(ledger["billed"].values()) == {1}
    assert ledger["faults"] == {"create_lost": 1}


async def test_a_task_the_upstream_no_longer_knows_fails_and_nothing_is_resubmitted(
    tmp_path: Path, upstream: Simulator, store: Store, clock: StepClock
) -> None:
    upstream.set_faults({"rules": [{"fault": "batch_unknown", "keys": ["p000"]}]})
    outcome = await runs.execute(store, batch_job(tmp_path, upstream, posts(10), max_items=5), clock=clock)
    failures = views.failures(store, "test")
    assert {(f["kind"], f["retryable"]) for f in failures} == {(FailureKind.NOT_FOUND, True)}
    assert [f["key"] for f in failures] == [f"p00{i}" for i in range(5)]
    assert "nothing was submitted again" in failures[0]["message"]
    assert upstream.ledger.snapshot()["batches_created"] == 2
    assert outcome.status["counts"][ItemState.COMPLETED] == 5


async def test_an_expired_batch_keeps_its_answered_lines_and_sends_the_others_again_unbilled(
    tmp_path: Path, upstream: Simulator, store: Store
) -> None:
    upstream.set_faults({"rules": [{"fault": "expire", "times": 1}]})
    job = batch_job(tmp_path, upstream, posts(6))
    job = replace(job, retry=replace(job.retry, max_backoff=3600.0))
    outcome = await runs.execute(store, job, clock=SharedClock(upstream))
    billed = upstream.ledger.snapshot()["billed"]
    assert outcome.status["counts"][ItemState.COMPLETED] == 6
    assert set(billed.values()) == {1} and len(billed) == 6
    assert {r["attempts"] for r in items(store) if r["key"] > "p002"} == {2}


class PollsTimed(OpenAIBatch):
    """The Batch API provider, noting the simulator's time of each poll, by task."""

    def __init__(self, sim: Simulator, job: Job) -> None:
        super().__init__(job.provider, job.prompt, job.output_schema, client=httpx.AsyncClient(), api_key=None)
        self.sim = sim
        self.polls: dict[str, list[float]] = {}

    async def poll(self, task_id: str) -> Any:
        self.polls.setdefault(task_id, []).append(self.sim.clock.now())
        return await super().poll(task_id)


async def test_a_batch_s_end_is_noticed_within_ten_seconds_or_ten_percent_of_the_wait_by_paced_polls(
    tmp_path: Path, store: Store
) -> None:
    """Batches of 6 h upstream: 74 polls each, the end seen at most 36 min late (doubling pauses: 16, 3.1 h late)."""
    with Simulator(batch_seconds=6 * 3600.0, clock=Clock(lambda: 1_800_000_000.0)).start() as sim:
        job = batch_job(tmp_path, sim, posts(6, groups=2), concurrency=1)
        provider = PollsTimed(sim, job)
        outcome = await runs.execute(store, job, clock=SharedClock(sim), provider=provider)
        timeline = sim.batches.timeline()
        await provider._client.aclose()
    assert outcome.exit_code == 0 and outcome.status["counts"][ItemState.COMPLETED] == 6
    assert sorted(provider.polls) == sorted(timeline) and len(timeline) == 2
    for task, times in provider.polls.items():
        created, ended = timeline[task]
        assert times[0] == created and len(times) == 74
        assert times[-2] < ended <= times[-1] <= ended + max(10.0, 0.1 * (ended - created))


def leave_a_sent_batch(store: Store, job: Job, now: float) -> int:
    """What a killed engine leaves: a batch marked running, its submit intent written, no answer."""
    run_id = runs.prepare(store, job, now=now)
    batch = store.claim_batch(run_id, max_items=25, max_chars=10**6, now=now, owner="dead")
    assert batch is not None
    with dead_engine(store, "test") as lease:
        store.start_batch(batch.id, lease=lease, max_attempts=3, now=now, intent=False)
        store.mark_intent(batch.id, now=now)
        store.mark_create_sent(batch.id, lands_by=now + 90)
    return batch.id


async def test_after_a_crash_the_batch_it_may_have_created_is_looked_for_once_confirmed(
    tmp_path: Path, upstream: Simulator, store: Store, clock: StepClock
) -> None:
    job = batch_job(tmp_path, upstream, posts(5))
    leave_a_sent_batch(store, job, clock.now())
    held = await runs.execute(store, job, clock=clock)
    assert held.exit_code == 4 and held.status["needs_confirmation"] == 5
    assert {item.case for item in recovery.held(store, "test")} == {recovery.Case.ADOPT}
    assert recovery.confirm(store, "test", now=clock.now())[recovery.Case.ADOPT] == 5
    done = await runs.execute(store, job, clock=clock)
    assert done.status["counts"][ItemState.COMPLETED] == 5
    assert upstream.ledger.snapshot()["batches_created"] == 1


async def test_after_a_crash_before_the_create_was_sent_the_items_go_back_to_pending_with_no_person(
    tmp_path: Path, upstream: Simulator, store: Store, clock: StepClock
) -> None:
    job = batch_job(tmp_path, upstream, posts(5))
    batch_id = leave_a_sent_batch(store, job, clock.now())
    create_never_sent(store, batch_id)
    done = await runs.execute(store, job, clock=clock)
    assert done.exit_code == 0 and done.status["counts"][ItemState.COMPLETED] == 5
    assert upstream.ledger.snapshot()["batches_created"] == 1


async def test_a_slow_create_that_lands_after_the_client_gave_up_is_adopted_not_created_again(
    tmp_path: Path, upstream: Simulator, store: Store
) -> None:
    upstream.set_faults({"rules": [{"fault": "create_slow", "seconds": 1.0, "times": 1}]})
    job = batch_job(tmp_path, upstream, posts(5), timeout=0.3)
    job = replace(job, provider=replace(job.provider, create_margin=10.0))  # found as it lands, long before
    outcome = await runs.execute(store, job)
    ledger = upstream.ledger.snapshot()
    assert outcome.status["counts"][ItemState.COMPLETED] == 5
    assert ledger["batches_created"] == 1 and ledger["billed"] == {f"p{i:03d}": 1 for i in range(5)}


async def test_a_create_made_twice_upstream_is_cancelled_and_shown_as_an_unknown_charge(
    tmp_path: Path, store: Store
) -> None:
    with Simulator(batch_seconds=30.0).start() as sim:
        sim.set_faults({"rules": [{"fault": "create_twice", "times": 1}]})
        clock = SharedClock(sim)
        outcome = await runs.execute(store, batch_job(tmp_path, sim, posts(4)), clock=clock)
        ledger = sim.ledger.snapshot()
    (duplicate,) = views.duplicates(store, 1)
    assert duplicate["cancelled"] == 1 and "may have billed" in duplicate["message"]
    assert outcome.status["duplicate_tasks"] == 1
    assert outcome.status["counts"][ItemState.COMPLETED] == 4
    assert ledger["batches_created"] == 2 and ledger["billed"] == {f"p{i:03d}": 1 for i in range(4)}
    assert {r["maybe_paid"] for r in items(store)} == {1}
    history = views.item_history(store, 1)
    assert [h["kind"] for h in history if h["kind"] == "duplicate"] == ["duplicate"]


async def test_after_a_crash_a_saved_task_is_polled_once_confirmed_and_never_submitted_again(
    tmp_path: Path, upstream: Simulator, store: Store, clock: StepClock
) -> None:
    job = batch_job(tmp_path, upstream, posts(5))
    batch_id = leave_a_sent_batch(store, job, clock.now())
    async with httpx.AsyncClient() as client:
        provider = OpenAIBatch(job.provider, job.prompt, None, client=client, api_key=None)
        run_id = store.run_id("test")
        payloads = BatchItems([views.item(store, run_id, r["key"])["input"] for r in items(store)])
        store.save_task_id(batch_id, await provider.create("elsewhere:1", await provider.upload("elsewhere:1", payloads)))
    held = await runs.execute(store, job, clock=clock)
    assert {item.case for item in recovery.held(store, "test")} == {recovery.Case.POLL}
    assert "no new charge" in recovery.Case.POLL.warning
    recovery.confirm(store, "test", now=clock.now(), keys=["p000", "p001", "p002", "p003", "p004"])
    done = await runs.execute(store, job, clock=clock)
    ledger = upstream.ledger.snapshot()
    assert held.exit_code == 4 and done.status["counts"][ItemState.COMPLETED] == 5
    assert ledger["batches_created"] == 1 and set(ledger["billed"].values()) == {1}


async def test_a_task_that_cannot_be_polled_holds_its_items_and_a_person_polls_it_again(
    tmp_path: Path, upstream: Simulator, store: Store, clock: StepClock
) -> None:
    upstream.set_faults({"rules": [{"fault": "poll_503"}]})
    job = batch_job(tmp_path, upstream, posts(5))
    stopped = await runs.execute(store, job, clock=clock)
    assert stopped.exit_code == 4 and "polling task batch_" in (stopped.stopped_for or "")
    assert {item.case for item in recovery.held(store, "test")} == {recovery.Case.POLL}
    done, ledger = await confirmed_then_run_on_a_healthy_upstream(upstream, store, job, clock)
    assert done.status["counts"][ItemState.COMPLETED] == 5
    assert ledger["batches_created"] == 1 and set(ledger["billed"].values()) == {1}


async def test_an_engine_waiting_for_a_person_submits_no_more_tasks_once_one_cannot_be_polled(
    tmp_path: Path, upstream: Simulator, store: Store, clock: StepClock
) -> None:
    upstream.set_faults({"rules": [{"fault": "poll_503"}]})
    job = batch_job(tmp_path, upstream, posts(40), max_items=5, concurrency=1)
    # Bounded: an engine that waited out this stop would go on submitting for ever on the step clock.
    stopped = await asyncio.wait_for(runs.execute(store, job, clock=clock, wait_for_person=True), timeout=120)
    assert stopped.exit_code == 4 and "polling task batch_" in (stopped.stopped_for or "")
    assert upstream.ledger.snapshot()["batches_created"] == 1
    assert len(recovery.held(store, "test")) == 5


async def test_a_lost_create_that_cannot_be_looked_for_is_held_never_sent_again(
    tmp_path: Path, upstream: Simulator, store: Store, clock: StepClock
) -> None:
    upstream.set_faults({"rules": [{"fault": "create_lost", "times": 1}, {"fault": "list_503"}]})
    job = batch_job(tmp_path, upstream, posts(5))
    stopped = await runs.execute(store, job, clock=clock)
    assert stopped.exit_code == 4
    assert {item.case for item in recovery.held(store, "test")} == {recovery.Case.ADOPT}
    done, ledger = await confirmed_then_run_on_a_healthy_upstream(upstream, store, job, clock)
    assert done.status["counts"][ItemState.COMPLETED] == 5
    assert ledger["batches_created"] == 1 and set(ledger["billed"].values()) == {1}


async def test_another_store_reusing_the_run_name_never_adopts_this_ones_batch(
    tmp_path: Path, upstream: Simulator, clock: StepClock
) -> None:
    with Store(tmp_path / "a.db") as first:
        await runs.execute(first, batch_job(tmp_path, upstream, posts(5)), clock=clock)
    other = posts(5, body="A different text")
    with Store(tmp_path / "b.db") as second:
        job = batch_job(tmp_path, upstream, other)
        leave_a_sent_batch(second, job, clock.now())
        await runs.execute(second, job, clock=clock)
        recovery.confirm(second, "test", now=clock.now())
        done = await runs.execute(second, job, clock=clock)
        summaries = {json.loads(r["result"])["summary"] for r in views.results(second, second.run_id("test"))}
    assert done.status["counts"][ItemState.COMPLETED] == 5
    assert upstream.ledger.snapshot()["batches_created"] == 2
    assert all(summary.startswith("A different text") for summary in summaries)


async def test_a_line_missing_from_a_finished_task_fails_as_maybe_paid_never_resent_alone(
    tmp_path: Path, upstream: Simulator, store: Store, clock: StepClock
) -> None:
    upstream.set_faults({"rules": [{"fault": "missing_rows", "keys": ["p001"]}]})
    outcome = await runs.execute(store, batch_job(tmp_path, upstream, posts(5)), clock=clock)
    [failure] = views.failures(store, "test")
    assert (failure["key"], failure["kind"], failure["retryable"]) == ("p001", FailureKind.NOT_FOUND, True)
    assert "may have run and been billed" in failure["message"]
    maybe = {r["key"]: r["maybe_paid"] for r in items(store)}["p001"]
    assert maybe == 1 and outcome.status["counts"][ItemState.COMPLETED] == 4


async def test_a_batch_refused_for_the_token_quota_waits_and_goes_again(
    tmp_path: Path, upstream: Simulator, store: Store, clock: StepClock
) -> None:
    upstream.set_faults({"rules": [{"fault": "batch_failed", "times": 1}]})
    outcome = await runs.execute(store, batch_job(tmp_path, upstream, posts(5)), clock=clock)
    kinds = {event["kind"] for event in events_into(store, "waiting")}
    assert kinds == {FailureKind.RATE_LIMITED}
    assert outcome.status["counts"][ItemState.COMPLETED] == 5


async def test_a_batch_api_job_file_sends_its_items_in_as_few_upstream_batches_as_the_api_allows(
    tmp_path: Path, upstream: Simulator, store: Store, clock: StepClock
) -> None:
    """No [batch] in the file: 2,000 posts of 3 months are three upstream batches (the chat's defaults: 81)."""
    write_jsonl(tmp_path / "posts.jsonl", posts(2_000, groups=3, body="A post long enough " * 20))
    (tmp_path / "job.toml").write_text(
        f'name = "test"\ninput = "posts.jsonl"\ngroup = "month"\n'
        f'[provider]\nkind = "openai-batch"\nbase_url = "{upstream.base_url}"\nmodel = "sim-model"\n',
        encoding="utf-8")
    outcome = await runs.execute(store, jobs.load(tmp_path / "job.toml"), clock=clock)
    ledger = upstream.ledger.snapshot()
    assert outcome.exit_code == 0 and outcome.status["counts"][ItemState.COMPLETED] == 2_000
    assert ledger["batches_created"] == 3 and ledger["files_uploaded"] == 3
    assert sorted(ledger["billed"].values()) == [1] * 2_000


async def test_the_duplicate_check_reads_the_batch_list_back_only_to_the_window_a_create_may_land_in() -> None:
    """250 batches an hour old: the check of the batch just made reads one page; a ref not made here, all three."""
    paths: list[str] = []
    with Simulator(batch_seconds=0.0, on_call=lambda method, path: paths.append(path)).start() as sim:
        async with httpx.AsyncClient() as client:
            def provider() -> OpenAIBatch:
                config = ProviderConfig(base_url=sim.base_url, model="sim-model", timeout=30, create_margin=60)
                return OpenAIBatch(config, Prompt(), None, client=client, api_key=None)

            made = provider()
            old = [await made.create(f"r:{n}", await made.upload(f"r:{n}", BatchItems.of([{"id": "p1"}]))) for n in range(250)]
            sim.advance(3600)
            new = await made.create("r:new", await made.upload("r:new", BatchItems.of([{"id": "p1"}])))
            paths.clear()
            assert await made.find("r:new") == [new]
            assert paths == ["/v1/batches"]
            paths.clear()
            assert await provider().find("r:0") == [old[0]]
            assert paths == ["/v1/batches"] * 3


async def test_a_provider_keeps_the_creation_time_of_only_its_newest_batches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One kept: the batch made before the newest is forgotten, and its duplicate check reads the whole list."""
    monkeypatch.setattr(openai_batch, "MADE_KEPT", 1)
    paths: list[str] = []
    with Simulator(batch_seconds=0.0, on_call=lambda method, path: paths.append(path)).start() as sim:
        async with httpx.AsyncClient() as client:
            config = ProviderConfig(base_url=sim.base_url, model="sim-model", timeout=30, create_margin=60)
            made = OpenAIBatch(config, Prompt(), None, client=client, api_key=None)
            for n in range(150):
                await made.create(f"r:{n}", await made.upload(f"r:{n}", BatchItems.of([{"id": "p1"}])))
            sim.advance(3600)
            forgotten = await made.create("r:x", await made.upload("r:x", BatchItems.of([{"id": "p1"}])))
            newest = await made.create("r:y", await made.upload("r:y", BatchItems.of([{"id": "p1"}])))
            paths.clear()
            assert await made.find("r:y") == [newest]
            assert paths == ["/v1/batches"]
            paths.clear()
            assert await made.find("r:x") == [forgotten]
            assert paths == ["/v1/batches"] * 2


class Tasks:
    """A user's own task upstream, in memory: submit, poll, find, and what was saved when it was polled."""

    def __init__(self, store: Store, *, lose_first_answer: bool = False) -> None:
        self.store = store
        self.created: dict[str, tuple[str, list[dict[str, Any]]]] = {}
        self.saved_when_polled: list[str | None] = []
        self.lose = lose_first_answer

    async def submit(self, ref: str, payloads: list[dict[str, Any]]) -> str:
        task_id = f"task-{len(self.created)}"
        self.created[task_id] = (ref, payloads)
        if self.lose:
            self.lose = False
            raise SubmitUnknown("the answer to the create was lost")
        return task_id

    async def find(self, ref: str) -> str | None:
        return next((task for task, (r, _) in self.created.items() if r == ref), None)

    async def poll(self, task_id: str) -> list[dict[str, Any]] | None:
        saved = [b["upstream_id"] for b in views.batches(self.store, self.store.run_id("test"))]
        self.saved_when_polled.append(task_id if task_id in saved else None)
        return [{"id": p["id"], "label": "question"} for p in self.created[task_id][1]]


@pytest.mark.parametrize("lose", [False, True])
async def test_a_python_submit_poll_pair_has_its_task_id_saved_before_it_is_polled(
    tmp_path: Path, store: Store, clock: StepClock, lose: bool
) -> None:
    tasks_upstream = Tasks(store, lose_first_answer=lose)
    provider = PythonTasks(tasks_upstream.submit, tasks_upstream.poll, tasks_upstream.find)
    job = make_job(tmp_path, "http://127.0.0.1:9/v1", posts(12), max_items=5)
    outcome = await runs.execute(store, job, provider=provider, clock=clock)
    assert outcome.status["counts"][ItemState.COMPLETED] == 12
    assert len(tasks_upstream.created) == 3
    assert sorted(tasks_upstream.saved_when_polled) == sorted(tasks_upstream.created)


class NotANumber(Tasks):
    """A pair whose poll gives p003 a score of NaN: not JSON, which no store or upstream takes."""

    async def poll(self, task_id: str) -> list[dict[str, Any]] | None:
        return [{"id": p["id"], "label": "question", "score": float("nan") if p["id"] == "p003" else 1.0}
                for p in self.created[task_id][1]]


async def test_a_python_poll_s_result_that_is_not_json_fails_its_item_alone_as_the_handler_s_fault(
    tmp_path: Path, store: Store, clock: StepClock
) -> None:
    tasks_upstream = NotANumber(store)
    provider = PythonTasks(tasks_upstream.submit, tasks_upstream.poll, tasks_upstream.find)
    job = make_job(tmp_path, "http://127.0.0.1:9/v1", posts(5), max_items=5, max_attempts=1)
    outcome = await runs.execute(store, job, provider=provider, clock=clock)
    failures = views.failures(store, "test")
    assert outcome.status["counts"][ItemState.COMPLETED] == 4
    assert [(f["key"], f["kind"]) for f in failures] == [("p003", FailureKind.BAD_REQUEST)]
    assert "the poll returned a result that is not JSON: Out of range float values" in failures[0]["message"]


async def test_a_line_s_content_in_parts_or_of_another_shape_is_read_as_a_chat_answer_s() -> None:
    def line(key: str, content: Any) -> dict[str, Any]:
        body = {"choices": [{"message": {"content": content}, "finish_reason": "stop"}]}
        return {"custom_id": key, "response": {"status_code": 200, "body": body}}

    lines = [line("p001", [{"type": "text", "text": '{"results": []}'}]), line("p002", {"results": []})]

    def upstream(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/batches/batch_1":
            return httpx.Response(200, json={"id": "batch_1", "status": "completed", "output_file_id": "file_o"})
        return httpx.Response(200, text="".join(json.dumps(line) + "\n" for line in lines))

    async with httpx.AsyncClient(transport=httpx.MockTransport(upstream)) as client:
        provider = OpenAIBatch(ProviderConfig(base_url="http://upstream/v1"), Prompt(), None, client=client, api_key=None)
        result = await provider.poll("batch_1")
    assert result is not None
    assert result.answers == {
        "p001": Answer('{"results": []}', "stop", raw='[{"type":"text","text":"{\\"results\\": []}"}]'),
        "p002": Answer(None, "stop", raw='{"results":[]}', problem='the answer\'s content is not text but {"results":[]}'),
    }
