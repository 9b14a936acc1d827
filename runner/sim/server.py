"""A loopback HTTP server that plays an OpenAI-compatible upstream.

Requests go through one small routing table, ``(method, path) -> route``.
A route turns a :class:`Request` into a :class:`Reply` and does not write to
the socket; the handler sends the reply and bills its items at that moment.
Faults of the fault plan (:mod:`runner.sim.faults`) change what a route
builds (an error, a broken body, a reply to drop), never how it is sent.
"""

from __future__ import annotations

import copy
import ipaddress
import itertools
import json
import random
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from runner import protocol
from runner.sim import answers
from runner.sim.faults import DEFAULT_TIMEOUT, Fault, FaultPlan, parse_plan
from runner.sim.ledger import Ledger
from runner.sim.replies import DROPPED, ERRORS, Reply, Request, error_reply, fault_error

OnRequest = Callable[[list[str]], None]

# stop() waits up to one poll interval for the serving loop to notice.
POLL_INTERVAL = 0.05


class Simulator:
    """An OpenAI-compatible upstream on loopback, with a charge ledger.

    Use it started in a background thread::

        with Simulator(latency=0.2).start() as sim:
            client = httpx.Client(base_url=sim.base_url)

    or blocking, from a command line, with :meth:`serve_forever`. ``faults``
    is a fault plan (:mod:`runner.sim.faults`); :meth:`set_faults` and
    ``PUT /_sim/faults`` replace it while serving.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        latency: float = 0.0,
        jitter: float = 0.0,
        seed: int = 0,
        on_request: OnRequest | None = None,
        api_key: str | None = None,
        faults: Mapping[str, Any] | None = None,
    ) -> None:
        _require_loopback(host)
        self.on_request = on_request
        #: When set, only ``Authorization: Bearer <api_key>`` is accepted; otherwise any key or none.
        self.api_key = api_key
        self._host = host
        self._latency = latency
        self._jitter = jitter
        self._rng = random.Random(seed)
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()
        self._ledger = Ledger()
        self._faults = FaultPlan(faults)
        # Set by stop(), to cut short the waits of timeout faults.
        self._closing = threading.Event()
        self._server = (_Server6 if ":" in host else _Server)((host, port), self)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The port the server listens on (chosen by the system for port 0)."""
        return self._server.server_port

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL, ending in ``/v1``."""
        host = {"localhost": "127.0.0.1", "::1": "[::1]"}.get(self._host, self._host)
        return f"http://{host}:{self.port}/v1"

    @property
    def ledger(self) -> Ledger:
        """What was requested and billed so far."""
        return self._ledger

    @property
    def faults(self) -> dict[str, Any]:
        """A copy of the current fault plan, its seed filled in."""
        return copy.deepcopy(self._faults.plan)

    def set_faults(self, plan: Mapping[str, Any] | None) -> None:
        """Replace the fault plan (None: no faults), its counters and its generator.

        Safe while serving: a bad plan raises ValueError and changes nothing;
        requests already past their choice keep the fault they got.
        """
        self._faults = FaultPlan(plan)

    def start(self) -> Simulator:
        """Serve in a daemon thread; returns the simulator for ``with``."""
        self._thread = threading.Thread(
            target=self.serve_forever, name=f"runner-sim:{self.port}", daemon=True
        )
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in the calling thread until interrupted."""
        self._server.serve_forever(poll_interval=POLL_INTERVAL)

    def stop(self) -> None:
        """Stop serving, drop requests held by timeout faults, close the socket."""
        self._closing.set()
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> Simulator:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def handle(self, request: Request) -> Reply:
        """The reply of the route for ``request``, or a 404."""
        route = _ROUTES.get((request.method, request.path))
        if route is None:
            return error_reply(404, f"Invalid URL ({request.method} {request.path})")
        return route(self, request)

    def _next_number(self) -> int:
        with self._lock:
            return next(self._numbers)

    def _delay(self) -> float:
        with self._lock:
            return self._latency + self._rng.uniform(0, self._jitter)


def _require_loopback(host: str) -> None:
    if host == "localhost":
        return
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ValueError(f"the simulator only listens on loopback, not on {host!r}")


# Routes ------------------------------------------------------------------


def chat_completions(sim: Simulator, request: Request) -> Reply:
    """``POST /v1/chat/completions``: answer the batch in the last user message."""
    if not _key_accepted(request, sim.api_key):
        return error_reply(401, "Incorrect API key provided.", code="invalid_api_key")
    body = _json_object(request.body)
    if body is None or not _is_chat_body(body):
        return error_reply(400, "the body needs a 'model' string and a non-empty 'messages' list")
    items = protocol.find_items(_last_user_text(body["messages"]))
    if items is None:
        return error_reply(400, "no batch items found in the user message")
    ids = [item["id"] for item in items]
    sim.ledger.record(ids, sum(map(protocol.item_chars, items)), body["model"])
    with sim.ledger.flight():
        if sim.on_request is not None:
            sim.on_request(ids)
        fault = sim._faults.choose(ids)
        if fault is not None:
            sim.ledger.count_fault(fault.name)
        time.sleep(sim._delay())
        return _faulted(sim, fault, body, items)


