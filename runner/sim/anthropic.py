"""Anthropic's Messages API on the simulator: ``POST /v1/messages``, its errors and its answers.

A request carries the batch protocol's user message; the answer is a
``message`` whose content is the ``batch_results`` tool call (when the
request forces that tool, as ``anthropic-messages`` does) or a text block,
with ``usage`` in tokens (four characters to a token). Errors are shaped as
Anthropic's, ``{"type": "error", "error": {"type", "message"}}``, with a
``request-id`` header. The fault plan's chat faults apply, each said as
Anthropic says it (:data:`ERROR_TYPES`): ``http_429`` is a
``rate_limit_error`` with ``retry-after``, ``insufficient_quota`` the 429 of a
spend limit reached (``enforced_spend_limit_reached``, no ``retry-after``),
``http_402`` a ``billing_error``, ``credit_balance`` the 400 "credit balance
is too low", ``overloaded`` and ``http_503`` a 529 ``overloaded_error``, and
``http_500`` a 500 ``api_error``.
The Message Batches routes are in :mod:`runner.sim.anthropic_batches`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from runner import protocol
from runner.sim import answers, chat
from runner.sim.faults import Fault
from runner.sim.replies import DROPPED, ERRORS, Reply, Request, bearer_key, json_object

if TYPE_CHECKING:
    from runner.sim.server import Simulator

TOOL = protocol.BATCH_SCHEMA_NAME
VERSION_HEADER = "anthropic-version"
#: Anthropic's error type for each status the fault plan's errors answer with.
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 402: "billing_error",
               403: "permission_error", 404: "not_found_error", 413: "request_too_large", 422: "invalid_request_error",
               429: "rate_limit_error", 500: "api_error", 504: "timeout_error", 529: "overloaded_error"}
#: Faults Anthropic words its own way: status and message (its error type by the status). The others keep the
#: status, type and message of OpenAI's table (a LiteLLM proxy's ``budget_exceeded`` says so in front of any API).
WORDED: dict[str, tuple[int, str]] = {
    "http_500": (500, "Internal server error"),
    "http_401": (401, "invalid x-api-key"),
    "http_429": (429, "Number of request tokens has exceeded your per-minute rate limit (a simulated fault)."),
    "insufficient_quota": (429, "You have reached your specified API usage limits."),
    "http_503": (529, "Overloaded"),
    "context_length": (400, "prompt is too long: 210000 tokens > 200000 maximum"),
    "model_not_found": (404, "model: {model}"),
    "echo_key": (401, "invalid x-api-key: {key}"),
}


def error(status: int, message: str, *, kind: str | None = None, details: Mapping[str, str] | None = None,
          headers: Mapping[str, str] | None = None) -> Reply:
    """An Anthropic error reply: ``{"type": "error", "error": {"type", "message"}, "request_id"}``; its type
    ``kind``, else the status's."""
    body: dict[str, Any] = {"type": kind or ERROR_TYPES.get(status, "api_error"), "message": message}
    if details:
        body["details"] = dict(details)
    request_id = f"req_sim_{time.monotonic_ns()}"
    return Reply(status, {"type": "error", "error": body, "request_id": request_id},
                 headers={"request-id": request_id, **(headers or {})})


def fault_error(fault: Fault, *, model: str, key: str) -> Reply:
    """The error reply of an error fault, as Anthropic words it."""
    kind = None
    if fault.name in WORDED:
        status, message = WORDED[fault.name]
    else:
        status, kind, _, message = ERRORS[fault.name]
    text = message.format(model=model, key=key)
    if fault.name == "insufficient_quota":
        return error(status, text, details={"error_code": "enforced_spend_limit_reached"})
    seconds = fault.params.get("retry_after")
    return error(status, text, kind=kind, headers={} if seconds is None else {"retry-after": str(seconds)})


def key_accepted(request: Request, api_key: str | None) -> bool:
    """Whether ``request`` carries ``x-api-key: <api_key>`` (any, without a key).

    ``Authorization: Bearer <api_key>`` is taken too: the official SDK sends the key so since its 2.x releases.
    """
    return api_key is None or api_key in (request.headers.get("x-api-key"), bearer_key(request))


