"""The simulator's fault plans, over real HTTP on loopback."""

from __future__ import annotations

import json
from collections.abc import Iterator
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

import httpx
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


def chat(items: list[dict[str, Any]]) -> dict[str, Any]:
    user = protocol.user_message(protocol.DEFAULT_USER, "Classify.", items)
    return {"model": "sim-model", "messages": [{"role": "user", "content": user}]}


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