def ledger_snapshot(sim: Simulator, request: Request) -> Reply:
    """``GET /_sim/ledger``: the ledger's counts."""
    return Reply(200, sim.ledger.snapshot())


def ledger_reset(sim: Simulator, request: Request) -> Reply:
    """``POST /_sim/reset``: forget the ledger's history."""
    sim.ledger.reset()
    return Reply(200, {"ok": True})


def faults_get(sim: Simulator, request: Request) -> Reply:
    """``GET /_sim/faults``: the current fault plan."""
    return Reply(200, sim.faults)


def faults_put(sim: Simulator, request: Request) -> Reply:
    """``PUT /_sim/faults``: replace the fault plan; a bad one is a 400 and changes nothing."""
    try:
        sim.set_faults(parse_plan(request.body))
    except ValueError as exc:
        return error_reply(400, str(exc))
    return Reply(200, sim.faults)


_ROUTES: dict[tuple[str, str], Callable[[Simulator, Request], Reply]] = {
    ("POST", "/v1/chat/completions"): chat_completions,
    ("GET", "/_sim/ledger"): ledger_snapshot,
    ("POST", "/_sim/reset"): ledger_reset,
    ("GET", "/_sim/faults"): faults_get,
    ("PUT", "/_sim/faults"): faults_put,
}


def _faulted(
    sim: Simulator, fault: Fault | None, body: dict[str, Any], items: list[dict[str, Any]]
) -> Reply:
    """The reply to a well-formed batch request, as ``fault`` (if any) makes it."""
    if fault is None:
        return _completion(sim._next_number(), body, items, None)
    if fault.name in ERRORS:
        return fault_error(fault, now=time.time())
    if fault.name == "drop":
        return DROPPED
    if fault.name == "timeout" and sim._closing.wait(fault.params.get("seconds", DEFAULT_TIMEOUT)):
        return DROPPED  # stopped while waiting: the answer was never made
    reply = _completion(sim._next_number(), body, items, fault)
    return replace(reply, drop=fault.name == "billed_then_dropped")


def _completion(
    number: int, body: dict[str, Any], items: list[dict[str, Any]], fault: Fault | None
) -> Reply:
    """The 200 answer to a well-formed batch request, billing all its items."""
    response_format = body.get("response_format")
    results = answers.answer(items, response_format if isinstance(response_format, dict) else None)
    content, finish_reason = answers.content(results, fault)
    prompt_tokens = _tokens(sum(len(_text(m.get("content"))) for m in body["messages"]))
    completion_tokens = _tokens(len(content))
    payload = {
        "id": f"chatcmpl-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body["model"],
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": None},
                "logprobs": None,
                "finish_reason": finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
        "system_fingerprint": "fp_runner_sim",
    }
    bill = tuple(item["id"] for item in items)
    return Reply(200, payload, headers={"x-request-id": f"req_{number}"}, bill=bill)


def _key_accepted(request: Request, api_key: str | None) -> bool:
    if api_key is None:
        return True
    scheme, _, key = (request.headers.get("Authorization") or "").partition(" ")
    return scheme == "Bearer" and key.strip() == api_key


def _json_object(body: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(body)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _is_chat_body(body: dict[str, Any]) -> bool:
    messages = body.get("messages")
    return (
        isinstance(body.get("model"), str)
        and isinstance(messages, list)
        and bool(messages)
        and all(isinstance(m, dict) for m in messages)
    )


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    user = [m for m in messages if m.get("role") == "user"]
    return _text(user[-1].get("content")) if user else ""


def _text(content: Any) -> str:
    """A message's text: a plain string, or the text parts of a part list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part["text"]
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""


def _tokens(chars: int) -> int:
    """Roughly four characters to a token, as OpenAI's rule of thumb has it."""
    return -(-chars // 4)


# HTTP plumbing -------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, so httpx reuses connections
    # Headers and body go out in two writes; with Nagle's algorithm on, the
    # body would wait for a delayed ACK, some 40 ms per request.
    disable_nagle_algorithm = True
    server: _Server

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

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
        request = Request(method, urlsplit(self.path).path, self.headers, body)
        self._send(self.server.sim.handle(request))

    def _send(self, reply: Reply) -> None:
        self.server.sim.ledger.bill(reply.bill)
        if reply.drop:
            # Nothing written, and a FIN both ways: the client sees the
            # connection end instead of waiting for an answer.
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        data = json.dumps(reply.payload).encode()
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


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], sim: Simulator) -> None:
        self.sim = sim
        super().__init__(address, _Handler)


class _Server6(_Server):
    address_family = socket.AF_INET6