UNAUTHORIZED = error(401, "invalid x-api-key")


def refusal(request: Request, body: dict[str, Any] | None) -> Reply | None:
    """The 400 Anthropic gives a Messages request it cannot take; None when it is fine."""
    if not request.headers.get(VERSION_HEADER):
        return error(400, f"{VERSION_HEADER}: header is required")
    if body is None or not isinstance(body.get("model"), str) or not isinstance(body.get("messages"), list):
        return error(400, "the body needs a 'model' string and a 'messages' list")
    if not isinstance(body.get("max_tokens"), int) or isinstance(body.get("max_tokens"), bool):
        return error(400, "max_tokens: Field required")
    return None


def messages(sim: Simulator, request: Request) -> Reply:
    """``POST /v1/messages``: answer the batch in the last user message."""
    body = json_object(request.body)
    refused = refusal(request, body)
    if refused is not None:
        return refused
    assert body is not None
    items = chat.items_of(body)
    if items is None:
        return error(400, chat.NO_ITEMS)
    return sim.answer_batch(items, body["model"], lambda fault: _faulted(sim, fault, request, body, items))


def _faulted(sim: Simulator, fault: Fault | None, request: Request, body: dict[str, Any],
             items: list[dict[str, Any]]) -> Reply:
    """The reply to a well-formed Messages request, as ``fault`` (if any) makes it."""
    if fault is not None and (fault.name in ERRORS or fault.name in WORDED):
        return fault_error(fault, model=body["model"], key=request.headers.get("x-api-key") or bearer_key(request) or "")
    if fault is not None and fault.name == "drop":
        return DROPPED
    if fault is not None and fault.name == "timeout" and sim.wait(fault.params.get("seconds", 30.0)):
        return DROPPED
    reply = message(sim._next_number(), body, items, fault)
    return replace(reply, drop=fault is not None and fault.name == "billed_then_dropped")


def message(number: int, body: dict[str, Any], items: list[dict[str, Any]], fault: Fault | None) -> Reply:
    """The 200 answer to a well-formed batch request, billing all its items."""
    tool = _forced_tool(body)
    response_format = None if tool is None else {"type": "json_schema", "json_schema": {"schema": tool}}
    content, finish = answers.reply(items, response_format, fault)
    blocks = _blocks(content, tool is not None, number)
    stop = "max_tokens" if finish == "length" else "tool_use" if blocks[-1]["type"] == "tool_use" else "end_turn"
    sent = chat.text(body.get("system")) + "".join(chat.text(m.get("content")) for m in body["messages"]
                                                   if isinstance(m, dict))
    payload = {
        "id": f"msg_sim_{number}", "type": "message", "role": "assistant", "model": body["model"],
        "content": blocks, "stop_reason": stop, "stop_sequence": None,
        "usage": {"input_tokens": chat.tokens(len(sent)), "output_tokens": chat.tokens(len(chat.text(content))),
                  "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
    }
    return Reply(200, payload, headers={"request-id": f"req_sim_{number}"}, bill=tuple(item["id"] for item in items))


def _forced_tool(body: dict[str, Any]) -> dict[str, Any] | None:
    """The input schema of the ``batch_results`` tool, when the request forces it."""
    choice, tools = body.get("tool_choice"), body.get("tools")
    if not (isinstance(choice, dict) and choice.get("name") == TOOL and isinstance(tools, list)):
        return None
    schema = next((t.get("input_schema") for t in tools if isinstance(t, dict) and t.get("name") == TOOL), None)
    return schema if isinstance(schema, dict) else None


def _blocks(content: answers.Content, tool: bool, number: int) -> list[dict[str, Any]]:
    """The message's content blocks: the tool call when its input is a JSON object, else text."""
    if tool and isinstance(content, str):
        try:
            value = json.loads(content)
        except ValueError:
            value = None
        if isinstance(value, dict):
            return [{"type": "tool_use", "id": f"toolu_sim_{number}", "name": TOOL, "input": value}]
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [{"type": "text", "text": part["text"]} for part in content]


ROUTES = {("POST", "/v1/messages"): messages}
