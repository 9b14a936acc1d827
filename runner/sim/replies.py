"""What the simulator receives and sends: requests, replies, OpenAI-style errors.

A route turns a :class:`Request` into a :class:`Reply`; the server's handler
sends it. Error faults of a fault plan become the error replies of
:func:`fault_error`, shaped like OpenAI's (see its error code table).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from email.message import Message
from email.utils import formatdate
from typing import Any

from runner.sim.faults import Fault


@dataclass(frozen=True)
class Request:
    """One HTTP request as a route sees it.

    ``query`` is the URL's query string; ``params`` are the parts of the
    path that the route's pattern names, such as ``{"id": "batch_1"}``.
    """

    method: str
    path: str
    headers: Message
    body: bytes
    query: str = ""
    params: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Reply:
    """What to send back: a status, a JSON payload, headers, the ids to bill.

    A ``bytes`` payload is sent as it is, with the Content-Type of
    ``headers``; any other payload as JSON. With ``drop`` the ids are billed
    and then the connection is closed with nothing sent, as when an upstream
    dies or a proxy cuts the line.
    """

    status: int
    payload: Any
    headers: Mapping[str, str] = field(default_factory=dict)
    bill: tuple[str, ...] = ()
    drop: bool = False


#: A connection closed with nothing sent and nothing billed.
DROPPED = Reply(0, None, drop=True)


def key_accepted(request: Request, api_key: str | None) -> bool:
    """Whether ``request`` carries ``Authorization: Bearer <api_key>`` (any, without a key)."""
    if api_key is None:
        return True
    scheme, _, key = (request.headers.get("Authorization") or "").partition(" ")
    return scheme == "Bearer" and key.strip() == api_key


def json_object(body: bytes) -> dict[str, Any] | None:
    """The JSON object in ``body``, or None when it is not one."""
    try:
        value = json.loads(body)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def error_reply(
    status: int,
    message: str,
    *,
    kind: str = "invalid_request_error",
    code: str | None = None,
    param: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Reply:
    """An OpenAI-style error: ``{"error": {"message", "type", "param", "code"}}``."""
    error = {"message": message, "type": kind, "param": param, "code": code}
    return Reply(status, {"error": error}, headers=dict(headers or {}))


#: The reply to a request without the simulator's API key.
UNAUTHORIZED = error_reply(401, "Incorrect API key provided.", code="invalid_api_key")


#: The error faults: status, error type, error code, message.
ERRORS: dict[str, tuple[int, str, str | None, str]] = {
    "http_400": (400, "invalid_request_error", None, "Invalid request (a simulated fault)."),
    "http_401": (401, "invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
    "http_402": (402, "billing_error", None, "Your credit balance is too low."),
    "http_403": (
        403,
        "permission_error",
        "unsupported_country_region_territory",
        "Country, region, or territory not supported.",
    ),
    "http_429": (429, "requests", "rate_limit_exceeded", "Rate limit reached for requests."),
    "insufficient_quota": (
        429,
        "insufficient_quota",
        "insufficient_quota",
        "You exceeded your current quota, please check your plan and billing details.",
    ),
    "http_500": (
        500,
        "server_error",
        None,
        "The server had an error while processing your request.",
    ),
    "http_503": (503, "server_error", "server_is_overloaded", "The server is overloaded."),
}


def fault_error(fault: Fault, *, now: float) -> Reply:
    """The error reply of an error fault; ``now`` dates a Retry-After date."""
    status, kind, code, message = ERRORS[fault.name]
    return error_reply(status, message, kind=kind, code=code, headers=_retry_headers(fault, now))


def _retry_headers(fault: Fault, now: float) -> dict[str, str]:
    headers: dict[str, str] = {}
    if "retry_after_ms" in fault.params:
        headers["retry-after-ms"] = str(fault.params["retry_after_ms"])
    if "retry_after" not in fault.params:
        return headers
    if fault.params.get("http_date"):
        # Date and Retry-After share one whole second, so that their
        # difference is exactly the wait, whichever clock a client trusts.
        second = int(now)
        headers["Date"] = formatdate(second, usegmt=True)
        headers["Retry-After"] = formatdate(second + fault.params["retry_after"], usegmt=True)
    else:
        headers["Retry-After"] = str(fault.params["retry_after"])
    return headers
