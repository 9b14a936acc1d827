"""The ``anthropic-messages`` provider against the simulator: a run, and each of Anthropic's error classes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from support import SAMPLE, StepClock, anthropic_job, events_into, posts, write_jsonl

from runner import errors, jobs, runs
from runner.inputs import InputSpec
from runner.notebook import Run
from runner.jobs import Job
from runner.model import FailureKind, ItemState
from runner.providers.anthropic_messages import host, message_answer
from runner.providers.openai_chat import classify
from runner.sim import Simulator
from runner.store import Store, views

KEY = "sk-ant-api03-" + "k" * 40
SCHEMA = {"type": "object", "required": ["label"], "properties": {"label": {"enum": ["question", "complaint"]}}}


@pytest.fixture
def claude(monkeypatch: pytest.MonkeyPatch) -> Iterator[Simulator]:
    """The simulator that takes only ``x-api-key: KEY``, the key in the job's ``api_key_env``."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    with Simulator(api_key=KEY).start() as sim:
        yield sim


def job_of(tmp_path: Path, sim: Simulator, count: int, **limits: Any) -> Job:
    """``count`` posts over two months, their key in ``ANTHROPIC_API_KEY``."""
    job = anthropic_job(tmp_path, sim, posts(count, groups=2), schema=SCHEMA, **limits)
    return replace(job, provider=replace(job.provider, api_key_env="ANTHROPIC_API_KEY"))


def states(store: Store) -> set[tuple[str, int]]:
    return {(r["state"], r["paid_calls"]) for r in views.items(store, store.run_id("test"))}


async def test_a_run_with_anthropic_messages_completes_every_item_each_billed_once(
    tmp_path: Path, claude: Simulator, store: Store, clock: StepClock
) -> None:
    outcome = await runs.execute(store, job_of(tmp_path, claude, 30, max_items=10), clock=clock)
    ledger = claude.ledger.snapshot()
    assert outcome.exit_code == 0 and outcome.status["counts"][ItemState.COMPLETED] == 30
    assert ledger["billed"] == {f"p{i:03d}": 1 for i in range(30)} and ledger["requests"] == 4
    assert states(store) == {(ItemState.COMPLETED, 1)}
    # The labels come from the schema, which reached the simulator only as the forced tool's input schema.
    assert {json.loads(r["result"])["label"] for r in views.results(store, store.run_id("test"))} <= {
        "question", "complaint"}


@pytest.mark.parametrize("fault", [{"fault": "overloaded"}, {"fault": "http_500"}, {"fault": "drop"}])
async def test_overloaded_and_5xx_are_transport_trouble_retried_inside_the_attempt(
    tmp_path: Path, claude: Simulator, store: Store, clock: StepClock, fault: dict[str, Any]
) -> None:
    claude.set_faults({"rules": [{**fault, "times": 2}]})
    outcome = await runs.execute(store, job_of(tmp_path, claude, 5), clock=clock)
    assert outcome.status["counts"][ItemState.COMPLETED] == 5
    assert sum(r["retries"] for r in views.batches(store, store.run_id("test"))) == 2
    assert states(store) == {(ItemState.COMPLETED, 1)}


async def test_a_rate_limit_error_holds_the_items_until_its_retry_after(
    tmp_path: Path, claude: Simulator, store: Store, clock: StepClock
) -> None:
    claude.set_faults({"rules": [{"fault": "http_429", "times": 1, "retry_after": 30}]})
    outcome = await runs.execute(store, job_of(tmp_path, claude, 5), clock=clock)
    waited = events_into(store, "waiting")
    assert outcome.status["counts"][ItemState.COMPLETED] == 5
    assert [event["kind"] for event in waited] == [FailureKind.RATE_LIMITED] * len(waited) and waited
    assert max(event["at"] for event in events_into(store, "received")) - waited[0]["at"] >= 30


@pytest.mark.parametrize("fault, kind", [
    ("http_402", FailureKind.BILLING),
    ("credit_balance", FailureKind.BILLING),
    ("insufficient_quota", FailureKind.BILLING),  # Anthropic's 429 of a spend limit reached: no retry-after
    ("budget_exceeded", FailureKind.BILLING),  # a LiteLLM proxy's spend limit, in front of Anthropic
    ("http_401", FailureKind.AUTH),
    ("http_403", FailureKind.PERMISSION),
    ("model_not_found", FailureKind.NOT_FOUND),
])
async def test_billing_auth_permission_and_a_missing_model_fail_the_items_and_stop_the_run(
    tmp_path: Path, claude: Simulator, store: Store, clock: StepClock, fault: str, kind: FailureKind
) -> None:
    claude.set_faults({"rules": [{"fault": fault}]})
    outcome = await runs.execute(store, job_of(tmp_path, claude, 10, max_items=5, concurrency=1), clock=clock)
    failed = views.failures(store, "test")
    assert {f["kind"] for f in failed} == {kind} and len(failed) == 5  # the first batch; no other started
    assert claude.ledger.snapshot()["billed"] == {}
    assert outcome.status["counts"][ItemState.PENDING] == 5 and outcome.stop_kind == kind


async def test_any_other_400_is_a_bad_request_of_its_items_alone(
    tmp_path: Path, claude: Simulator, store: Store, clock: StepClock
) -> None:
    claude.set_faults({"rules": [{"fault": "http_400", "keys": ["p000"]}]})
    outcome = await runs.execute(store, job_of(tmp_path, claude, 4, max_items=1, concurrency=1), clock=clock)
    assert [(f["key"], f["kind"]) for f in views.failures(store, "test")] == [("p000", FailureKind.BAD_REQUEST)]
    assert outcome.status["counts"][ItemState.COMPLETED] == 3


