"""The run's HTTP client: one kept-alive connection per slot, calls beyond the slots on a shared pool."""

from __future__ import annotations

import asyncio
import socket

import httpx
import pytest

from runner import protocol
from runner.providers import lanes
from runner.sim import Simulator

BODY = {
    "model": "sim-model",
    "messages": [{"role": "user", "content": protocol.user_message(protocol.DEFAULT_USER, "Classify.", [{"id": "p1"}])}],
    "response_format": protocol.batch_response_format(None),
}


def pooled(client: httpx.AsyncClient) -> list[int]:
    """How many connections each lane holds."""
    transport = client._transport
    assert isinstance(transport, lanes.Lanes)
    return [len(lane._pool.connections) for lane in transport._lanes]


def free(client: httpx.AsyncClient) -> int:
    transport = client._transport
    assert isinstance(transport, lanes.Lanes)
    return len(transport._free)


async def test_each_call_at_a_time_keeps_one_connection_alive_in_a_lane_of_its_own() -> None:
    with Simulator(latency=0.05, jitter=0).start() as sim:
        async with lanes.client(sim.base_url, 3) as client:
            for _ in range(3):  # three rounds of three calls at once: the same three connections each time
                responses = await asyncio.gather(
                    *(client.post(sim.base_url + "/chat/completions", json=BODY) for _ in range(3))
                )
                assert [r.status_code for r in responses] == [200] * 3
                assert pooled(client) == [1, 1, 1]
                assert free(client) == 3


async def test_calls_beyond_the_lanes_are_answered_on_a_shared_pool() -> None:
    with Simulator(latency=0.05, jitter=0).start() as sim:
        async with lanes.client(sim.base_url, 2) as client:
            responses = await asyncio.gather(
                *(client.post(sim.base_url + "/chat/completions", json=BODY) for _ in range(5))
            )
            assert [r.status_code for r in responses] == [200] * 5
            assert free(client) == 2


async def test_a_failed_call_gives_its_lane_back() -> None:
    with socket.socket() as unused:  # a port nothing listens on
        unused.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{unused.getsockname()[1]}/v1"
    async with lanes.client(url, 2) as client:
        for _ in range(3):
            with pytest.raises(httpx.ConnectError):
                await client.post(url + "/chat/completions", json=BODY)
        assert free(client) == 2
