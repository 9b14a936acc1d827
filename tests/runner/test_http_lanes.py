"""The run's HTTP client: one kept-alive connection per slot, calls beyond the slots on a shared pool."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable

import httpx
import pytest

from runner import protocol
from runner.providers import lanes
from runner.sim import Simulator

BODY = {
    "model": "sim-model",
    "messages": [{"role": "user", "content": protocol.user_message(protocol.DEFAULT_USER, "Classify.", protocol.encode([{"id": "p1"}]))}],
    "response_format": protocol.batch_response_format(None),
}
#: The simulator holds the first request this long (cut short when it stops): a call that never ends by itself.
HELD = {"rules": [{"fault": "timeout", "seconds": 300, "times": 1}]}


def transport(client: httpx.AsyncClient) -> lanes.Lanes:
    lanes_of = client._transport
    assert isinstance(lanes_of, lanes.Lanes)
    return lanes_of


def pooled(client: httpx.AsyncClient) -> list[int]:
    """How many connections each lane holds."""
    return [len(lane._pool.connections) for lane in transport(client)._lanes]


def shared(client: httpx.AsyncClient) -> int:
    """How many connections the shared pool holds."""
    return len(transport(client)._shared._pool.connections)


def free(client: httpx.AsyncClient) -> int:
    return len(transport(client)._free)


def connections(sim: Simulator) -> int:
    """How many connections the simulator accepted."""
    return int(sim.ledger.snapshot()["connections"])


async def test_each_call_at_a_time_keeps_one_connection_alive_in_a_lane_of_its_own() -> None:
    with Simulator(latency=0.05, jitter=0).start() as sim:
        async with lanes.client(sim.base_url, 3) as client:
            for _ in range(3):  # three rounds of three calls at once: the same three connections each time
                responses = await asyncio.gather(
                    *(client.post(sim.base_url + "/chat/completions", json=BODY) for _ in range(3))
                )
                assert [r.status_code for r in responses] == [200] * 3
                assert pooled(client) == [1, 1, 1] and shared(client) == 0
                assert free(client) == 3
                assert connections(sim) == 3  # nine calls, three connections: none opened again


async def test_calls_beyond_the_lanes_are_answered_on_a_shared_pool() -> None:
    with Simulator(latency=0.05, jitter=0).start() as sim:
        async with lanes.client(sim.base_url, 2) as client:
            for _ in range(2):
                responses = await asyncio.gather(
                    *(client.post(sim.base_url + "/chat/completions", json=BODY) for _ in range(5))
                )
                assert [r.status_code for r in responses] == [200] * 5
                assert pooled(client) == [1, 1] and shared(client) == 3  # the three beyond the lanes, kept alive
                assert free(client) == 2
                assert connections(sim) == 5


async def test_a_failed_call_gives_its_lane_back() -> None:
    with socket.socket() as unused:  # a port nothing listens on
        unused.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{unused.getsockname()[1]}/v1"
    async with lanes.client(url, 2) as client:
        for _ in range(3):
            with pytest.raises(httpx.ConnectError):
                await client.post(url + "/chat/completions", json=BODY)
        assert free(client) == 2


Ending = Callable[[httpx.AsyncClient, asyncio.Task[httpx.Response]], Awaitable[None]]


async def held_call_ends(sim: Simulator, end: Ending, *, timeout: float) -> None:
    """A call the simulator holds (``timeout`` s at most) is ended by ``end``; then its lane is free, and the next
    call goes on it."""
    sim.set_faults(HELD)
    loop = asyncio.get_running_loop()
    arrived = asyncio.Event()

    def on_request(ids: list[str]) -> None:
        loop.call_soon_threadsafe(arrived.set)

    sim.on_request = on_request
    async with lanes.client(sim.base_url, 1) as client:
        call = asyncio.create_task(client.post(sim.base_url + "/chat/completions", json=BODY, timeout=timeout))
        await arrived.wait()
        await end(client, call)
        assert free(client) == 1 and pooled(client) == [0]  # given back, its connection (answer pending) closed
        response = await client.post(sim.base_url + "/chat/completions", json=BODY)
        assert response.status_code == 200
        assert pooled(client) == [1] and shared(client) == 0 and free(client) == 1  # on the lane, nothing stuck
        assert connections(sim) == 2


async def test_a_cancelled_call_gives_its_lane_back_and_its_connection_is_not_reused() -> None:
    async def cancel(client: httpx.AsyncClient, call: asyncio.Task[httpx.Response]) -> None:
        assert free(client) == 0
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call

    with Simulator(latency=0, jitter=0).start() as sim:
        await held_call_ends(sim, cancel, timeout=300)


async def test_a_call_that_times_out_gives_its_lane_back_and_its_connection_is_not_reused() -> None:
    async def time_out(client: httpx.AsyncClient, call: asyncio.Task[httpx.Response]) -> None:
        assert free(client) == 0
        with pytest.raises(httpx.ReadTimeout):
            await call

    with Simulator(latency=0, jitter=0).start() as sim:
        await held_call_ends(sim, time_out, timeout=0.5)