@pytest.mark.parametrize("status, kind, message, wanted", [
    (529, "overloaded_error", "Overloaded", errors.TransportError),
    (500, "api_error", "Internal server error", errors.TransportError),
    (429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit", errors.RateLimited),
    (402, "billing_error", "Payment required", errors.BillingError),
    (400, "invalid_request_error", "Your credit balance is too low to access the Anthropic API.", errors.BillingError),
    (401, "authentication_error", "invalid x-api-key", errors.AuthError),
    (403, "permission_error", "Your API key does not have permission", errors.PermissionDenied),
    (400, "invalid_request_error", "messages: text content blocks must be non-empty", errors.BadRequest),
    (404, "not_found_error", "model: claude-nope", errors.NotFound),
])
def test_each_anthropic_error_is_classified_by_its_status_and_type(
    status: int, kind: str, message: str, wanted: type[errors.UpstreamError]
) -> None:
    body = {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_1"}
    error = classify(status, body, {"retry-after": "7"})
    assert type(error) is wanted and error.message == f"{status} {kind}: {message}"
    assert error.retry_after == (7 if wanted is errors.RateLimited else error.retry_after)


def test_a_spend_limit_429_is_billing_not_a_rate_limit() -> None:
    body = {"type": "error", "error": {"type": "rate_limit_error", "message": "You have reached your limits.",
                                       "details": {"error_code": "enforced_spend_limit_reached"}}}
    assert type(classify(429, body)) is errors.BillingError


def test_a_prompt_too_long_is_a_refusal_a_smaller_batch_may_pass() -> None:
    body = {"type": "error", "error": {"type": "invalid_request_error",
                                       "message": "prompt is too long: 210000 tokens > 200000 maximum"}}
    refusal = classify(400, body)
    assert isinstance(refusal, errors.BadRequest) and refusal.splittable and refusal.too_long


def test_the_answer_is_the_forced_tool_calls_input_else_the_text() -> None:
    results = {"results": [{"id": "p1", "label": "question"}]}
    tool = {"content": [{"type": "tool_use", "id": "t", "name": "batch_results", "input": results}],
            "stop_reason": "tool_use"}
    text = {"content": [{"type": "text", "text": '{"results": '}, {"type": "text", "text": "[]}"}],
            "stop_reason": "max_tokens"}
    assert message_answer(tool).content == '{"results":[{"id":"p1","label":"question"}]}'
    assert message_answer(tool).finish_reason == "stop"
    assert (message_answer(text).content, message_answer(text).finish_reason) == ('{"results": []}', "length")
    assert message_answer({"content": "nope"}).content is None


@pytest.mark.parametrize("base_url", ["https://api.anthropic.com", "https://api.anthropic.com/", "https://api.anthropic.com/v1"])
def test_the_base_url_is_the_host_as_the_sdk_takes_it_a_v1_said_once(base_url: str) -> None:
    assert host(base_url) + "/v1/messages" == "https://api.anthropic.com/v1/messages"


async def test_the_anthropic_sample_job_runs_against_the_simulator_with_no_key(
    tmp_path: Path, store: Store, clock: StepClock
) -> None:
    sample = jobs.load(SAMPLE / "job-anthropic.toml")
    some = [json.loads(line) for line in (SAMPLE / "posts.jsonl").read_text(encoding="utf-8").splitlines()[:60]]
    with Simulator().start() as sim:
        job = replace(sample, input=InputSpec(write_jsonl(tmp_path / "posts.jsonl", some), "jsonl"),
                      provider=replace(sample.provider, base_url=sim.base_url.removesuffix("/v1")))
        outcome = await runs.execute(store, job, clock=clock)
    assert (sample.provider.kind, sample.provider.api_key_env, sample.provider.base_url) == (
        "anthropic-messages", "", "http://127.0.0.1:8765")
    assert outcome.exit_code == 0 and outcome.status["counts"][ItemState.COMPLETED] == 60


@pytest.mark.parametrize("kind", ["anthropic-messages", "anthropic-batch"])
def test_an_anthropic_kind_defaults_to_anthropics_host_and_model_in_a_job_file_and_from_python(
    tmp_path: Path, kind: str
) -> None:
    (tmp_path / "posts.jsonl").write_text('{"id": "p1"}\n')
    (tmp_path / "job.toml").write_text(f'name = "x"\ninput = "posts.jsonl"\n[provider]\nkind = "{kind}"\n')
    in_python = Run("x", items=[{"id": "p1"}], db=tmp_path / "runs.db", provider=kind).job.provider
    for provider in (jobs.load(tmp_path / "job.toml").provider, in_python):
        assert (provider.base_url, provider.model) == ("https://api.anthropic.com", "claude-haiku-4-5")


def test_a_stage_of_an_anthropic_kind_takes_anthropics_host_and_model_unless_given(tmp_path: Path) -> None:
    (tmp_path / "posts.jsonl").write_text('{"id": "p1"}\n')
    (tmp_path / "job.toml").write_text(
        'name = "x"\ninput = "posts.jsonl"\n[provider]\nkind = "openai-chat"\n'
        '[[stage]]\nname = "first"\n'
        '[[stage]]\nname = "claude"\nkind = "anthropic-batch"\n'
        '[[stage]]\nname = "local"\nkind = "anthropic-messages"\n[stage.provider]\nbase_url = "http://127.0.0.1:9"\n')
    stages = {stage.name: (stage.provider.base_url, stage.provider.model) for stage in jobs.load(tmp_path / "job.toml").stages}
    assert stages == {"first": ("https://api.openai.com/v1", "gpt-4o-mini"),
                      "claude": ("https://api.anthropic.com", "claude-haiku-4-5"),
                      "local": ("http://127.0.0.1:9", "claude-haiku-4-5")}
