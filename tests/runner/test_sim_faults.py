"""The simulator's fault plans, over real HTTP on loopback."""

from __future__ import annotations

import json
from collections.abc import Iterator
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from runner import protocol
from runner.sim import Simulator, load_plan

ITEMS = [{"id": f"p00{n}", "body": f"post number {n}"} for n in range(1, 5)]
KEYS = [item["id"] for item in ITEMS]
ALL_BILLED = {key: 1 for key in KEYS}


@pytest.fixture
def client(sim: Simulator) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=sim.base_url) as client:
        yield client


@pytest.fixture
def sdk(sim: Simulator) -> Iterator[openai.OpenAI]:
    """The official SDK, without its retries unless a test asks for them."""
    with openai.OpenAI(api_key=SECRET, base_url=sim.base_url, max_retries=0) as client:
        yield client


SECRET = "sk-proj-simulated-0123456789"


def chat(items: list[dict[str, Any]]) -> dict[str, Any]:
    user = protocol.user_message(protocol.DEFAULT_USER, "Classify.", protocol.encode(items))
    return {"model": "sim-model", "messages": [{"role": "user", "content": user}]}


def sdk_ask(sdk: openai.OpenAI, items: list[dict[str, Any]] = ITEMS) -> Any:
    body = chat(items)
    return sdk.chat.completions.create(model=body["model"], messages=body["messages"])


def ask(client: httpx.Client, items: list[dict[str, Any]] = ITEMS) -> httpx.Response:
    return client.post("/chat/completions", json=chat(items))


