"""The simulator as Anthropic's official SDK sees it: a Messages call, its errors, and the whole Message Batches
flow, read by the SDK's own types, so that the simulator is proved faithful to the real client."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from runner.providers.anthropic_batch import custom_id, key_of, tag
from runner.providers.anthropic_messages import TOOL
from runner.sim import Simulator

KEY = "sk-ant-api03-test"
ITEMS = [{"id": "p1", "body": "Where is my parcel?"}, {"id": "p2", "body": "It broke on day one."}]
SCHEMA = {"type": "object", "properties": {"results": {"type": "array", "items": {
    "type": "object", "required": ["id", "label"], "properties": {"label": {"enum": ["question", "complaint"]}}}}}}


@pytest.fixture
def sim() -> Iterator[Simulator]:
    with Simulator(api_key=KEY, batch_seconds=60).start() as simulator:
        yield simulator


@pytest.fixture
def client(sim: Simulator) -> Iterator[anthropic.Anthropic]:
    """The SDK pointed at the simulator, with no retries of its own (it would retry a 429 or a 529)."""
    with anthropic.Anthropic(base_url=sim.base_url.removesuffix("/v1"), api_key=KEY, max_retries=0) as sdk:
        yield sdk


def params(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"model": "claude-haiku-4-5", "max_tokens": 1024, "system": "Answer with JSON.",
            "messages": [{"role": "user", "content": f"Label each post.\n\nRecords:\n{json.dumps(items)}"}],
            "tools": [{"name": TOOL, "description": "The results.", "input_schema": SCHEMA}],
            "tool_choice": {"type": "tool", "name": TOOL}}


def test_a_messages_call_answers_the_forced_tool_with_usage(client: anthropic.Anthropic, sim: Simulator) -> None:
    message = client.messages.create(**params(ITEMS))
    block = message.content[0]
    assert message.type == "message" and message.stop_reason == "tool_use"
    assert block.type == "tool_use" and block.name == TOOL
    assert [r["id"] for r in block.input["results"]] == ["p1", "p2"]  # type: ignore[index]
    assert {r["label"] for r in block.input["results"]} <= {"question", "complaint"}  # type: ignore[index]
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0
    assert sim.ledger.snapshot()["billed"] == {"p1": 1, "p2": 1}


@pytest.mark.parametrize("fault, error", [
    ({"fault": "overloaded"}, anthropic.InternalServerError),
    ({"fault": "http_429", "retry_after": 3}, anthropic.RateLimitError),
    ({"fault": "http_402"}, anthropic.APIStatusError),
    ({"fault": "credit_balance"}, anthropic.BadRequestError),
    ({"fault": "http_401"}, anthropic.AuthenticationError),
    ({"fault": "http_403"}, anthropic.PermissionDeniedError),
    ({"fault": "model_not_found"}, anthropic.NotFoundError),
])
def test_each_error_reaches_the_sdk_as_its_own_exception_with_anthropics_shape(
    client: anthropic.Anthropic, sim: Simulator, fault: dict[str, Any], error: type[anthropic.APIStatusError]
) -> None:
    sim.set_faults({"rules": [fault]})
    with pytest.raises(error) as raised:
        client.messages.create(**params(ITEMS))
    body = raised.value.body
    assert isinstance(body, dict) and body["type"] == "error" and set(body["error"]) >= {"type", "message"}
    assert raised.value.request_id is not None and sim.ledger.snapshot()["billed"] == {}


def test_a_wrong_key_is_refused_as_the_sdk_expects(sim: Simulator) -> None:
    with anthropic.Anthropic(base_url=sim.base_url.removesuffix("/v1"), api_key="wrong", max_retries=0) as sdk:
        with pytest.raises(anthropic.AuthenticationError):
            sdk.messages.create(**params(ITEMS))


def test_the_whole_message_batches_flow_through_the_sdk(client: anthropic.Anthropic, sim: Simulator) -> None:
    ref = tag("posts:ab12:1")
    requests = [{"custom_id": custom_id(ref, item["id"]), "params": params([item])} for item in ITEMS]
    created = client.messages.batches.create(requests=requests)  # type: ignore[arg-type]
    assert created.processing_status == "in_progress" and created.results_url is None
    assert created.request_counts.processing == 2 and created.request_counts.succeeded == 0
    assert (created.expires_at - created.created_at).total_seconds() == 24 * 3600
    assert [b.id for b in client.messages.batches.list(limit=10)] == [created.id]

    sim.advance(60)
    ended = client.messages.batches.retrieve(created.id)
    assert ended.processing_status == "ended" and ended.ended_at is not None and ended.results_url
    assert (ended.request_counts.processing, ended.request_counts.succeeded) == (0, 2)
    results = {key_of(line.custom_id): line.result for line in client.messages.batches.results(created.id)}
    assert set(results) == {"p1", "p2"} and {r.type for r in results.values()} == {"succeeded"}
    assert sim.ledger.snapshot()["billed"] == {"p1": 1, "p2": 1}


def test_a_canceled_batch_ends_with_its_unrun_requests_canceled_and_unbilled(
    client: anthropic.Anthropic, sim: Simulator
) -> None:
    items = [{"id": f"p{i}", "body": "text"} for i in range(4)]
    batch = client.messages.batches.create(requests=[  # type: ignore[arg-type]
        {"custom_id": custom_id(tag("r"), item["id"]), "params": params([item])} for item in items])
    assert client.messages.batches.cancel(batch.id).processing_status == "canceling"
    ended = client.messages.batches.retrieve(batch.id)
    outcomes = [line.result.type for line in client.messages.batches.results(batch.id)]
    assert ended.processing_status == "ended" and ended.cancel_initiated_at is not None
    assert sorted(outcomes) == ["canceled", "canceled", "succeeded", "succeeded"]
    assert sum(sim.ledger.snapshot()["billed"].values()) == 2


def test_the_list_pages_newest_first_with_after_id(client: anthropic.Anthropic) -> None:
    made = [client.messages.batches.create(requests=[  # type: ignore[arg-type]
        {"custom_id": "c1", "params": params(ITEMS[:1])}]).id for _ in range(5)]
    page = client.messages.batches.list(limit=2)
    assert [b.id for b in page.data] == made[::-1][:2] and page.has_more
    assert [b.id for b in client.messages.batches.list(limit=2)] == made[::-1]  # every page, by after_id


def test_a_batch_of_a_bad_custom_id_is_refused_as_anthropic_refuses_it(client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.BadRequestError):
        client.messages.batches.create(requests=[{"custom_id": "has:colon", "params": params(ITEMS)}])  # type: ignore[arg-type]


def test_a_request_whose_params_are_wrong_ends_errored_unbilled_as_params_are_checked_as_they_run(
    client: anthropic.Anthropic, sim: Simulator
) -> None:
    bad = {k: v for k, v in params(ITEMS[:1]).items() if k != "max_tokens"}
    batch = client.messages.batches.create(requests=[  # type: ignore[arg-type,list-item]
        {"custom_id": "good", "params": params(ITEMS[1:])}, {"custom_id": "bad", "params": bad}])
    sim.advance(60)
    results = {line.custom_id: line.result for line in client.messages.batches.results(batch.id)}
    errored = results["bad"]
    assert results["good"].type == "succeeded" and errored.type == "errored"
    assert errored.error.error.type == "invalid_request_error"
    assert sim.ledger.snapshot()["billed"] == {"p2": 1}
