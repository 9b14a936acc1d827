"""A loopback HTTP server that plays an OpenAI-compatible upstream, and Anthropic's API.

Requests go through one small routing table, ``(method, path) -> route``,
where a path segment such as ``{id}`` matches any one segment. A route turns
a :class:`Request` into a :class:`Reply` and does not write to the socket;
the handler (:mod:`runner.sim.httpd`) sends the reply and bills its items
at that moment. Faults of the fault plan (:mod:`runner.sim.faults`) change
what a route builds (an error, a broken body, a reply to drop), never how
it is sent. The Files and
Batches routes are in :mod:`runner.sim.batch_routes`; their batches bill
when the simulator's clock has ended them. Anthropic's Messages and Message
Batches routes (``/v1/messages...``, the key in ``x-api-key``) are in
:mod:`runner.sim.anthropic` and :mod:`runner.sim.anthropic_batches`.
"""

from __future__ import annotations

import copy
import itertools
import math
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from types import TracebackType
from typing import Any

from runner import protocol
from runner.sim import anthropic, anthropic_batches, batch_routes, chat, httpd
from runner.sim.anthropic_batches import MessageBatches
from runner.sim.batches import BatchStore
from runner.sim.clock import Clock
from runner.sim.faults import DEFAULT_TIMEOUT, Fault, FaultPlan, Scope, parse_plan
from runner.sim.ledger import Ledger
from runner.sim.replies import (
    DROPPED,
    ERRORS,
    UNAUTHORIZED,
    Reply,
    Request,
    bearer_key,
    error_reply,
    fault_error,
    json_object,
    key_accepted,
)

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

    Batches of the Batch API take ``batch_seconds`` of the simulator's
    ``clock`` (real time unless given) from creation to ``completed``;
    :meth:`advance` and ``POST /_sim/clock`` move that clock forward.
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
        on_call: Callable[[str, str], None] | None = None,
        api_key: str | None = None,
        faults: Mapping[str, Any] | None = None,
        batch_seconds: float = 1.0,
        clock: Clock | None = None,
    ) -> None:
        httpd.require_loopback(host)
        if not math.isfinite(batch_seconds) or batch_seconds < 0:
            raise ValueError(f"batch_seconds must be 0 or more, not {batch_seconds!r}")
        self.on_request = on_request
        #: Called with (method, path) for every ``/v1/`` request before it is handled.
        self.on_call = on_call
        #: When set, only ``Authorization: Bearer <api_key>`` is accepted; otherwise any key or none.
        self.api_key = api_key
        self._host = host
        self._latency = latency
        self._jitter = jitter
        self._rng = random.Random(seed)
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()
        self._clock = clock or Clock()
        self._ledger = Ledger(settle=self._settle)
        self._batches = BatchStore(
            seconds=batch_seconds, numbers=self._next_number, bill=self._ledger.bill,
            cancelled=self._ledger.count_cancel, seed=seed
        )
        self._message_batches = MessageBatches(
            seconds=batch_seconds, numbers=self._next_number, bill=self._ledger.bill, seed=seed
        )
        self._faults = FaultPlan(faults)
        # Set by stop(), to cut short the waits of timeout and create_slow faults.
        self._closing = threading.Event()
        self._server = httpd.server(host, port, self)
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
    def clock(self) -> Clock:
        """The clock of batch timestamps and transitions."""
        return self._clock

    @property
    def batches(self) -> BatchStore:
        """The files and batches of the Batch API."""
        return self._batches

    @property
    def message_batches(self) -> MessageBatches:
        """The batches of Anthropic's Message Batches API."""
        return self._message_batches

    def advance(self, seconds: float) -> float:
        """Move the clock ``seconds`` forward, end the batches now due, return the new time."""
        now = self._clock.advance(seconds)
        self._batches.settle(now)
        self._message_batches.settle(now)
        return now

    def choose_fault(self, ids: Sequence[str], scope: Scope = Scope.CHAT) -> Fault | None:
        """The plan's fault for a request of ``scope`` carrying ``ids``, counted in the ledger."""
        fault = self._faults.choose(ids, scope)
        if fault is not None:
            self._ledger.count_fault(fault.name)
        return fault

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

    def wait(self, seconds: float) -> bool:
        """Wait ``seconds`` of real time, as a slow upstream; True if stopped meanwhile."""
        return self._closing.wait(seconds)

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
        """Stop serving, drop requests held by timeout or create_slow faults, close the socket."""
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
        """The reply of the route for ``request``: a 401 without the key, a 404 without a route."""
        if request.path.startswith("/v1/messages"):  # Anthropic's: its key header, its error shape
            if not anthropic.key_accepted(request, self.api_key):
                return anthropic.UNAUTHORIZED
        elif request.path.startswith("/v1/") and not key_accepted(request, self.api_key):
            return UNAUTHORIZED
        if request.path.startswith("/v1/") and self.on_call is not None:
            self.on_call(request.method, request.path)
        for (method, pattern), route in _ROUTES.items():
            params = _match(pattern, request.path)
            if method == request.method and params is not None:
                return route(self, replace(request, params=params))
        return error_reply(404, f"Invalid URL ({request.method} {request.path})")

    def answer_batch(self, items: list[dict[str, Any]], model: str, reply: Callable[[Fault | None], Reply]) -> Reply:
        """A request carrying a batch of ``items``: recorded, counted in flight while the plan's fault (if any) is
        chosen and the latency waited, then answered by ``reply`` as that fault makes it."""
        ids = [item["id"] for item in items]
        self._ledger.record(ids, sum(map(protocol.item_chars, items)), model)
        with self._ledger.flight():
            if self.on_request is not None:
                self.on_request(ids)
            fault = self.choose_fault(ids)
            time.sleep(self._delay())
            return reply(fault)

    def _next_number(self) -> int:
        with self._lock:
            return next(self._numbers)

    def _delay(self) -> float:
        with self._lock:
            return self._latency + self._rng.uniform(0, self._jitter)

    def _settle(self) -> None:
        now = self._clock.now()
        self._batches.settle(now)
        self._message_batches.settle(now)


