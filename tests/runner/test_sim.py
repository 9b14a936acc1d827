"""The simulator, over real HTTP on loopback."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import jsonschema_rs
import pytest

from runner import protocol
from runner.sim import Simulator
from runner.sim.answers import LABELS

ITEMS = [
    {"id": "p1", "title": "Crash on start", "body": "The app crashes every time I open the settings page on Linux"},
    {"id": "p2", "body": "Could you add dark mode?"},
    {"id": "p3", "body": "Love it"},
]


@pytest.fixture
def sim() -> Iterator[Simulator]:
    with Simulator().start() as sim:
        yield sim


@pytest.fixture
def client(sim: Simulator) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=sim.base_url, headers={"Authorization": "Bearer sk-test"}) as client:
        yield client


def chat(items: list[dict[str, Any]], result_schema: dict[str, Any] | None = None) -> dict[str, Any]:
    user = protocol.user_message(protocol.DEFAULT_USER, "Classify.", protocol.encode(items))
    return {
        "model": "sim-model",
        "messages": [{"role": "system", "content": protocol.DEFAULT_SYSTEM}, {"role": "user", "content": user}],
        "response_format": protocol.batch_response_format(result_schema),
    }


def results(response: httpx.Response) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.text
    content = response.json()["choices"][0]["message"]["content"]
    return list(json.loads(content)["results"])


def test_answers_return_every_id_in_order(client: httpx.Client) -> None:
    answered = results(client.post("/chat/completions", json=chat(ITEMS)))
    assert [r["id"] for r in answered] == ["p1", "p2", "p3"]
    assert all(r["label"] in LABELS for r in answered)
    assert answered[0]["summary"] == "The app crashes every time I open the"


def test_json_schema_response_format_is_honoured(client: httpx.Client) -> None:
    result_schema = {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "label": {"enum": ["bug", "idea", "other"]},
            "score": {"type": "integer", "minimum": 1, "maximum": 5},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            "urgent": {"type": "boolean"},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "minItems": 2},
            "note": {"type": ["string", "null"], "minLength": 30, "maxLength": 40},
            "version": {"const": 2},
        },
        "required": ["id", "label", "score", "confidence", "urgent", "tags", "note", "version"],
        "additionalProperties": False,
    }
    answered = results(client.post("/chat/completions", json=chat(ITEMS, result_schema)))
    jsonschema_rs.validate(protocol.batch_response_format(result_schema)["json_schema"]["schema"], {"results": answered})
    assert [r["id"] for r in answered] == ["p1", "p2", "p3"]


def test_ledger_counts_billed_items_and_request_size(sim: Simulator, client: httpx.Client) -> None:
    results(client.post("/chat/completions", json=chat(ITEMS[:2])))
    results(client.post("/chat/completions", json=chat(ITEMS[1:])))
    chars = [sum(map(protocol.item_chars, ITEMS[:2])), sum(map(protocol.item_chars, ITEMS[1:]))]
    snapshot = sim.ledger.snapshot()
    assert snapshot["requests"] == 2
    assert snapshot["billed"] == {"p1": 1, "p2": 2, "p3": 1}
    assert snapshot["max_items_per_request"] == 2
    assert snapshot["max_chars_per_request"] == max(chars)
    assert snapshot["calls"] == [
        {"ids": ["p1", "p2"], "chars": chars[0], "model": "sim-model"},
        {"ids": ["p2", "p3"], "chars": chars[1], "model": "sim-model"},
    ]


def test_max_in_flight_counts_concurrent_requests() -> None:
    barrier = threading.Barrier(2, timeout=10)

    def meet(ids: list[str]) -> None:
        barrier.wait()  # returns only once both requests are inside the simulator

    with Simulator(on_request=meet).start() as sim:

        def ask(item: dict[str, Any]) -> list[dict[str, Any]]:
            with httpx.Client(headers={"Authorization": "Bearer sk-test"}) as client:
                return results(client.post(f"{sim.base_url}/chat/completions", json=chat([item])))

        with ThreadPoolExecutor(2) as pool:
            answered = list(pool.map(ask, ITEMS[:2]))
        snapshot = sim.ledger.snapshot()
    assert [r[0]["id"] for r in answered] == ["p1", "p2"]
    assert (snapshot["max_in_flight"], snapshot["in_flight"]) == (2, 0)


@pytest.mark.parametrize("authorization", [None, "Bearer", "Basic sk-test", "Bearer sk-wrong"])
def test_a_simulator_with_a_key_refuses_any_other_with_401(authorization: str | None) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    with Simulator(api_key="sk-test").start() as sim:
        response = httpx.post(f"{sim.base_url}/chat/completions", json=chat(ITEMS), headers=headers)
        accepted = httpx.post(
            f"{sim.base_url}/chat/completions", json=chat(ITEMS), headers={"Authorization": "Bearer sk-test"}
        )
        snapshot = sim.ledger.snapshot()
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "invalid_api_key"
    assert accepted.status_code == 200
    assert snapshot["billed"] == {"p1": 1, "p2": 1, "p3": 1}


@pytest.mark.parametrize(
    "body",
    [
        {"model": "m", "messages": [{"role": "user", "content": "Classify these, please."}]},
        {"model": "m", "messages": [{"role": "user", "content": '[{"id": "p1"}]'}, {"role": "user", "content": "hi"}]},
        {"model": "m", "messages": []},
        {"messages": [{"role": "user", "content": '[{"id": "p1"}]'}]},
    ],
)
def test_a_body_without_items_is_refused_with_400(sim: Simulator, client: httpx.Client, body: dict[str, Any]) -> None:
    response = client.post("/chat/completions", json=body)
    assert response.status_code == 400
    assert set(response.json()["error"]) == {"message", "type", "param", "code"}
    assert sim.ledger.snapshot()["requests"] == 0


def test_an_unknown_route_is_404(client: httpx.Client) -> None:
    response = client.get("/models")
    assert response.status_code == 404
    assert response.json()["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "example.com", "::"])
def test_a_host_that_is_not_loopback_is_refused(host: str) -> None:
    with pytest.raises(ValueError, match="loopback"):
        Simulator(host)


def test_sim_reset_clears_the_ledger(sim: Simulator, client: httpx.Client) -> None:
    results(client.post("/chat/completions", json=chat(ITEMS)))
    ledger_url = f"http://127.0.0.1:{sim.port}/_sim/ledger"
    assert client.get(ledger_url).json()["billed"] == {"p1": 1, "p2": 1, "p3": 1}
    assert client.post(f"http://127.0.0.1:{sim.port}/_sim/reset").json() == {"ok": True}
    after = client.get(ledger_url).json()
    assert (after["requests"], after["billed"], after["calls"]) == (0, {}, [])


async def test_hundreds_of_concurrent_connections_are_all_answered() -> None:
    count = 300
    # No keep-alive: httpcore's pool slows down with hundreds of idle connections.
    limits = httpx.Limits(max_connections=count, max_keepalive_connections=0)
    with Simulator(latency=0.5).start() as sim:
        async with httpx.AsyncClient(base_url=sim.base_url, limits=limits, timeout=60) as client:
            responses = await asyncio.gather(
                *(client.post("/chat/completions", json=chat([{"id": f"k{n}", "body": "hi"}])) for n in range(count))
            )
        snapshot = sim.ledger.snapshot()
    assert [response.status_code for response in responses] == [200] * count
    assert snapshot["max_in_flight"] > count // 2
