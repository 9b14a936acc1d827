"""The ``openai-batch`` provider: the OpenAI Batch API, submit then poll.

One runner batch is one upstream batch: a JSONL file with one request line
per item (``custom_id`` = the item key, the chat request under the batch
protocol for that item alone), uploaded to ``POST /files``, then
``POST /batches`` with the runner's own reference in ``metadata`` and in the
file name (two calls, so that the engine commits the moment of the create
between them). The engine saves the returned batch id before it polls
``GET /batches/{id}``, and reads the output and error files when it ends.

Nothing here retries a create: its answer may be lost after the batch was
made, so a failed create is *unknown* (``SubmitUnknown``) and is resolved by
``find``, which lists the upstream's batches for the one carrying the
reference, never by creating another. ``find`` returns every batch carrying
it, so that a second one (a proxy's own retry of the create) is cancelled.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import IO, Any

from .. import batch_api, errors, protocol
from . import TaskResult, submitting
from .openai_chat import OpenAIUpstream, answer_of, chat_body, classify, redact

ENDPOINT = "/v1/chat/completions"
METADATA_KEY = "runner_batch"
RUNNING = {"validating", "in_progress", "finalizing", "cancelling"}
#: Line error codes for requests the upstream never ran (and never billed).
NOT_RUN = {"batch_expired", "batch_cancelled"}
#: Requests files written and sent at once: 16 slots writing 200 MB each at once would fill the disk and the pipe.
SPOOLING = 2
#: How many of its newest batches' creation times a provider keeps for ``find`` (the oldest are forgotten first:
#: a forgotten one's list is read to its end, as after a restart). Far more than a run keeps in flight at once.
MADE_KEPT = 10_000
#: How long the upstream keeps a batch's output file by default (30 days from the file's creation, at the batch's
#: end: so no sooner than 30 days after the batch's creation, the lower bound ``results_expire`` gives).
OUTPUT_KEPT_SECONDS = 30 * 24 * 3600


class OpenAIBatch(OpenAIUpstream):
    """Submits a batch to the OpenAI Batch API and polls it."""

    def __init__(self, *args: Any, spool: Path | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: The folder the requests files are written to before they are sent (None: the system's temporary folder).
        self._spool = spool
        #: When the batch made for each reference was created, on the upstream's clock (``find`` reads back to it).
        self._made: dict[str, int] = {}
        #: When each batch made here was created (by batch id, the newest ``MADE_KEPT``): its results' expiry.
        self._created: dict[str, int] = {}
        #: Held while a requests file is written and uploaded (``SPOOLING`` at once).
        self._spooling = asyncio.Semaphore(SPOOLING)

    def line(self, key: str, text: str) -> bytes:
        """The request line of the item ``key`` whose payload's JSON is ``text``, its newline included."""
        body = chat_body(self._config, self._prompt, self._response_format, f"[{text}]")
        return (protocol.encode({"custom_id": key, "method": "POST", "url": ENDPOINT, "body": body}) + "\n").encode()

    def sizing(self) -> batch_api.RequestsFile:
        """What each item's line takes of a requests file: the line of an empty item, and its characters'."""
        return batch_api.RequestsFile(line_bytes=len(self.line("", protocol.encode({"id": ""}))))

    def write_requests(self, items: protocol.BatchItems, file: IO[bytes]) -> int:
        """Write the JSONL of one request per item to ``file``; its size in bytes."""
        return sum(file.write(self.line(json.loads(text)["id"], text)) for text in items.texts)

    async def upload(self, ref: str, items: protocol.BatchItems) -> str:
        """Upload the batch's requests file; its file id. One over the API's size is refused here, unsent.

        The file is written (off the event loop) to a temporary file in
        ``spool`` (the run store's folder; on Linux nameless, gone when
        closed, even after a crash) and sent from there in chunks: 16 batches
        in flight never hold their files, up to 200 MB each, in memory, and at
        most ``SPOOLING`` are written and sent at once. A folder that cannot
        take the file (full, read-only) is a ``SpoolError``: a store failure.
        """
        async with self._spooling:
            try:
                with tempfile.TemporaryFile(dir=self._spool) as file:
                    refused = self.sizing().refusal(await asyncio.to_thread(self.write_requests, items, file))
                    file.flush()  # httpx sends the size the file has on disk
                    if refused is not None:
                        raise refused
                    upload = await self._send(
                        "POST", "/files", data={"purpose": "batch"},
                        files={"file": (f"{ref.replace(':', '-')}.jsonl", file, "application/jsonl")},
                    )
            except OSError as exc:  # (httpx's own are translated in ``_request``)
                folder = self._spool or tempfile.gettempdir()
                raise errors.SpoolError(f"cannot write the requests file in {folder}: {exc.strerror or exc}") from exc
        return str(upload["id"])

    async def create(self, ref: str, uploaded: Any) -> str:
        """Create the batch; a create whose answer was lost is ``SubmitUnknown`` (:func:`.submitting.created`)."""
        body = {"input_file_id": uploaded, "endpoint": ENDPOINT, "completion_window": "24h",
                "metadata": {METADATA_KEY: ref}}
        created = await submitting.created(lambda: self._send("POST", "/batches", json=body), ref,
                                           timeout=self._config.timeout)
        if isinstance(created.get("created_at"), int):
            self._made[ref] = created["created_at"]
            self._created[str(created["id"])] = created["created_at"]
            for kept in (self._made, self._created):
                while len(kept) > MADE_KEPT:
                    del kept[next(iter(kept))]
        return str(created["id"])

    def results_expire(self, task_id: str) -> float | None:
        """When the output file of a batch made here may be gone, at the soonest; None for one made elsewhere."""
        created = self._created.get(task_id)
        return None if created is None else float(created + OUTPUT_KEPT_SECONDS)

    async def find(self, ref: str) -> list[str]:
        """Every batch whose metadata carries ``ref``, oldest first (the list comes newest first).

        For a batch this provider made, the list is read back only to the
        batches created a landing window (``timeout`` + ``create_margin``)
        before it: every create for ``ref`` was sent within that window of
        the one that made it. Otherwise (a lost create, after a restart) it is
        read to its end, however many batches the upstream keeps.
        """
        made = self._made.get(ref)
        oldest = None if made is None else made - self._config.timeout - self._config.create_margin - 1
        found: list[str] = []
        after: str | None = None
        while True:
            page = await self._send("GET", "/batches", params={"limit": 100, **({"after": after} if after else {})})
            data = page.get("data") or []
            found += [str(b["id"]) for b in data if (b.get("metadata") or {}).get(METADATA_KEY) == ref]
            if not page.get("has_more") or not data or _older(data[-1], oldest):
                return found[::-1]
            after = data[-1]["id"]

    async def cancel(self, task_id: str) -> bool:
        try:
            batch = await self._send("POST", f"/batches/{task_id}/cancel")
        except errors.UpstreamError:
            return False
        return batch.get("status") in ("cancelling", "cancelled")

    async def poll(self, task_id: str) -> TaskResult | None:
        try:
            batch = await self._send("GET", f"/batches/{task_id}")
        except errors.NotFound as exc:
            raise submitting.forgotten(task_id) from exc
        if batch["status"] in RUNNING:
            return None
        if batch["status"] == "failed":
            problems = (batch.get("errors") or {}).get("data", [])
            reasons = redact("; ".join(e.get("message", "") for e in problems), self._api_key) or "no reason given"
            if any(e.get("code") == "token_limit_exceeded" for e in problems):
                quota = errors.RateLimited(f"batch {task_id} was refused for the token quota, nothing ran: {reasons}")
                return TaskResult(failure=quota)
            return TaskResult(failure=errors.BadRequest(f"batch {task_id} failed validation: {reasons}"))
        result = TaskResult()
        for line in await self._lines(batch.get("output_file_id")) + await self._lines(batch.get("error_file_id")):
            _read_line(line, result, self._api_key)
        return result

    async def _lines(self, file_id: str | None) -> list[dict[str, Any]]:
        """A result file's lines; one the upstream no longer keeps has none (its items show as missing)."""
        if not file_id:
            return []
        try:
            response = await self._request("GET", f"/files/{file_id}/content")
        except errors.NotFound:
            return []
        try:
            return [json.loads(line) for line in response.text.splitlines() if line.strip()]
        except ValueError as exc:
            raise errors.TransportError(f"file {file_id} is not JSONL: {exc}") from exc

    async def _send(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        return submitting.json_object(await self._request(method, path, **kwargs), f"{method} {path}")


def _older(batch: dict[str, Any], oldest: float | None) -> bool:
    """Whether ``batch`` was created before ``oldest`` (False when either is unknown)."""
    created = batch.get("created_at")
    return oldest is not None and isinstance(created, int | float) and created < oldest


def _read_line(line: dict[str, Any], result: TaskResult, secret: str | None) -> None:
    """One output or error line: an answer (billed) or a classified error for its item, ``secret`` masked."""
    key = str(line.get("custom_id"))
    response = line.get("response") or {}
    error = line.get("error")
    if response.get("status_code") == 200:
        result.answers[key] = answer_of(response.get("body"))
    elif error and error.get("code") in NOT_RUN:
        result.errors[key] = submitting.not_run(error["code"])
    elif response:
        result.errors[key] = classify(int(response.get("status_code") or 0), response.get("body"), secret=secret)
    else:
        result.errors[key] = errors.TransportError(redact(f"line error: {error}", secret))
