"""The HTTP client of a run: one kept-alive connection per slot, so that its cost per call stays flat as C grows.

httpx's connection pool (httpcore) looks over every pooled connection each
time a request is added or a response closed, and over every one again for
each idle connection: at 32-64 connections that bookkeeping took more of a
run's CPU than the calls themselves (a profile at C = 64 and 0.25 s of
latency: four fifths of the wall clock), and the busier the event loop, the
more connections sit idle while it runs. Here a call takes a lane of its
own, a transport of one connection, kept alive between calls, and gives it
back when its response is closed: the bookkeeping of one connection. Requests
beyond the lanes (a Batch API provider's polls beside its calls) share one
ordinary pool. Plain HTTP (a local server, the simulator) loads no CA bundle;
HTTPS loads it once for all the lanes.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Callable

import httpx

#: One connection, kept alive.
ONE = httpx.Limits(max_connections=1, max_keepalive_connections=1)


def client(base_url: str, lanes: int) -> httpx.AsyncClient:
    """A client for up to ``lanes`` calls at a time to ``base_url``; redirects are not followed."""
    verify: ssl.SSLContext | bool = httpx.URL(base_url).scheme == "https" and httpx.create_ssl_context()
    return httpx.AsyncClient(transport=Lanes(lanes, verify=verify))


class Lanes(httpx.AsyncBaseTransport):
    """``lanes`` transports of one connection each, a call to a free one; more at once share a pool."""

    def __init__(self, lanes: int, *, verify: ssl.SSLContext | bool) -> None:
        self._lanes = [httpx.AsyncHTTPTransport(verify=verify, limits=ONE) for _ in range(lanes)]
        #: The lanes no call holds, the last given back first (its connection is the likeliest still open).
        self._free = list(self._lanes)
        self._shared = httpx.AsyncHTTPTransport(verify=verify)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if not self._free:
            return await self._shared.handle_async_request(request)
        lane = self._free.pop()
        try:
            response = await lane.handle_async_request(request)
        except BaseException:
            self._free.append(lane)
            raise
        assert isinstance(response.stream, httpx.AsyncByteStream)
        response.stream = GivenBack(response.stream, lambda: self._free.append(lane))
        return response

    async def aclose(self) -> None:
        for transport in (*self._lanes, self._shared):
            await transport.aclose()


class GivenBack(httpx.AsyncByteStream):
    """A response's body that gives its lane back (once) when it is closed."""

    def __init__(self, stream: httpx.AsyncByteStream, give_back: Callable[[], None]) -> None:
        self._stream = stream
        self._give_back: Callable[[], None] | None = give_back

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._stream:
            yield chunk

    async def aclose(self) -> None:
        try:
            await self._stream.aclose()
        finally:
            give_back, self._give_back = self._give_back, None
            if give_back is not None:
                give_back()
