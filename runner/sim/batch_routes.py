"""The routes of OpenAI's Files and Batches APIs, over a :class:`BatchStore`.

Each route turns a :class:`Request` into a :class:`Reply`, like the chat
route; the files and batches themselves live in the simulator's
:class:`~runner.sim.batches.BatchStore`, and batch states follow its clock.
Upload and creation faults of the fault plan are applied here: most after
the file or batch was stored, as an upstream that did the work and lost the
answer; ``create_slow`` before the batch is made, ``create_twice`` by
making it twice.
"""

from __future__ import annotations

from collections.abc import Callable
from email.message import Message
from email.parser import BytesParser
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from runner.sim.batch_states import ENDPOINT, TERMINAL, WINDOW, Input, parse_input
from runner.sim.faults import DEFAULT_CREATE_SECONDS, Fault, Scope
from runner.sim.replies import DROPPED, Reply, Request, error_reply, json_object, named_error

if TYPE_CHECKING:
    from runner.sim.server import Simulator

Route = Callable[["Simulator", Request], Reply]

DEFAULT_LIMIT = 20
MAX_LIMIT = 100
MAX_METADATA = 16
MAX_METADATA_KEY = 64
MAX_METADATA_VALUE = 512


def upload_file(sim: Simulator, request: Request) -> Reply:
    """``POST /v1/files``: store a JSONL file of batch requests (multipart form)."""
    form = _form(request)
    if form is None:
        return error_reply(400, "the body must be multipart/form-data with 'purpose' and 'file'")
    if form.get("purpose") != (None, b"batch"):
        return error_reply(400, "'purpose' must be 'batch'", param="purpose")
    filename, content = form.get("file", (None, b""))
    if filename is None:
        return error_reply(400, "'file' must be an uploaded file", param="file")
    stored = sim.batches.add_file(filename, "batch", content, sim.clock.now())
    sim.ledger.count_upload()
    if sim.choose_fault(parse_input(content, ENDPOINT).ids, Scope.UPLOAD) is not None:
        return DROPPED  # upload_lost: stored, but the answer never leaves
    return Reply(200, stored.to_json())


def get_file(sim: Simulator, request: Request) -> Reply:
    """``GET /v1/files/{id}``: the file object."""
    stored = sim.batches.file(request.params["id"])
    return _no_file(request) if stored is None else Reply(200, stored.to_json())


def file_content(sim: Simulator, request: Request) -> Reply:
    """``GET /v1/files/{id}/content``: the file's bytes, as JSONL."""
    stored = sim.batches.file(request.params["id"])
    if stored is None:
        return _no_file(request)
    return Reply(200, stored.content, headers={"Content-Type": "application/jsonl"})


def delete_file(sim: Simulator, request: Request) -> Reply:
    """``DELETE /v1/files/{id}``: forget the file."""
    file_id = request.params["id"]
    if not sim.batches.delete_file(file_id):
        return _no_file(request)
    return Reply(200, {"id": file_id, "object": "file", "deleted": True})


def create_batch(sim: Simulator, request: Request) -> Reply:
    """``POST /v1/batches``: a batch over an uploaded file, ``validating``."""
    body = json_object(request.body)
    if body is None:
        return error_reply(400, "the body must be a JSON object")
    refused = _refused(body)
    if refused is not None:
        return refused
    stored = sim.batches.file(body["input_file_id"])
    if stored is None:
        message = f"No such File object: {body['input_file_id']}"
        return error_reply(404, message, code="not_found", param="input_file_id")
    if stored.purpose != "batch":
        return error_reply(400, f"{stored.id} is not a file for batches", param="input_file_id")
    read = parse_input(stored.content, ENDPOINT)
    return _made(sim, stored.id, body.get("metadata"), read)


def _made(sim: Simulator, file_id: str, metadata: dict[str, str] | None, read: Input) -> Reply:
    """Make the batch as the plan's fault (if any) says; the reply to its create."""
    fault = sim.choose_fault(read.ids, Scope.BATCH)
    name = None if fault is None else fault.name
    if (
        fault is not None
        and fault.name == "create_slow"
        and sim.wait(fault.params.get("seconds", DEFAULT_CREATE_SECONDS))
    ):
        return DROPPED  # stopped while waiting: the batch was never made
    batch = _create(sim, file_id, metadata, read, fault)
    if name == "create_twice":
        # A proxy's second try, whose answer the client gets.
        batch = _create(sim, file_id, metadata, read, fault)
    if name == "create_lost":
        return DROPPED
    if name == "create_500":
        return named_error("http_500")
    return Reply(200, batch)


def _create(
    sim: Simulator,
    input_file_id: str,
    metadata: dict[str, str] | None,
    read: Input,
    fault: Fault | None,
) -> dict[str, Any]:
    """Make one batch over a read input file, now; its object as created."""
    batch = sim.batches.create(
        input_file_id=input_file_id,
        endpoint=ENDPOINT,
        metadata=metadata,
        read=read,
        fault=fault,
        now=sim.clock.now(),
    )
    sim.ledger.count_batch()
    return batch


