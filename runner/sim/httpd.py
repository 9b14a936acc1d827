"""The simulator's HTTP plumbing: a threading server on loopback and its handler.

The handler reads a request, hands it to the simulator (``sim.handle``) and
sends the :class:`~runner.sim.replies.Reply` it gets back, billing the
reply's items at that moment; a reply to drop closes the connection instead.
Each connection has a thread of its own, so that slow answers (latency,
timeout faults) never hold up the others; the listen backlog is deep
enough for hundreds of connections opened at once.
"""

from __future__ import annotations

import ipaddress
import json
import socket
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from runner.sim.replies import Reply, Request

if TYPE_CHECKING:
    from runner.sim.server import Simulator


def require_loopback(host: str) -> None:
    """ValueError unless ``host`` is ``localhost`` or a loopback address."""
    if host == "localhost":
        return
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ValueError(f"the simulator only listens on loopback, not on {host!r}")


def server(host: str, port: int, sim: Simulator) -> Server:
    """A server for ``sim`` bound to ``host`` and ``port`` (IPv4 or IPv6), not yet serving."""
    return (Server6 if ":" in host else Server)((host, port), sim)


class Handler(BaseHTTPRequestHandler):
    """Reads one request at a time from a kept-alive connection and sends its reply."""

    protocol_version = "HTTP/1.1"  # keep-alive, so httpx reuses connections
    # Headers and body go out in two writes; with Nagle's algorithm on, the
    # body would wait for a delayed ACK, some 40 ms per request.
    disable_nagle_algorithm = True
    server: Server

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def setup(self) -> None:
        super().setup()
        self.server.sim.ledger.count_connection()

    def handle(self) -> None:
        try:
            super().handle()
        except ConnectionError:
            # A client that gave up waiting (a timeout fault) resets the
            # connection while its late answer is written: nothing to report.
            self.close_connection = True

    def _dispatch(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        url = urlsplit(self.path)
        request = Request(method, url.path, self.headers, body, query=url.query)
        self._send(self.server.sim.handle(request))

    def _send(self, reply: Reply) -> None:
        self.server.sim.ledger.bill(reply.bill)
        if reply.drop:
            # Nothing written, and a FIN both ways: the client sees the
            # connection end instead of waiting for an answer.
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        payload = reply.payload
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        headers = {
            "Server": self.version_string(),
            "Date": self.date_time_string(),
            "Content-Type": "application/json",
            "Content-Length": str(len(data)),
            **reply.headers,  # may date the reply itself, with a Retry-After date
        }
        self.send_response_only(reply.status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet: the ledger, not stderr, is the record of requests."""


class Server(ThreadingHTTPServer):
    """A thread per connection, for the simulator ``sim``."""

    daemon_threads = True
    # The listen backlog: connections the system holds for accept() while
    # the serving loop starts threads. The default of 5 resets a burst of
    # a few dozen, which no real upstream does.
    request_queue_size = 1024

    def __init__(self, address: tuple[str, int], sim: Simulator) -> None:
        self.sim = sim
        super().__init__(address, Handler)


class Server6(Server):
    """The same, on an IPv6 loopback address."""

    address_family = socket.AF_INET6