# Routes ------------------------------------------------------------------


def chat_completions(sim: Simulator, request: Request) -> Reply:
    """``POST /v1/chat/completions``: answer the batch in the last user message."""
    body = json_object(request.body)
    if body is None or not chat.is_chat_body(body):
        return error_reply(400, chat.NOT_CHAT)
    items = chat.items_of(body)
    if items is None:
        return error_reply(400, chat.NO_ITEMS)
    return sim.answer_batch(items, body["model"], lambda fault: _faulted(sim, fault, request, body, items))


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


def clock_get(sim: Simulator, request: Request) -> Reply:
    """``GET /_sim/clock``: ``{"now": t}``, the simulator's time in Unix seconds."""
    return Reply(200, {"now": sim.clock.now()})


def clock_advance(sim: Simulator, request: Request) -> Reply:
    """``POST /_sim/clock`` with ``{"advance": seconds}``: move the clock forward."""
    seconds = (json_object(request.body) or {}).get("advance")
    if not isinstance(seconds, int | float) or isinstance(seconds, bool):
        return error_reply(400, "the body must be {\"advance\": seconds}", param="advance")
    try:
        return Reply(200, {"now": sim.advance(seconds)})
    except ValueError as exc:
        return error_reply(400, str(exc), param="advance")


_ROUTES: dict[tuple[str, str], Callable[[Simulator, Request], Reply]] = {
    ("POST", "/v1/chat/completions"): chat_completions,
    **batch_routes.ROUTES,
    **anthropic.ROUTES,
    **anthropic_batches.ROUTES,
    ("GET", "/_sim/ledger"): ledger_snapshot,
    ("POST", "/_sim/reset"): ledger_reset,
    ("GET", "/_sim/faults"): faults_get,
    ("PUT", "/_sim/faults"): faults_put,
    ("GET", "/_sim/clock"): clock_get,
    ("POST", "/_sim/clock"): clock_advance,
}


def _match(pattern: str, path: str) -> dict[str, str] | None:
    """The ``{name}`` segments of ``pattern`` as found in ``path``; None when it does not match."""
    wanted, given = pattern.split("/"), path.split("/")
    if len(wanted) != len(given):
        return None
    params: dict[str, str] = {}
    for want, got in zip(wanted, given, strict=True):
        if want.startswith("{") and want.endswith("}") and got:
            params[want[1:-1]] = got
        elif want != got:
            return None
    return params


def _faulted(
    sim: Simulator,
    fault: Fault | None,
    request: Request,
    body: dict[str, Any],
    items: list[dict[str, Any]],
) -> Reply:
    """The reply to a well-formed batch request, as ``fault`` (if any) makes it."""
    if fault is None:
        return chat.completion(sim._next_number(), body, items, None, created=sim.clock.now())
    if fault.name in ERRORS:
        key = bearer_key(request) or ""
        return fault_error(fault, model=body["model"], key=key, now=time.time())
    if fault.name == "drop":
        return DROPPED
    if fault.name == "timeout" and sim.wait(fault.params.get("seconds", DEFAULT_TIMEOUT)):
        return DROPPED  # stopped while waiting: the answer was never made
    reply = chat.completion(sim._next_number(), body, items, fault, created=sim.clock.now())
    return replace(reply, drop=fault.name == "billed_then_dropped")
