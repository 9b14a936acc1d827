"""Anthropic's Message Batches on the simulator: the batches, their life on the simulator's clock, and the routes.

``POST /v1/messages/batches`` takes ``{"requests": [{"custom_id", "params"}]}``
(at most 100,000, ``custom_id`` unique, ``^[a-zA-Z0-9_-]{1,64}$``); a batch
is ``in_progress`` (``request_counts`` all ``processing``) for the
simulator's ``batch_seconds``, then ``ended``: every request answered as
``POST /v1/messages`` would answer it (``succeeded``, billed then) or
``errored`` (not billed; a request's params are checked only as it runs, as
Anthropic does), its ``results_url`` set, its results JSONL in
shuffled order. A cancel makes it ``canceling`` until the next read, then
``ended``: the first half of its requests (those already running) succeeded
and billed, the rest ``canceled``.

The fault plan's batch faults apply: ``create_lost``, ``create_500``,
``create_slow``, ``create_twice`` and ``batch_unknown`` as for OpenAI's
batches; ``expire`` ends it at its 24 h deadline with the first half
succeeded and the rest ``expired``; ``errored_lines`` makes the requests of
its ``keys`` (else every one) ``errored`` with an ``api_error``; ``poll_503``
and ``list_503`` answer a 529 ``overloaded_error``.
"""

from __future__ import annotations

import itertools
import json
import random
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from runner.sim import anthropic, chat
from runner.sim.faults import DEFAULT_CREATE_SECONDS, Fault, Scope
from runner.sim.replies import DROPPED, Reply, Request, json_object

if TYPE_CHECKING:
    from runner.sim.server import Simulator

REQUESTS = 100_000
BODY_BYTES = 256_000_000
WINDOW_SECONDS = 24 * 3600
CUSTOM_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")
OUTCOMES = ("succeeded", "errored", "canceled", "expired")
MAX_LIMIT = 1000


@dataclass
class BatchRequest:
    """One request of a batch: its ``custom_id``, its Messages params and the batch items they carry (None: its
    params are not a usable Messages request, which ends ``errored``)."""

    custom_id: str
    params: dict[str, Any]
    items: list[dict[str, Any]] | None


@dataclass
class MessageBatch:
    """One Message Batch: its requests, when it ends, its fault, and once ended its results."""

    id: str
    created: float
    requests: list[BatchRequest]
    fault: Fault | None
    ends: float
    cancel_at: float | None = None
    ended_at: float | None = None
    results: list[dict[str, Any]] = field(default_factory=list)

    @property
    def unknown(self) -> bool:
        return self.fault is not None and self.fault.name == "batch_unknown"

    def to_json(self, root: str) -> dict[str, Any]:
        """The ``message_batch`` object; ``root`` is the simulator's URL, for ``results_url``."""
        counts = dict.fromkeys(("processing", *OUTCOMES), 0)
        if self.ended_at is None:
            counts["processing"] = len(self.requests)
        for line in self.results:
            counts[line["result"]["type"]] += 1
        ended = self.ended_at is not None
        status = "ended" if ended else "canceling" if self.cancel_at is not None else "in_progress"
        return {
            "id": self.id, "type": "message_batch", "processing_status": status, "request_counts": counts,
            "created_at": rfc3339(self.created), "expires_at": rfc3339(self.created + WINDOW_SECONDS),
            "ended_at": None if self.ended_at is None else rfc3339(self.ended_at),
            "cancel_initiated_at": None if self.cancel_at is None else rfc3339(self.cancel_at),
            "archived_at": None,
            "results_url": f"{root}/v1/messages/batches/{self.id}/results" if ended else None,
        }


def rfc3339(seconds: float) -> str:
    """Unix seconds as Anthropic writes times: RFC 3339, UTC, ``Z``."""
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


