"""The ``anthropic-batch`` provider: Anthropic's Message Batches API, submit then poll.

One runner batch is one upstream batch: ``POST /v1/messages/batches`` with
one request per item (the Messages request of ``anthropic-messages`` for that
item alone), polled at ``GET /v1/messages/batches/{id}`` until its
``processing_status`` is ``ended``, its results read as JSONL from the
``results_url`` it then gives (in any order: joined on ``custom_id``).

A request's ``custom_id`` (at most 64 of ``A-Z a-z 0-9 _ -``) carries both
the batch's reference and the item: the first 12 characters are a digest of
the reference (``run:nonce:batch``), then ``-``, then the item key with
every character outside ``A-Z a-z 0-9 -`` written as ``_`` and its UTF-8
bytes in hex (``2024-03:p1`` is ``2024-03_3ap1``). A key too long for that
is refused before anything is sent.

Per line: ``succeeded`` is an answer (billed); ``errored`` is classified by
its error's type and marked not billed (Anthropic bills only succeeded
requests); ``canceled`` and ``expired`` were never run: sending them again
is charge-safe.

Anthropic keeps no metadata on a batch, and shows a batch's ``custom_id``\\s
only in its results, once it has ended. So a create whose answer was lost
is found again (``find``) by listing the batches and reading the first
result line of each ended one. A batch still in progress that this provider
neither made nor was told was kept (``kept``: the engine tells it each task
it keeps, after a restart too) cannot be told apart yet: while one is there
and none matched, ``find`` says it cannot tell (``TaskUnreachable``); the
engine looks again, and after eight tries holds the items for a person,
never sending them again on its own.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any, TypeVar

import httpx

from .. import batch_api, errors, protocol
from . import TaskResult, submitting
from .anthropic_messages import AnthropicUpstream, message_answer
from .openai_chat import classify, redact, transport_error

T = TypeVar("T")

KIND = "anthropic-batch"
#: The most bytes a create's body may have (256 MB), and requests a batch.
LIMITS = batch_api.KINDS[KIND]
#: Characters of a ``custom_id`` that carry the batch's reference.
TAG_CHARS = 12
CUSTOM_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
KEPT_AS_IS = re.compile(r"[A-Za-z0-9-]")
#: The HTTP status of each error type, for an ``errored`` line (which has none).
STATUS_OF = {"invalid_request_error": 400, "authentication_error": 401, "billing_error": 402,
             "permission_error": 403, "not_found_error": 404, "request_too_large": 413, "rate_limit_error": 429,
             "api_error": 500, "timeout_error": 504, "overloaded_error": 529}
#: How many batches a provider remembers (made, or read for their owner); the oldest are forgotten first.
KEPT = 10_000
#: How long the upstream keeps a batch's results after its creation (Anthropic: 29 days).
RESULTS_KEPT_SECONDS = 29 * 24 * 3600


def tag(ref: str) -> str:
    """The digest of a batch's reference that starts each of its requests' ``custom_id``."""
    return hashlib.blake2b(ref.encode(), digest_size=TAG_CHARS // 2).hexdigest()


def custom_id(ref_tag: str, key: str) -> str:
    """The ``custom_id`` of the item ``key`` in the batch whose reference's tag is ``ref_tag``."""
    escaped = "".join(c if KEPT_AS_IS.fullmatch(c) else "".join(f"_{b:02x}" for b in c.encode()) for c in key)
    return f"{ref_tag}-{escaped}"


def key_of(custom: str) -> str:
    """The item key of a ``custom_id`` made by :func:`custom_id`."""
    escaped = custom[TAG_CHARS + 1:]
    return re.sub(r"(?:_[0-9a-f]{2})+",
                  lambda m: bytes.fromhex(m[0].replace("_", "")).decode("utf-8", "replace"), escaped)


