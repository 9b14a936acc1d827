"""What the simulator receives and sends: requests, replies, OpenAI-style errors.

A route turns a :class:`Request` into a :class:`Reply`; the server's handler
sends it. Error faults of a fault plan become the error replies of
:func:`fault_error`, shaped like OpenAI's (see its error code table).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from email.message import Message
from email.utils import formatdate
from typing import Any

from runner.sim.faults import HINT_HEADERS, Fault

#: The context window that a ``context_length`` fault says was exceeded.
CONTEXT_TOKENS = 128000


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


def bearer_key(request: Request) -> str | None:
    """The key of the request's ``Authorization: Bearer <key>`` header, if it has one."""
    scheme, _, key = (request.headers.get("Authorization") or "").partition(" ")
    return key.strip() if scheme == "Bearer" else None


def key_accepted(request: Request, api_key: str | None) -> bool:
    """Whether ``request`` carries ``Authorization: Bearer <api_key>`` (any, without a key)."""
    return api_key is None or bearer_key(request) == api_key


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


#: The error faults: status, error type, error code, message. A message may
#: name the request's ``{model}`` and the bearer ``{key}`` it was sent with.
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
    # Anthropic's: its API overloaded, and a balance spent (a 400, not a 402).
    "overloaded": (529, "overloaded_error", None, "Overloaded"),
    "credit_balance": (
        400,
        "invalid_request_error",
        None,
        "Your credit balance is too low to access the Anthropic API. "
        "Please go to Plans & Billing to upgrade or purchase credits.",
    ),
    # A LiteLLM proxy's spend limit: its code is the status, as a string.
    "budget_exceeded": (
        422,
        "budget_exceeded",
        "422",
        "Budget has been exceeded! Current cost: 1.2, Max budget: 1.0",
    ),
    # OpenAI's code, with the exception that a LiteLLM proxy names.
    "context_length": (
        400,
        "invalid_request_error",
        "context_length_exceeded",
        f"This model's maximum context length is {CONTEXT_TOKENS} tokens. However, your "
        "messages resulted in more tokens. Please reduce the length of the messages. "
        "(ContextWindowExceededError)",
    ),
    "invalid_model": (
        400,
        "invalid_request_error",
        "400",
        "/chat/completions: Invalid model name passed in model={model}. "
        "Call `/v1/models` to view available models for your key.",
    ),
    "model_not_found": (
        404,
        "invalid_request_error",
        "model_not_found",
        "The model `{model}` does not exist or you do not have access to it.",
    ),
    "echo_key": (
        401,
        "invalid_request_error",
        "invalid_api_key",
        "Incorrect API key provided: {key}. You can find your API key at "
        "https://platform.openai.com/account/api-keys.",
    ),
}

# An http_429 with no hint, as a LiteLLM proxy's mock rate limit answers.
_THROTTLED = (
    429,
    "throttling_error",
    "429",
    "litellm.RateLimitError: this is a mock rate limit error",
)

# The param an error names, where OpenAI names one.
_PARAMS = {"context_length": "messages", "invalid_model": "model"}


def named_error(name: str, *, model: str = "", key: str = "") -> Reply:
    """The error reply of :data:`ERRORS` ``name``, its message naming ``model`` and ``key``."""
    status, kind, code, message = ERRORS[name]
    text = message.format(model=model, key=key)
    return error_reply(status, text, kind=kind, code=code, param=_PARAMS.get(name))


def fault_error(fault: Fault, *, model: str, key: str, now: float) -> Reply:
    """The error reply of an error fault; ``now`` dates a Retry-After date."""
    if fault.params.get("header") == "none":
        status, kind, code, message = _THROTTLED
        return error_reply(status, message, kind=kind, code=code)
    reply = named_error(fault.name, model=model, key=key)
    return replace(reply, headers=_retry_headers(fault, now))


def _retry_headers(fault: Fault, now: float) -> dict[str, str]:
    header = fault.params.get("header", HINT_HEADERS[0])
    seconds, ms = fault.params.get("retry_after"), fault.params.get("retry_after_ms")
    if header == "retry-after-ms":
        # The plan's check made sure that one of the two is given.
        return {"retry-after-ms": str(ms if ms is not None else fault.params["retry_after"] * 1000)}
    if header == "llm_provider-retry-after":
        return {"llm_provider-retry-after": str(seconds)}
    headers = {} if ms is None else {"retry-after-ms": str(ms)}
    if seconds is None:
        return headers
    if fault.params.get("http_date"):
        # Date and Retry-After share one whole second, so that their
        # difference is exactly the wait, whichever clock a client trusts.
        second = int(now)
        headers["Date"] = formatdate(second, usegmt=True)
        headers["Retry-After"] = formatdate(second + seconds, usegmt=True)
    else:
        headers["Retry-After"] = str(seconds)
    return headers
