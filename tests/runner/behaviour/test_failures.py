"""The failure table of the brief: one test per row against the simulator's faults over HTTP,
then how each upstream answer is classified, case by case, at the provider's boundary."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support import StepClock, events_into, make_job, posts

from runner import errors, protocol, runs
from runner.store import views
from runner.jobs import Prompt, ProviderConfig
from runner.providers.handler import PythonHandler
from runner.providers.openai_batch import OpenAIBatch
from runner.providers.openai_chat import OpenAIChat, classify, redact, retry_after_seconds, transport_error
from runner.sim import Simulator
from runner.model import BreakerState, FailureKind, ItemState
from runner.store import Store


@pytest.fixture
def faulty() -> Iterator[Simulator]:
    """A simulator whose fault plan each test sets."""
    with Simulator().start() as simulator:
        yield simulator


def item_states(store: Store) -> dict[str, tuple[str, int, int]]:
    return {r["key"]: (r["state"], r["attempts"], r["paid_calls"]) for r in views.items(store, store.run_id("test"))}


def call_sizes(sim: Simulator) -> list[int]:
    return [len(call["ids"]) for call in sim.ledger.snapshot()["calls"]]


@pytest.mark.parametrize("fault, maybe_paid", [
    ({"fault": "http_500"}, 0), ({"fault": "http_503"}, 0), ({"fault": "drop"}, 2),
    ({"fault": "timeout", "seconds": 2}, 2),
])
async def test_short_network_trouble_is_retried_inside_the_attempt_and_a_lost_answer_is_told(
    tmp_path: Path, faulty: Simulator, store: Store, clock: StepClock, fault: dict[str, Any], maybe_paid: int
) -> None:
    faulty.set_faults({"rules": [{**fault, "times": 2}]})
    job = make_job(tmp_path, faulty.base_url, posts(5), request_retries=2, timeout=0.3)
    outcome = await runs.execute(store, job, clock=clock)
    assert outcome.status["counts"][ItemState.COMPLETED] == 5
    assert set(item_states(store).values()) == {(ItemState.COMPLETED, 1, 1)}
    assert [r["retries"] for r in views.batches(store, store.run_id("test"))] == [2]
    assert {r["maybe_paid"] for r in views.items(store, store.run_id("test"))} == {maybe_paid}
    assert outcome.status["breaker"]["state"] == BreakerState.CLOSED


async def test_a_final_transport_failure_sends_the_items_to_wait_for_a_later_attempt(
    tmp_path: Path, faulty: Simulator, store: Store, clock: StepClock
) -> None:
    faulty.set_faults({"rules": [{"fault": "http_500", "times": 3}]})
    job = make_job(tmp_path, faulty.base_url, posts(5), request_retries=2)
    outcome = await runs.execute(store, job, clock=clock)
    assert set(item_states(store).values()) == {(ItemState.COMPLETED, 2, 1)}
    history = [h["to_state"] for h in views.item_history(store, 1)]
    assert history == ["queued", "running", "waiting", "queued", "running", "received", "completed"]
    assert outcome.status["breaker"]["state"] == BreakerState.CLOSED


@pytest.mark.parametrize("wait", [{"retry_after": 30}, {"retry_after_ms": 30_000}, {"retry_after": 30, "http_date": True}])
async def test_rate_limited_items_wait_until_the_time_the_upstream_gave(
    tmp_path: Path, faulty: Simulator, store: Store, clock: StepClock, wait: dict[str, int]
) -> None:
    faulty.set_faults({"rules": [{"fault": "http_429", "times": 1, **wait}]})
    outcome = await runs.execute(store, make_job(tmp_path, faulty.base_url, posts(5)), clock=clock)
    times = {h["to_state"]: h["at"] for h in views.item_history(store, 1)}
    assert outcome.status["counts"][ItemState.COMPLETED] == 5
    assert times["received"] - times["waiting"] >= 30
    assert [r["kind"] for r in events_into(store, "waiting")] == [
        FailureKind.RATE_LIMITED] * 5


async def test_after_a_rate_limit_no_batch_starts_before_the_time_given(
    tmp_path: Path, faulty: Simulator, store: Store, clock: StepClock
) -> None:
    faulty.set_faults({"rules": [{"fault": "http_429", "times": 1, "retry_after": 30}]})
    job = make_job(tmp_path, faulty.base_url, posts(40, groups=4), max_items=5, concurrency=2)
    await runs.execute(store, job, clock=clock)
    limited = min(event["at"] for event in events_into(store, "waiting"))
    starts = [(event["at"], event["items"]) for event in events_into(store, "running")]
    assert not [at for at, _ in starts if limited < at < limited + 30]
    assert sum(items for _, items in starts) == 45  # 40 items, 5 of them twice


@pytest.mark.parametrize("fault", ["malformed", "wrong_ids"])
async def test_a_wholly_invalid_answer_splits_the_batch_in_two_once_then_goes_item_by_item(
    tmp_path: Path, faulty: Simulator, store: Store, clock: StepClock, fault: str
) -> None:
    faulty.set_faults({"rules": [{"fault": fault, "times": 3}]})
    job = make_job(tmp_path, faulty.base_url, posts(10), max_items=10, concurrency=1)
    outcome = await runs.execute(store, job, clock=clock)
    assert call_sizes(faulty) == [10, 5, 5] + [1] * 10
    assert outcome.status["counts"][ItemState.COMPLETED] == 10
    assert set(item_states(store).values()) == {(ItemState.COMPLETED, 3, 3)}


@pytest.mark.parametrize("fault", ["invalid_items", "missing_ids"])
async def test_only_the_invalid_items_are_sent_again(
    tmp_path: Path, faulty: Simulator, store: Store, clock: StepClock, fault: str
) -> None:
    faulty.set_faults({"rules": [{"fault": fault, "keys": ["p003"], "times": 1}]})
    job = make_job(tmp_path, faulty.base_url, posts(10), max_items=10, concurrency=1, schema={
        "type": "object", "required": ["label"]})
    outcome = await runs.execute(store, job, clock=clock)
    assert [call["ids"] for call in faulty.ledger.snapshot()["calls"]][1:] == [["p003"]]
    assert outcome.status["counts"][ItemState.COMPLETED] == 10
    assert item_states(store)["p003"] == (ItemState.COMPLETED, 2, 2)


async def test_an_item_that_never_validates_fails_after_its_attempts_with_its_paid_calls(
    tmp_path: Path, faulty: Simulator, store: Store, clock: StepClock
) -> None:
    faulty.set_faults({"rules": [{"fault": "invalid_items", "keys": ["p002"]}]})
    job = make_job(tmp_path, faulty.base_url, posts(6), max_attempts=3, schema={"type": "object", "required": ["label"]})
    outcome = await runs.execute(store, job, clock=clock)
    assert outcome.exit_code == 3
    [failure] = views.failures(store, "test")
    assert (failure["key"], failure["kind"], failure["attempts"]) == ("p002", FailureKind.ITEM_INVALID, 3)
    assert failure["message"].endswith("(gave up; attempts: 3, paid calls: 3)")
    assert faulty.ledger.snapshot()["billed"]["p002"] == 3


@pytest.mark.parametrize("fault, kind, exit_code", [
    ("http_401", FailureKind.AUTH, 1),
    ("http_402", FailureKind.BILLING, 4),
    ("insufficient_quota", FailureKind.BILLING, 4),
    ("http_403", FailureKind.PERMISSION, 4),
])
async def test_credentials_balance_and_permission_fail_the_items_and_stop_the_run(
    tmp_path: Path, faulty: Simulator, store: Store, fault: str, kind: FailureKind, exit_code: int
) -> None:
    faulty.set_faults({"rules": [{"fault": fault}]})
    job = make_job(tmp_path, faulty.base_url, posts(20, groups=4), max_items=5, concurrency=1)
    outcome = await runs.execute(store, job)
    assert faulty.ledger.snapshot()["requests"] == 1
    assert outcome.exit_code == exit_code
    failures = views.failures(store, "test")
    assert {(f["kind"], f["retryable"], f["attempts"]) for f in failures} == {(kind, True, 1)}
    assert len(failures) == 5 and outcome.status["counts"][ItemState.PENDING] == 15
    assert outcome.status["breaker"]["state"] == BreakerState.OPEN
    assert outcome.status["breaker"]["reason"].startswith(f"{kind.value}: ")


@pytest.mark.parametrize("raised, kind, state", [
    (errors.RateLimited("slow down", retry_after=60), FailureKind.RATE_LIMITED, ItemState.COMPLETED),
    (errors.TransportError("connection reset"), FailureKind.TRANSPORT, ItemState.COMPLETED),
    (errors.BillingError("no credit left"), FailureKind.BILLING, ItemState.FAILED),
    (ValueError("my bug"), FailureKind.BAD_REQUEST, ItemState.FAILED),
])
async def test_a_python_handler_classifies_its_own_failures(
    tmp_path: Path, store: Store, clock: StepClock, raised: Exception, kind: FailureKind, state: ItemState
) -> None:
    calls: list[list[str]] = []

    async def handler(payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
        calls.append([p["id"] for p in payloads])
        if len(calls) == 1:
            raise raised
        return [{"id": p["id"], "label": "question"} for p in payloads]

    job = make_job(tmp_path, "http://127.0.0.1:9/v1", posts(5), request_retries=0)
    await runs.execute(store, job, provider=PythonHandler(handler), clock=clock)
    first = next(event for event in views.history(store, store.run_id("test")) if event["from_state"] == "running")
    assert first["kind"] == kind
    assert set(item_states(store)) == {f"p{i:03d}" for i in range(5)}
    assert {s for s, _, _ in item_states(store).values()} == {state}


def body(message: str, type: str | None = None, code: str | None = None, param: str | None = None,
         **more: Any) -> dict[str, Any]:
    """An OpenAI-style error body."""
    return {"error": {"message": message, "type": type, "param": param, "code": code, **more}}


BUDGET = "Budget has been exceeded! Current cost: 1.02, Max budget: 1.0"


@pytest.mark.parametrize("status, error", [
    (422, body(BUDGET, "budget_exceeded", "422")),  # LiteLLM
    (400, body(BUDGET, "budget_exceeded", "400")),  # older LiteLLM
    (429, body(BUDGET, "budget_exceeded", "429")),  # LiteLLM configured so
    (429, body("You exceeded your current quota.", "insufficient_quota", "insufficient_quota")),
    (400, body("Billing hard limit has been reached.", "invalid_request_error", "billing_hard_limit_reached")),
    (429, {"type": "error", "error": {"type": "rate_limit_error", "message": "Spend limit reached.",
                                      "details": {"error_code": "enforced_spend_limit_reached"}}}),  # Anthropic
    (400, {"type": "error", "error": {"type": "invalid_request_error",
                                      "message": "Your credit balance is too low to access the API."}}),
    (402, body("Payment required.", "billing_error")),
])
def test_a_spend_limit_stops_the_run_as_billing_whatever_the_status(status: int, error: dict[str, Any]) -> None:
    classified = classify(status, error, {"retry-after": "60"})
    assert (type(classified), classified.stops_run, classified.retry_after) == (errors.BillingError, True, None)


@pytest.mark.parametrize("status, error, message", [
    (429, body("Rate limited.", "throttling_error", "429"), "429 throttling_error: Rate limited."),
    (400, body("Bad.", "None", "400", "None"), "400 Bad Request: Bad."),
    (500, {"error": {"message": "Oops.", "code": "500"}}, "500 Internal Server Error: Oops."),
    (429, body("Slow down.", "requests", "rate_limit_exceeded"), "429 rate_limit_exceeded: Slow down."),
    (503, "<html>busy</html>", "503 Service Unavailable: <html>busy</html>"),
])
def test_a_message_says_the_status_once(status: int, error: Any, message: str) -> None:
    assert classify(status, error).message == message


@pytest.mark.parametrize("status, error", [
    (404, body("The model `gpt-9` does not exist or you do not have access to it.", "invalid_request_error",
               "model_not_found")),
    (400, body("litellm.BadRequestError: Invalid model name passed in model=gpt-9. Call `/v1/models` to view "
               "available models for your key.", "None", "400", "None")),
])
def test_an_unknown_model_stops_the_run(status: int, error: dict[str, Any]) -> None:
    classified = classify(status, error)
    assert (type(classified), classified.kind, classified.stops_run) == (errors.NotFound, FailureKind.NOT_FOUND, True)


def test_a_missing_task_or_file_does_not_stop_the_run_by_itself() -> None:
    assert classify(404, body("No batch found with id 'batch_1'.", code="not_found")).stops_run is False


CONTEXT = ("This model's maximum context length is 8192 tokens. However, your messages resulted in {} tokens. "
           "Please reduce the length of the messages.")


@pytest.mark.parametrize("status, error, splittable, stops_run", [
    (400, body(CONTEXT.format(9000), "invalid_request_error", "context_length_exceeded", "messages"), True, False),
    (400, body("litellm.ContextWindowExceededError: litellm.BadRequestError: prompt is too long",
               "invalid_request_error", "400", "None"), True, False),
    (400, body(CONTEXT.format(9000), "BadRequestError", "400"), True, False),  # vLLM
    (413, {"type": "error", "error": {"type": "request_too_large", "message": "Request exceeds the maximum size"}},
     True, False),
    (400, body("Invalid 'messages[1].content': string too long.", "invalid_request_error", None, "messages[1].content"),
     True, False),
    (400, body("Invalid request.", "invalid_request_error"), True, False),
    (400, body("Invalid schema for response_format 'batch_results'.", "invalid_request_error", None,
               "response_format"), False, False),
    (400, body("No connected db.", "no_db_connection", "400", "None"), False, True),  # LiteLLM, a wrong key
])
def test_a_refused_request_says_whether_a_smaller_batch_might_pass(
    status: int, error: dict[str, Any], splittable: bool, stops_run: bool
) -> None:
    classified = classify(status, error)
    assert isinstance(classified, errors.BadRequest)
    assert (classified.splittable, classified.stops_run, classified.refused) == (splittable, stops_run, True)


def test_litellm_without_its_database_is_told_to_use_its_master_key() -> None:
    assert classify(400, body("No connected db.", "no_db_connection", "400")).message == (
        "400 no_db_connection: No connected db. (a LiteLLM proxy without its database accepts only its master key)")


def reason(status: int, error: Any) -> str:
    classified = classify(status, error)
    assert isinstance(classified, errors.BadRequest)
    return classified.reason


def test_a_refusal_gives_the_same_reason_each_time_whatever_its_numbers_and_ids() -> None:
    first = reason(400, body(CONTEXT.format(9000), "invalid_request_error", "context_length_exceeded"))
    again = reason(400, body(CONTEXT.format(12345), "invalid_request_error", "context_length_exceeded"))
    other = reason(400, body("Invalid 'temperature': decimal above maximum value.", "invalid_request_error"))
    assert first == again == ("400 context_length_exceeded: this model's maximum context length is # tokens. "
                              "however, your messages resulted in # tokens. please reduce the length of the messages.")
    assert other != first
    assert reason(400, body("Bad id req_8f2a in item p001.")) == reason(400, body("Bad id req_77c1 in item p002."))
    assert errors.BadRequest("the handler raised ValueError: 3 is odd").reason == "the handler raised valueerror: # is odd"


KEY = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789WXYZ"


@pytest.mark.parametrize("text, secret, expected", [
    (f"Incorrect API key provided: {KEY}.", KEY, "Incorrect API key provided: [key ...WXYZ]."),
    ("Received API Key = sk-1234567890abcdefghij, Key Hash = 5e88", None,
     "Received API Key = [key ...ghij], Key Hash = 5e88"),  # a proxy's key, or another
    ("token my-own-secret-token-2024 refused", "my-own-secret-token-2024", "token [key ...2024] refused"),
    ("token shortkey refused", "shortkey", "token [key] refused"),
    ("the key ollama is not a secret worth a mask", "ollama", "the key ollama is not a secret worth a mask"),
    ("task-0123456789abcdefghij and sk-short", None, "task-0123456789abcdefghij and sk-short"),
])
def test_a_key_in_an_upstream_message_is_masked(text: str, secret: str | None, expected: str) -> None:
    assert redact(text, secret) == expected


def test_every_message_built_from_a_response_masks_the_jobs_key() -> None:
    echoed = body(f"Incorrect API key provided: {KEY}. You can find your API key at ...", "invalid_request_error",
                  "invalid_api_key")
    assert classify(401, echoed, secret=KEY).message == (
        "401 invalid_api_key: Incorrect API key provided: [key ...WXYZ]. You can find your API key at ...")
    failed = transport_error(httpx.LocalProtocolError(f"Illegal header value b'Bearer {KEY}\\n'"), "POST /x", secret=KEY)
    assert KEY not in failed.message and "[key ...WXYZ]" in failed.message


def provider(kind: type[OpenAIChat] | type[OpenAIBatch], answer: Callable[[httpx.Request], httpx.Response],
             ) -> OpenAIChat | OpenAIBatch:
    client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    return kind(ProviderConfig(base_url="http://upstream/v1"), Prompt(), None, client=client, api_key=KEY)


def echo_key(request: httpx.Request) -> httpx.Response:
    """An upstream that echoes the key it was sent in its 401."""
    return httpx.Response(401, json=body(f"Incorrect API key provided: {request.headers['authorization'][7:]}."))


def refuse_to_send(request: httpx.Request) -> httpx.Response:
    raise httpx.LocalProtocolError(f"Illegal header value {request.headers['authorization']!r}")


@pytest.mark.parametrize("answer", [echo_key, refuse_to_send])
async def test_the_chat_provider_never_puts_its_key_in_an_error(answer: Callable[[httpx.Request], httpx.Response]) -> None:
    chat = provider(OpenAIChat, answer)
    assert isinstance(chat, OpenAIChat)
    with pytest.raises(errors.UpstreamError) as raised:
        await chat.call(protocol.BatchItems.of([{"id": "p001", "text": "hello"}]))
    assert KEY not in raised.value.message and "[key ...WXYZ]" in raised.value.message


async def test_the_batch_provider_never_puts_its_key_in_a_line_or_batch_error() -> None:
    lines = [
        {"custom_id": "p001", "response": {"status_code": 401, "body": body(f"Incorrect API key provided: {KEY}.")}},
        {"custom_id": "p002", "response": None, "error": {"code": "odd", "message": f"key {KEY} refused"}},
    ]

    def upstream(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/batches/batch_done":
            return httpx.Response(200, json={"id": "batch_done", "status": "completed", "error_file_id": "file_e"})
        if request.url.path == "/v1/batches/batch_failed":
            return httpx.Response(200, json={"id": "batch_failed", "status": "failed", "errors": {
                "data": [{"code": "invalid_request", "message": f"the key {KEY} may not use this model"}]}})
        return httpx.Response(200, text="".join(json.dumps(line) + "\n" for line in lines))

    batch = provider(OpenAIBatch, upstream)
    assert isinstance(batch, OpenAIBatch)
    done, failed = await batch.poll("batch_done"), await batch.poll("batch_failed")
    assert done is not None and failed is not None and failed.failure is not None
    messages = [error.message for error in done.errors.values()] + [failed.failure.message]
    assert len(messages) == 3 and all(KEY not in m and "[key ...WXYZ]" in m for m in messages)


@pytest.mark.parametrize("headers, wait", [
    ({"retry-after-ms": "1500", "retry-after": "30", "llm_provider-retry-after": "60"}, 1.5),
    ({"retry-after": "30", "llm_provider-retry-after": "60"}, 30.0),
    ({"Retry-After": "Wed, 21 Oct 2026 07:28:30 GMT", "Date": "Wed, 21 Oct 2026 07:28:00 GMT"}, 30.0),
    ({"Retry-After": "Wed, 21 Oct 2026 07:27:00 GMT", "Date": "Wed, 21 Oct 2026 07:28:00 GMT"}, 0.0),
    ({"llm_provider-retry-after": "60"}, 60.0),  # LiteLLM's router forwards the provider's header so
    ({"llm_provider-retry-after-ms": "250", "llm_provider-retry-after": "60"}, 0.25),
    ({"retry-after-ms": "soon", "retry-after": "-3", "llm_provider-retry-after": "7"}, 7.0),  # bad values skipped
    ({"retry-after-ms": "inf", "retry-after": "nan"}, None),
    ({"retry-after": "in a while"}, None),
    ({}, None),
])
def test_a_wait_is_read_from_the_first_usable_retry_header(headers: dict[str, str], wait: float | None) -> None:
    assert retry_after_seconds(headers) == wait


def test_a_rate_limit_carries_the_wait_its_headers_give() -> None:
    limited = classify(429, body("Rate limited.", "throttling_error", "429"), {"llm_provider-retry-after": "60"})
    assert (type(limited), limited.retry_after) == (errors.RateLimited, 60.0)


@pytest.mark.parametrize("status, refused", [
    (400, True), (401, True), (402, True), (403, True), (404, True), (413, True), (422, True), (429, True),
    (408, False), (409, False), (500, False), (502, False), (503, False),
])
def test_a_refusal_is_told_from_an_answer_that_may_have_run(status: int, refused: bool) -> None:
    assert classify(status, body("Something.")).refused is refused


@pytest.mark.parametrize("failure, refused", [
    (transport_error(httpx.ReadTimeout("timed out"), "POST /x"), False),
    (transport_error(httpx.ConnectError("refused"), "POST /x"), False),
    (errors.OutputInvalid("not JSON"), False),
    (errors.SubmitUnknown("lost"), False),
    (errors.RateLimited("slow down"), True),
    (errors.BadRequest("bad"), True),
])
def test_only_an_upstream_s_refusal_is_refused(failure: errors.UpstreamError, refused: bool) -> None:
    assert failure.refused is refused


async def test_a_python_handler_s_own_bug_is_not_taken_for_a_refusal() -> None:
    async def handler(payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
        raise ValueError("my bug, after a paid call")

    with pytest.raises(errors.BadRequest) as raised:
        await PythonHandler(handler).call(protocol.BatchItems.of([{"id": "p001"}]))
    assert raised.value.refused is False


async def test_a_schema_of_required_fields_alone_is_answered_as_an_object_that_fits_it(
    tmp_path: Path, sim: Simulator, store: Store, clock: StepClock
) -> None:
    job = make_job(tmp_path, sim.base_url, posts(20), schema={"required": ["label"]})
    outcome = await runs.execute(store, job, clock=clock)
    assert (outcome.exit_code, outcome.status["counts"][ItemState.COMPLETED]) == (0, 20)
    assert set(sim.ledger.snapshot()["billed"].values()) == {1}  # each item billed once


async def test_a_job_the_model_never_satisfies_stops_for_a_person_before_every_item_pays_every_attempt(
    tmp_path: Path, sim: Simulator, store: Store, clock: StepClock
) -> None:
    job = make_job(tmp_path, sim.base_url, posts(100), max_items=10, check=lambda result: "result has no 'topic'")
    outcome = await runs.execute(store, job, clock=clock)
    assert (outcome.exit_code, outcome.stop_kind) == (4, FailureKind.ITEM_INVALID)
    assert outcome.status["breaker"]["state"] == BreakerState.OPEN
    assert outcome.status["breaker"]["reason"].startswith("item_invalid: result has no 'topic' (every result of ")
    paid = [item["paid_calls"] for item in views.items(store, store.run_id("test"))]
    # The answers in flight when it stopped are kept; no item paid a second call, most paid none.
    assert max(paid) == 1 and sum(paid) < len(paid) / 2