class AnthropicBatch(AnthropicUpstream):
    """Submits a batch to Anthropic's Message Batches API and polls it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: The batch made (or kept) for each reference, and when if known (on the upstream's clock): ``find`` reads
        #: back to then.
        self._made: dict[str, tuple[str, datetime | None]] = {}
        #: The reference tag of ended batches whose results were read (None: none could be read).
        self._owners: dict[str, str | None] = {}

    def request(self, ref_tag: str, text: str) -> dict[str, Any]:
        """The request of the item whose payload's JSON is ``text``."""
        return {"custom_id": custom_id(ref_tag, json.loads(text)["id"]), "params": self.params(f"[{text}]")}

    def sizing(self) -> batch_api.RequestsFile:
        """What each item's request takes of a create's body: the request of an empty item, and its characters'."""
        empty = protocol.encode(self.request(tag(""), protocol.encode({"id": ""})))
        return batch_api.RequestsFile(line_bytes=len(empty.encode()) + 1, file_bytes=LIMITS.file_bytes,
                                      api=f"the {LIMITS.api}", what="create's body")

    def body(self, ref: str, items: protocol.BatchItems) -> bytes:
        """The create's JSON body: one request per item. A key too long for a ``custom_id`` is refused, unsent."""
        ref_tag = tag(ref)
        requests = [self.request(ref_tag, text) for text in items.texts]
        for request in requests:
            if not CUSTOM_ID.fullmatch(request["custom_id"]):
                raise errors.BadRequest(
                    f"item {key_of(request['custom_id'])!r}: its key, written as a custom_id, would be "
                    f"{request['custom_id']!r}, over Anthropic's 64 characters: nothing was sent", splittable=True)
        return protocol.encode({"requests": requests}).encode()

    async def upload(self, ref: str, items: protocol.BatchItems) -> bytes:
        """The create's body (Message Batches upload nothing apart); one over the API's size is refused, unsent."""
        body = await asyncio.to_thread(self.body, ref, items)
        refused = self.sizing().refusal(len(body))
        if refused is not None:
            raise refused
        return body

    async def create(self, ref: str, uploaded: Any) -> str:
        """Create the batch; a create whose answer was lost is ``SubmitUnknown`` (:func:`.submitting.created`)."""
        batch = await submitting.created(
            lambda: self._json("POST", "/v1/messages/batches", content=uploaded), ref, timeout=self._config.timeout)
        _keep(self._made, ref, (str(batch["id"]), _when(batch)))
        return str(batch["id"])

    def results_expire(self, task_id: str) -> float | None:
        """Results are kept 29 days after the batch's creation, for a batch made here whose create said when."""
        made = next((when for made_id, when in self._made.values() if made_id == task_id), None)
        return None if made is None else made.timestamp() + RESULTS_KEPT_SECONDS

    def kept(self, ref: str, task_id: str) -> None:
        """The batch kept for ``ref`` (made here, adopted, or saved before a restart): ``find`` knows it as made."""
        if self._made.get(ref, ("", None))[0] != task_id:
            _keep(self._made, ref, (task_id, None))

    async def find(self, ref: str) -> list[str]:
        """Every batch whose requests carry ``ref``, oldest first (the list comes newest first).

        For a batch this provider made, the list is read back to a landing
        window (``timeout`` + ``create_margin``) before it (to its end for one
        kept after a restart), and a batch still in progress is taken as not
        a second one (it is asked again when the kept one ends). Otherwise
        (a lost create) the list is read to its end, and a batch still in
        progress that may be the one sought makes it "cannot tell yet".
        """
        made = self._made.get(ref)
        oldest = None if made is None or made[1] is None else made[1] - timedelta(
            seconds=self._config.timeout + self._config.create_margin + 1)
        mine = {task_id for task_id, _ in self._made.values()}
        found: list[str] = []
        unsure: list[str] = []
        after: dict[str, str] = {}
        while True:
            page = await self._json("GET", "/v1/messages/batches", params={"limit": 100, **after})
            data = [batch for batch in page.get("data") or [] if isinstance(batch, dict)]
            for batch in data:
                task_id = str(batch.get("id"))
                if made is not None and task_id == made[0]:
                    found.append(task_id)
                elif task_id in mine:
                    continue  # made for another reference
                elif batch.get("processing_status") != "ended":
                    unsure.append(task_id)
                elif await self._owner(task_id, batch.get("results_url")) == tag(ref):
                    found.append(task_id)
            last = data[-1] if data else None
            if not page.get("has_more") or last is None or _before(last, oldest):
                break
            after = {"after_id": str(last["id"])}
        if not found and unsure and made is None:
            raise errors.TaskUnreachable(
                f"cannot tell yet whether {', '.join(unsure[:3])}{' ...' if len(unsure) > 3 else ''} (in progress) "
                f"holds batch {ref}: Anthropic shows a batch's custom_ids only in its results, once it has ended")
        return found[::-1]

    async def cancel(self, task_id: str) -> bool:
        try:
            batch = await self._json("POST", f"/v1/messages/batches/{task_id}/cancel")
        except errors.UpstreamError:
            return False
        return batch.get("processing_status") == "canceling"

    async def poll(self, task_id: str) -> TaskResult | None:
        try:
            batch = await self._json("GET", f"/v1/messages/batches/{task_id}")
        except errors.NotFound as exc:
            raise submitting.forgotten(task_id) from exc
        if batch.get("processing_status") != "ended":
            return None
        result = TaskResult()
        for line in await self._results(batch.get("results_url")):
            _read_line(line, result, self._api_key)
        return result

    async def _results(self, url: Any) -> list[dict[str, Any]]:
        """A batch's result lines; none when it gives no results or they are no longer kept (items missing)."""
        if not isinstance(url, str) or not url:
            return []
        try:
            response = await self._request("GET", url)
        except errors.NotFound:
            return []
        try:
            lines = [json.loads(line) for line in response.text.splitlines() if line.strip()]
        except ValueError as exc:
            raise errors.TransportError(f"the results at {url} are not JSONL: {exc}") from exc
        return [line for line in lines if isinstance(line, dict)]

    async def _owner(self, task_id: str, url: Any) -> str | None:
        """The reference tag of an ended batch: its first result line's; None when it has none to read."""
        if task_id not in self._owners:
            owner = None
            if isinstance(url, str) and url:
                try:
                    async with self._client.stream("GET", url, headers=self._headers,
                                                   timeout=self._config.timeout) as response:
                        if response.status_code == 200:
                            owner = await _first_tag(response.aiter_lines())
                except httpx.TransportError as exc:
                    raise transport_error(exc, f"GET {url}", secret=self._api_key) from exc
            _keep(self._owners, task_id, owner)
        return self._owners[task_id]

    async def _json(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        return submitting.json_object(await self._request(method, path, **kwargs), f"{method} {path}")


async def _first_tag(lines: AsyncIterator[str]) -> str | None:
    """The reference tag of the first result line of a batch's results; None when it has none."""
    async for line in lines:
        if line.strip():
            try:
                custom = json.loads(line).get("custom_id")
            except (ValueError, AttributeError):
                return None
            return custom[:TAG_CHARS] if isinstance(custom, str) else None
    return None


def _keep(kept: dict[str, T], key: str, value: T) -> None:
    """Remember ``value`` under ``key``, forgetting the oldest past ``KEPT``."""
    kept[key] = value
    while len(kept) > KEPT:
        del kept[next(iter(kept))]


def _when(batch: dict[str, Any]) -> datetime | None:
    """When a batch was created (its RFC 3339 ``created_at``); None when it does not say."""
    try:
        return datetime.fromisoformat(str(batch.get("created_at")))
    except ValueError:
        return None


def _before(batch: dict[str, Any], oldest: datetime | None) -> bool:
    """Whether ``batch`` was created before ``oldest`` (False when either is unknown)."""
    created = _when(batch)
    return oldest is not None and created is not None and created < oldest


def _read_line(line: dict[str, Any], result: TaskResult, secret: str | None) -> None:
    """One result line: an answer (billed), or its item's error (none of them billed), ``secret`` masked."""
    custom = line.get("custom_id")
    outcome = line.get("result")
    if not isinstance(custom, str) or not isinstance(outcome, dict):
        return
    key = key_of(custom)
    kind = outcome.get("type")
    if kind == "succeeded":
        result.answers[key] = message_answer(outcome.get("message"))
    elif kind == "errored":
        body = outcome.get("error")
        error_type = (body.get("error") or {}).get("type") if isinstance(body, dict) else None
        error = classify(STATUS_OF.get(str(error_type), 500), body, secret=secret)
        error.refused = True  # an errored request is not billed: sending it again is charge-safe
        result.errors[key] = error
    else:
        result.errors[key] = submitting.not_run(redact(str(kind), secret))