def content(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    return str(response.json()["choices"][0]["message"]["content"])


@pytest.mark.parametrize(
    "fault, status, kind, code",
    [
        ("http_400", 400, "invalid_request_error", None),
        ("http_401", 401, "invalid_request_error", "invalid_api_key"),
        ("http_402", 402, "billing_error", None),
        ("http_403", 403, "permission_error", "unsupported_country_region_territory"),
        ("http_429", 429, "requests", "rate_limit_exceeded"),
        ("insufficient_quota", 429, "insufficient_quota", "insufficient_quota"),
        ("http_500", 500, "server_error", None),
        ("http_503", 503, "server_error", "server_is_overloaded"),
    ],
)
def test_an_error_fault_answers_the_openai_error_and_bills_nothing(
    sim: Simulator, client: httpx.Client, fault: str, status: int, kind: str, code: str | None
) -> None:
    sim.set_faults({"rules": [{"fault": fault}]})
    response = ask(client)
    assert response.status_code == status
    error = response.json()["error"]
    assert (error["type"], error["code"], error["param"]) == (kind, code, None)
    assert "retry-after" not in response.headers
    snapshot = sim.ledger.snapshot()
    assert (snapshot["billed"], snapshot["faults"]) == ({}, {fault: 1})


@pytest.mark.parametrize(
    "rule, headers",
    [
        ({"fault": "http_429", "retry_after": 3}, {"retry-after": "3"}),
        ({"fault": "http_429", "retry_after": 1, "retry_after_ms": 1200}, {"retry-after": "1", "retry-after-ms": "1200"}),
        ({"fault": "http_503", "retry_after": 5}, {"retry-after": "5"}),
    ],
)
def test_retry_after_headers_follow_the_rule(
    sim: Simulator, client: httpx.Client, rule: dict[str, Any], headers: dict[str, str]
) -> None:
    sim.set_faults({"rules": [rule]})
    response = ask(client)
    assert {name: response.headers.get(name) for name in headers} == headers


def test_retry_after_as_a_date_is_counted_from_the_date_header(sim: Simulator, client: httpx.Client) -> None:
    sim.set_faults({"rules": [{"fault": "http_429", "retry_after": 7, "http_date": True}]})
    response = ask(client)
    retry_at = parsedate_to_datetime(response.headers["retry-after"])
    assert (retry_at - parsedate_to_datetime(response.headers["date"])).total_seconds() == 7
    assert response.headers.get_list("date") == [response.headers["date"]]


@pytest.mark.parametrize(
    "rule, error, status, kind, code, param, message",
    [
        ({"fault": "budget_exceeded"}, openai.UnprocessableEntityError, 422, "budget_exceeded", "422", None,
         "Budget has been exceeded! Current cost: 1.2, Max budget: 1.0"),
        ({"fault": "context_length", "keys": ["p002"]}, openai.BadRequestError, 400, "invalid_request_error",
         "context_length_exceeded", "messages", "(ContextWindowExceededError)"),
        ({"fault": "invalid_model"}, openai.BadRequestError, 400, "invalid_request_error", "400", "model",
         "Invalid model name passed in model=sim-model."),
        ({"fault": "model_not_found"}, openai.NotFoundError, 404, "invalid_request_error", "model_not_found", None,
         "The model `sim-model` does not exist or you do not have access to it."),
        ({"fault": "echo_key"}, openai.AuthenticationError, 401, "invalid_request_error", "invalid_api_key", None,
         f"Incorrect API key provided: {SECRET}."),
        ({"fault": "http_429", "header": "none"}, openai.RateLimitError, 429, "throttling_error", "429", None,
         "litellm.RateLimitError"),
    ],
)
def test_a_proxy_or_openai_error_reaches_the_sdk_as_sent_and_bills_nothing(
    sim: Simulator, sdk: openai.OpenAI, rule: dict[str, Any], error: type[openai.APIStatusError],
    status: int, kind: str, code: str, param: str | None, message: str,
) -> None:
    sim.set_faults({"rules": [rule]})
    with pytest.raises(error) as raised:
        sdk_ask(sdk)
    assert (raised.value.status_code, raised.value.type, raised.value.code, raised.value.param) == (
        status, kind, code, param)
    assert message in raised.value.message
    snapshot = sim.ledger.snapshot()
    assert (snapshot["billed"], snapshot["faults"]) == ({}, {rule["fault"]: 1})


def test_context_length_answers_only_the_requests_holding_its_keys(sim: Simulator, client: httpx.Client) -> None:
    sim.set_faults({"rules": [{"fault": "context_length", "keys": ["p002"]}]})
    assert [ask(client, batch).status_code for batch in (ITEMS[:2], ITEMS[2:], ITEMS[1:2])] == [400, 200, 400]
    assert sim.ledger.snapshot()["billed"] == {"p003": 1, "p004": 1}


@pytest.mark.parametrize(
    "rule, headers",
    [
        ({"retry_after": 2}, {"retry-after": "2"}),
        ({"retry_after": 2, "header": "retry-after"}, {"retry-after": "2"}),
        ({"retry_after_ms": 1500, "header": "retry-after-ms"}, {"retry-after-ms": "1500"}),
        ({"retry_after": 2, "header": "retry-after-ms"}, {"retry-after-ms": "2000"}),
        ({"retry_after": 60, "header": "llm_provider-retry-after"}, {"llm_provider-retry-after": "60"}),
        ({"header": "none"}, {}),
    ],
)
def test_http_429_puts_its_hint_in_the_header_it_is_told(
    sim: Simulator, client: httpx.Client, rule: dict[str, Any], headers: dict[str, str]
) -> None:
    sim.set_faults({"rules": [{"fault": "http_429", **rule}]})
    response = ask(client)
    hints = ("retry-after", "retry-after-ms", "llm_provider-retry-after")
    assert response.status_code == 429
    assert {name: response.headers[name] for name in hints if name in response.headers} == headers


def test_the_sdk_waits_a_retry_after_ms_hint_and_is_answered(sim: Simulator) -> None:
    sim.set_faults({"rules": [{"fault": "http_429", "times": 1, "header": "retry-after-ms", "retry_after_ms": 50}]})
    with openai.OpenAI(api_key=SECRET, base_url=sim.base_url, max_retries=1) as sdk:
        answered = json.loads(sdk_ask(sdk).choices[0].message.content)["results"]
    assert [r["id"] for r in answered] == KEYS
    snapshot = sim.ledger.snapshot()
    assert (snapshot["billed"], snapshot["faults"]) == (ALL_BILLED, {"http_429": 1})


def normal(client: httpx.Client) -> str:
    """The answer to ITEMS without a fault, to compare a dressed one with."""
    return content(ask(client))


@pytest.mark.parametrize("parts", [None, 3])
def test_content_parts_is_a_billed_200_with_the_answer_in_text_parts(
    sim: Simulator, sdk: openai.OpenAI, client: httpx.Client, parts: int | None
) -> None:
    expected = normal(client)
    sim.set_faults({"rules": [{"fault": "content_parts", **({} if parts is None else {"parts": parts})}]})
    message = sdk_ask(sdk).choices[0].message
    assert isinstance(message.content, list)  # the SDK hands on what it got
    assert [part["type"] for part in message.content] == ["text"] * (parts or 2)
    assert "".join(part["text"] for part in message.content) == expected
    assert sim.ledger.snapshot()["billed"] == {key: 2 for key in KEYS}


def test_fenced_is_a_billed_200_with_the_answer_in_a_markdown_fence(sim: Simulator, client: httpx.Client) -> None:
    expected = normal(client)
    sim.set_faults({"rules": [{"fault": "fenced"}]})
    response = ask(client)
    assert content(response) == f"```json\n{expected}\n```"
    assert response.json()["choices"][0]["finish_reason"] == "stop"
    assert sim.ledger.snapshot()["billed"] == {key: 2 for key in KEYS}


@pytest.mark.parametrize("rule, twice", [({}, "p001"), ({"keys": ["p003"]}, "p003")])
def test_duplicate_ids_answers_one_id_twice_with_other_values(
    sim: Simulator, client: httpx.Client, rule: dict[str, Any], twice: str
) -> None:
    expected = json.loads(normal(client))["results"]
    sim.set_faults({"rules": [{"fault": "duplicate_ids", **rule}]})
    answered = json.loads(content(ask(client)))["results"]
    assert [r["id"] for r in answered] == [*KEYS, twice]
    assert answered[:-1] == expected
    [first] = [r for r in expected if r["id"] == twice]
    assert answered[-1]["label"] != first["label"]
    assert answered[-1]["summary"] == first["summary"]
    assert sim.ledger.snapshot()["billed"] == {key: 2 for key in KEYS}


def test_duplicate_ids_under_a_schema_of_words_only_answers_other_words(sim: Simulator, client: httpx.Client) -> None:
    result_schema = {"type": "object", "properties": {"id": {"type": "string"}, "note": {"type": "string"}}}
    body = {**chat(ITEMS[:1]), "response_format": protocol.batch_response_format(result_schema)}
    sim.set_faults({"rules": [{"fault": "duplicate_ids"}]})
    first, again = json.loads(content(client.post("/chat/completions", json=body)))["results"]
    assert (first["id"], again["id"]) == ("p001", "p001")
    assert (first["note"], again["note"]) == ("post number 1", "(again) post number 1")


@pytest.mark.parametrize("fault, billed", [("drop", {}), ("billed_then_dropped", ALL_BILLED)])
def test_a_dropped_connection_ends_without_an_answer(
    sim: Simulator, client: httpx.Client, fault: str, billed: dict[str, int]
) -> None:
    sim.set_faults({"rules": [{"fault": fault, "times": 1}]})
    with pytest.raises(httpx.RemoteProtocolError):
        ask(client)
    assert sim.ledger.snapshot()["billed"] == billed
    content(ask(client))  # the simulator serves on
    assert sim.ledger.snapshot()["faults"] == {fault: 1}


def test_a_timeout_outlasts_a_client_that_gives_up_before_anything_is_billed(sim: Simulator) -> None:
    sim.set_faults({"rules": [{"fault": "timeout", "seconds": 2}]})
    with httpx.Client(base_url=sim.base_url, timeout=0.2) as client, pytest.raises(httpx.ReadTimeout):
        ask(client)
    snapshot = sim.ledger.snapshot()
    assert (snapshot["billed"], snapshot["faults"]) == ({}, {"timeout": 1})


def test_malformed_is_a_billed_200_cut_off_at_length(sim: Simulator, client: httpx.Client) -> None:
    sim.set_faults({"rules": [{"fault": "malformed"}]})
    response = ask(client)
    with pytest.raises(json.JSONDecodeError):
        json.loads(content(response))
    assert content(response).startswith('{"results":[{"id":"p001"')
    assert response.json()["choices"][0]["finish_reason"] == "length"
    assert sim.ledger.snapshot()["billed"] == ALL_BILLED


@pytest.mark.parametrize(
    "rule, ids, stripped",
    [
        ({"fault": "wrong_ids"}, [f"{key}-x" for key in KEYS], []),
        ({"fault": "missing_ids"}, ["p001", "p002"], []),
        ({"fault": "missing_ids", "keys": ["p002", "p004"]}, ["p001", "p003"], []),
        ({"fault": "invalid_items", "keys": ["p003"]}, KEYS, ["p003"]),
    ],
)
def test_a_content_fault_is_a_billed_200_with_broken_results(
    sim: Simulator, client: httpx.Client, rule: dict[str, Any], ids: list[str], stripped: list[str]
) -> None:
    sim.set_faults({"rules": [rule]})
    answered = json.loads(content(ask(client)))["results"]
    assert [r["id"] for r in answered] == ids
    assert [r["id"] for r in answered if set(r) == {"id"}] == stripped
    assert sim.ledger.snapshot()["billed"] == ALL_BILLED


def test_invalid_items_by_share_strips_that_share_chosen_by_the_seed(sim: Simulator, client: httpx.Client) -> None:
    def stripped() -> list[str]:
        sim.set_faults({"seed": 3, "rules": [{"fault": "invalid_items", "share": 0.5}]})
        return [r["id"] for r in json.loads(content(ask(client)))["results"] if set(r) == {"id"}]

    first = stripped()
    assert len(first) == 2
    assert stripped() == first


def test_times_applies_to_exactly_n_requests(sim: Simulator, client: httpx.Client) -> None:
    sim.set_faults({"rules": [{"fault": "http_500", "times": 2}]})
    assert [ask(client).status_code for _ in range(4)] == [500, 500, 200, 200]
    assert sim.ledger.snapshot()["faults"] == {"http_500": 2}


def test_keys_select_requests_and_the_first_matching_rule_decides(sim: Simulator, client: httpx.Client) -> None:
    sim.set_faults({"rules": [{"fault": "http_400", "keys": ["p003"]}, {"fault": "http_500", "keys": ["p001", "p004"]}]})
    batches = [ITEMS[:2], ITEMS[1:2], ITEMS[2:], ITEMS[3:]]
    assert [ask(client, batch).status_code for batch in batches] == [500, 200, 400, 500]


def test_a_rate_with_a_seed_gives_the_same_faults_again_near_that_rate(sim: Simulator, client: httpx.Client) -> None:
    def statuses() -> list[int]:
        sim.set_faults({"seed": 7, "rules": [{"fault": "http_503", "rate": 0.3}]})
        return [ask(client, [item]).status_code for item in ITEMS * 50]

    first = statuses()
    assert statuses() == first
    assert set(first) == {200, 503}
    assert 40 <= first.count(503) <= 80


@pytest.mark.parametrize(
    "body, message",
    [
        ('{"rules": [{"fault": "http_999"}]}', 'rule 1: unknown fault "http_999"'),
        ('{"rules": [{"fault": "drop", "rat": 0.3}]}', "rule 1 (drop): unknown key 'rat'"),
        ('{"rules": [{"fault": "drop"}, {"fault": "drop", "rate": "0.3"}]}', "rule 2 (drop): 'rate' must be a number"),
        ('{"seed": 1, "rule": []}', "unknown key 'rule'"),
        ('{"rules": [{"fault": "context_length"}]}', "rule 1 (context_length): needs 'keys'"),
        ('{"rules": [{"fault": "http_429", "header": "Retry-After"}]}', "'header' must be one of retry-after,"),
        ('{"rules": [{"fault": "http_429", "header": "none", "retry_after": 1}]}', "'header' 'none' takes no 'retry_after'"),
        ('{"rules": [{"fault": "http_429", "header": "llm_provider-retry-after"}]}', "needs 'retry_after'"),
        ('{"rules": [{"fault": "http_429", "header": "retry-after-ms", "http_date": true, "retry_after": 1}]}',
         "'header' 'retry-after-ms' takes no 'http_date'"),
        ('{"rules": [{"fault": "content_parts", "parts": 1}]}', "'parts' must be a whole number, 2 or more"),
        ('{"rules": [{"fault": "create_slow", "seconds": -1}]}', "'seconds' must be a number of seconds"),
        ('{"rules": [', "the fault plan is not JSON"),
        ('"drop"', "a fault plan is a JSON object"),
    ],
)
def test_a_bad_plan_is_refused_with_400_and_the_old_plan_stays(
    sim: Simulator, client: httpx.Client, body: str, message: str
) -> None:
    faults_url = f"http://127.0.0.1:{sim.port}/_sim/faults"
    plan = {"seed": 2, "rules": [{"fault": "http_500", "times": 1}]}
    assert client.put(faults_url, json=plan).json() == plan
    response = client.put(faults_url, content=body)
    assert response.status_code == 400
    assert message in response.json()["error"]["message"]
    assert client.get(faults_url).json() == plan
    assert ask(client).status_code == 500


def test_load_plan_reads_a_string_or_a_file_and_the_simulator_takes_it(tmp_path: Path) -> None:
    text = '{"rules": [{"fault": "http_402", "keys": ["p001"]}]}'
    (tmp_path / "plan.json").write_text(text)
    plan = load_plan(text)
    assert load_plan(str(tmp_path / "plan.json")) == plan == {"seed": 0, "rules": [{"fault": "http_402", "keys": ["p001"]}]}
    with pytest.raises(ValueError, match="cannot read the fault plan"):
        load_plan(str(tmp_path / "missing.json"))
    with Simulator(faults=plan).start() as sim, httpx.Client(base_url=sim.base_url) as client:
        assert ask(client).status_code == 402


def test_sim_reset_clears_the_fault_counts(sim: Simulator, client: httpx.Client) -> None:
    sim.set_faults({"rules": [{"fault": "http_500"}]})
    ask(client)
    assert client.get(f"http://127.0.0.1:{sim.port}/_sim/ledger").json()["faults"] == {"http_500": 1}
    client.post(f"http://127.0.0.1:{sim.port}/_sim/reset")
    assert sim.ledger.snapshot()["faults"] == {}