class MessageBatches:
    """Message Batches under one lock, ended against the clock on every read (each ended, and billed, once)."""

    def __init__(self, *, seconds: float, numbers: Callable[[], int], bill: Callable[[Iterable[str]], None],
                 seed: int = 0) -> None:
        self._seconds = seconds
        self._numbers = numbers
        self._bill = bill
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._batches: dict[str, MessageBatch] = {}
        self._ids = itertools.count(1)

    def create(self, requests: list[BatchRequest], fault: Fault | None, now: float) -> MessageBatch:
        with self._lock:
            ends = now + (WINDOW_SECONDS if fault is not None and fault.name == "expire" else self._seconds)
            batch = MessageBatch(f"msgbatch_sim_{next(self._ids):06d}", now, requests, fault, ends)
            self._batches[batch.id] = batch
            return batch

    def get(self, batch_id: str, now: float) -> MessageBatch | None:
        with self._lock:
            self._settle(now)
            batch = self._batches.get(batch_id)
            return None if batch is None or batch.unknown else batch

    def newest(self, now: float) -> list[MessageBatch]:
        """Every known batch, newest first."""
        with self._lock:
            self._settle(now)
            return [b for b in reversed(self._batches.values()) if not b.unknown]

    def cancel(self, batch_id: str, now: float) -> MessageBatch | None:
        with self._lock:
            self._settle(now)
            batch = self._batches.get(batch_id)
            if batch is None or batch.unknown:
                return None
            if batch.ended_at is None and batch.cancel_at is None:
                batch.cancel_at = now
            return batch

    def settle(self, now: float) -> None:
        with self._lock:
            self._settle(now)

    def _settle(self, now: float) -> None:
        for batch in self._batches.values():
            if batch.ended_at is not None or batch.unknown:
                continue
            if batch.cancel_at is not None and now > batch.cancel_at:
                self._end(batch, now, "canceled")
            elif now >= batch.ends:
                self._end(batch, batch.ends, "expired" if batch.fault and batch.fault.name == "expire" else None)

    def _end(self, batch: MessageBatch, at: float, unrun: str | None) -> None:
        """End ``batch`` at ``at``: its requests answered (billed), errored, or (``unrun``, after the first half) not run."""
        ran = len(batch.requests) if unrun is None else max(1, len(batch.requests) // 2)
        erring = batch.fault is not None and batch.fault.name == "errored_lines"
        targets = set(batch.fault.targets) if batch.fault is not None else set()
        for number, request in enumerate(batch.requests):
            if number >= ran:
                result: dict[str, Any] = {"type": unrun}
            elif request.items is None or (erring and (not targets or targets & {i["id"] for i in request.items})):
                message = (f"{chat.NOT_CHAT}, a 'max_tokens', and batch items in its user message"
                           if request.items is None else "Internal server error (a simulated fault).")
                reply = anthropic.error(400 if request.items is None else 500, message)
                result = {"type": "errored", "error": reply.payload}
            else:
                reply = anthropic.message(self._numbers(), request.params, request.items, None)
                self._bill(reply.bill)
                result = {"type": "succeeded", "message": reply.payload}
            batch.results.append({"custom_id": request.custom_id, "result": result})
        self._rng.shuffle(batch.results)
        batch.ended_at = at


# Routes ------------------------------------------------------------------


def root(sim: Simulator) -> str:
    """The simulator's URL as Anthropic's base URL: the host, without ``/v1``."""
    return sim.base_url.removesuffix("/v1")


def create(sim: Simulator, request: Request) -> Reply:
    """``POST /v1/messages/batches``: a batch of Messages requests, ``in_progress``."""
    if len(request.body) > BODY_BYTES:
        return anthropic.error(413, f"Request exceeds the maximum allowed number of bytes ({BODY_BYTES}).")
    body = json_object(request.body)
    requests, problem = _requests(body)
    if problem is not None:
        return anthropic.error(400, problem)
    fault = sim.choose_fault([i["id"] for r in requests for i in r.items or ()], Scope.BATCH)
    name = None if fault is None else fault.name
    if fault is not None and name == "create_slow" and sim.wait(fault.params.get("seconds", DEFAULT_CREATE_SECONDS)):
        return DROPPED  # stopped while waiting: the batch was never made
    batch = _made(sim, requests, fault)
    if name == "create_twice":
        batch = _made(sim, requests, fault)
    if name == "create_lost":
        return DROPPED
    if name == "create_500":
        return anthropic.error(500, "Internal server error")
    return Reply(200, batch.to_json(root(sim)))


def _made(sim: Simulator, requests: list[BatchRequest], fault: Fault | None) -> MessageBatch:
    sim.ledger.count_batch()
    return sim.message_batches.create(requests, fault, sim.clock.now())


def _requests(body: dict[str, Any] | None) -> tuple[list[BatchRequest], str | None]:
    """The requests of a create's body; or why Anthropic would refuse it."""
    given = None if body is None else body.get("requests")
    if not isinstance(given, list) or not given:
        return [], "requests: a non-empty list of requests is required"
    if len(given) > REQUESTS:
        return [], f"requests: at most {REQUESTS} requests are allowed in a batch"
    requests: list[BatchRequest] = []
    seen: set[str] = set()
    for number, entry in enumerate(given):
        custom = entry.get("custom_id") if isinstance(entry, dict) else None
        params = entry.get("params") if isinstance(entry, dict) else None
        if not isinstance(custom, str) or not CUSTOM_ID.fullmatch(custom):
            return [], f"requests.{number}.custom_id: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
        if custom in seen:
            return [], f"requests.{number}.custom_id: duplicate custom_id {custom!r} in the batch"
        if not isinstance(params, dict):
            return [], f"requests.{number}.params: Input should be an object"
        seen.add(custom)
        # Each request's params are checked as it runs, as Anthropic does: a bad one ends errored.
        usable = chat.is_chat_body(params) and isinstance(params.get("max_tokens"), int)
        requests.append(BatchRequest(custom, params, chat.items_of(params) if usable else None))
    return requests, None


def retrieve(sim: Simulator, request: Request) -> Reply:
    """``GET /v1/messages/batches/{id}``: the batch as of the simulator's clock."""
    if sim.choose_fault([], Scope.POLL) is not None:
        return anthropic.error(529, "Overloaded")
    batch = sim.message_batches.get(request.params["id"], sim.clock.now())
    return _unknown(request) if batch is None else Reply(200, batch.to_json(root(sim)))


def listing(sim: Simulator, request: Request) -> Reply:
    """``GET /v1/messages/batches?limit=&after_id=&before_id=``: a page of batches, newest first."""
    if sim.choose_fault([], Scope.LIST) is not None:
        return anthropic.error(529, "Overloaded")
    query = {name: values[-1] for name, values in parse_qs(request.query).items()}
    limit = query.get("limit", "20")
    if not limit.isdigit() or not 1 <= int(limit) <= MAX_LIMIT:
        return anthropic.error(400, f"limit: must be a whole number from 1 to {MAX_LIMIT}")
    batches = sim.message_batches.newest(sim.clock.now())
    ids = [b.id for b in batches]
    count = int(limit)
    for cursor in ("after_id", "before_id"):
        if cursor in query and query[cursor] not in ids:
            return anthropic.error(400, f"{cursor}: no batch {query[cursor]!r}")
    if "before_id" in query:
        batches = batches[:ids.index(query["before_id"])]
        page = batches[-count:]
    else:
        batches = batches[ids.index(query["after_id"]) + 1:] if "after_id" in query else batches
        page = batches[:count]
    data = [b.to_json(root(sim)) for b in page]
    return Reply(200, {"data": data, "has_more": len(batches) > len(page),
                       "first_id": data[0]["id"] if data else None, "last_id": data[-1]["id"] if data else None})


def results(sim: Simulator, request: Request) -> Reply:
    """``GET /v1/messages/batches/{id}/results``: the results as JSONL, once the batch has ended."""
    batch = sim.message_batches.get(request.params["id"], sim.clock.now())
    if batch is None:
        return _unknown(request)
    if batch.ended_at is None:
        return anthropic.error(400, f"Message Batch {batch.id} has not yet ended; its results are not available.")
    content = "".join(json.dumps(line) + "\n" for line in batch.results).encode()
    return Reply(200, content, headers={"Content-Type": "application/binary"})


def cancel(sim: Simulator, request: Request) -> Reply:
    """``POST /v1/messages/batches/{id}/cancel``: ``canceling``, ended at the next read."""
    batch = sim.message_batches.cancel(request.params["id"], sim.clock.now())
    if batch is None:
        return _unknown(request)
    if batch.cancel_at is None:
        return anthropic.error(400, f"Message Batch {batch.id} has ended and cannot be canceled.")
    return Reply(200, batch.to_json(root(sim)))


def _unknown(request: Request) -> Reply:
    return anthropic.error(404, f"message_batch: {request.params['id']} not found")


ROUTES = {
    ("POST", "/v1/messages/batches"): create,
    ("GET", "/v1/messages/batches"): listing,
    ("GET", "/v1/messages/batches/{id}"): retrieve,
    ("GET", "/v1/messages/batches/{id}/results"): results,
    ("POST", "/v1/messages/batches/{id}/cancel"): cancel,
}