def get_batch(sim: Simulator, request: Request) -> Reply:
    """``GET /v1/batches/{id}``: the batch object as of the simulator's clock."""
    if sim.choose_fault([], Scope.POLL) is not None:
        return named_error("http_503")
    batch = sim.batches.batch(request.params["id"], sim.clock.now())
    return _no_batch(request) if batch is None else Reply(200, batch)


def list_batches(sim: Simulator, request: Request) -> Reply:
    """``GET /v1/batches?limit=&after=``: a page of batches, newest first."""
    if sim.choose_fault([], Scope.LIST) is not None:
        return named_error("http_503")
    query = parse_qs(request.query)
    limit_text = query.get("limit", [str(DEFAULT_LIMIT)])[-1]
    if not limit_text.isdigit() or not 1 <= int(limit_text) <= MAX_LIMIT:
        message = f"'limit' must be a whole number from 1 to {MAX_LIMIT}"
        return error_reply(400, message, param="limit")
    after = query.get("after", [None])[-1]
    page = sim.batches.page(sim.clock.now(), limit=int(limit_text), after=after)
    if page is None:
        return error_reply(400, f"No batch found with id '{after}' for 'after'", param="after")
    data, has_more = page
    return Reply(
        200,
        {
            "object": "list",
            "data": data,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
            "has_more": has_more,
        },
    )


def cancel_batch(sim: Simulator, request: Request) -> Reply:
    """``POST /v1/batches/{id}/cancel``: ``cancelling`` now, ``cancelled`` when next read."""
    batch = sim.batches.cancel(request.params["id"], sim.clock.now())
    if batch is None:
        return _no_batch(request)
    if batch["status"] in TERMINAL:
        return error_reply(409, f"Cannot cancel a batch with status '{batch['status']}'.")
    return Reply(200, batch)


#: The Files and Batches routes, by method and path pattern.
ROUTES: dict[tuple[str, str], Route] = {
    ("POST", "/v1/files"): upload_file,
    ("GET", "/v1/files/{id}"): get_file,
    ("GET", "/v1/files/{id}/content"): file_content,
    ("DELETE", "/v1/files/{id}"): delete_file,
    ("POST", "/v1/batches"): create_batch,
    ("GET", "/v1/batches"): list_batches,
    ("GET", "/v1/batches/{id}"): get_batch,
    ("POST", "/v1/batches/{id}/cancel"): cancel_batch,
}


def _form(request: Request) -> dict[str, tuple[str | None, bytes]] | None:
    """A multipart form's fields: name -> (filename, bytes); None when it is not one."""
    content_type = request.headers.get("Content-Type") or ""
    if not content_type.startswith("multipart/form-data"):
        return None
    head = f"Content-Type: {content_type}\r\n\r\n".encode()
    message = BytesParser().parsebytes(head + request.body)
    if not message.is_multipart():
        return None
    fields: dict[str, tuple[str | None, bytes]] = {}
    for part in message.get_payload():
        if isinstance(part, Message):
            name = part.get_param("name", header="content-disposition")
            payload = part.get_payload(decode=True)
            if isinstance(name, str) and isinstance(payload, bytes):
                fields[name] = (part.get_filename(), payload)
    return fields


def _refused(body: dict[str, Any]) -> Reply | None:
    """The 400 for a batch request that OpenAI would refuse; None when it is fine."""
    if not isinstance(body.get("input_file_id"), str):
        message = "Missing required parameter: 'input_file_id'."
        return error_reply(400, message, param="input_file_id")
    if body.get("endpoint") != ENDPOINT:
        return error_reply(400, f"'endpoint' must be '{ENDPOINT}'", param="endpoint")
    if body.get("completion_window") != WINDOW:
        message = f"'completion_window' must be '{WINDOW}'"
        return error_reply(400, message, param="completion_window")
    metadata = body.get("metadata")
    if metadata is not None and not _is_metadata(metadata):
        message = (
            f"'metadata' must be an object of at most {MAX_METADATA} string pairs, keys up to "
            f"{MAX_METADATA_KEY} characters, values up to {MAX_METADATA_VALUE}"
        )
        return error_reply(400, message, param="metadata")
    return None


def _is_metadata(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and len(value) <= MAX_METADATA
        and all(
            isinstance(v, str) and len(k) <= MAX_METADATA_KEY and len(v) <= MAX_METADATA_VALUE
            for k, v in value.items()
        )
    )


def _no_file(request: Request) -> Reply:
    message = f"No such File object: {request.params['id']}"
    return error_reply(404, message, code="not_found", param="id")


def _no_batch(request: Request) -> Reply:
    return error_reply(404, f"No batch found with id '{request.params['id']}'.", code="not_found")
