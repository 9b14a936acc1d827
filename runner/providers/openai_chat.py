"""The ``openai-chat`` provider: ``POST {base_url}/chat/completions``.

Works with OpenAI and the servers that copy its API (vLLM, Ollama, llama.cpp
server, LiteLLM). One batch is one request under the batch protocol. Failures
are translated here, at the boundary, into runner's error tree; the engine
decides what to retry, so no request is ever retried behind its back.
"""

from __future__ import annotations

import email.utils
import functools
import json
import math
import re
from collections.abc import Mapping
from typing import Any, NamedTuple

import httpx

from .. import errors, protocol, usage
from ..jobs import Prompt, ProviderConfig
from . import Answer

#: Codes that mean money, not speed, at whatever status: waiting will not help.
BILLING_CODES = {
    "budget_exceeded",  # LiteLLM's spend limit (422; 400 in older releases, 429 if configured)
    "insufficient_quota",
    "credit_balance_exhausted",
    "billing_hard_limit_reached",
    "billing_not_active",
    "spend_limit_reached",
    "enforced_spend_limit_reached",
}

#: LiteLLM's 400 for a model it does not serve (OpenAI answers 404 ``model_not_found``).
INVALID_MODEL = "invalid model name passed in model="
#: Words of a refusal for a batch too long for the model's context: a smaller batch may pass.
TOO_LONG = ("context_length_exceeded", "contextwindowexceedederror", "maximum context length",
            "prompt is too long")  # the last: Anthropic's words
#: LiteLLM without its database knows only its master key and refuses any other with this type.
NO_DB = "no_db_connection"


class Upstream:
    """What every HTTP provider holds: the job's provider settings, prompt and schema, an httpx client, the key.

    A subclass says how its upstream takes the key (``auth``) and where paths start (``root``).
    """

    def __init__(
        self,
        config: ProviderConfig,
        prompt: Prompt,
        output_schema: dict[str, Any] | None,
        *,
        client: httpx.AsyncClient,
        api_key: str | None,
    ) -> None:
        self._config = config
        self._prompt = prompt
        self._output_schema = output_schema
        self._client = client
        #: Masked in every error message built here: upstreams echo keys, and messages are stored and shown.
        self._api_key = api_key
        #: Every request's headers: the key as the upstream wants it.
        self._headers = self.auth(api_key)
        #: What a request's path is put after.
        self._base = self.root(config.base_url)

    def auth(self, api_key: str | None) -> dict[str, str]:
        """The headers that carry the key (none without one)."""
        return {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def root(self, base_url: str) -> str:
        """The base URL as paths are put after it."""
        return base_url.rstrip("/")

    async def _request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        """One request to ``url`` (a path below the base, or a URL the upstream gave); a non-200 raised classified."""
        url = url if "://" in url else self._base + url
        try:
            response = await self._client.request(
                method, url, headers=self._headers, timeout=self._config.timeout, **kwargs)
        except httpx.TransportError as exc:
            raise transport_error(exc, f"{method} {url}", secret=self._api_key) from exc
        if response.status_code != 200:
            raise error_for(response, secret=self._api_key)
        return response


class OpenAIUpstream(Upstream):
    """What both OpenAI providers hold besides: the response format asked for."""

    @functools.cached_property
    def _response_format(self) -> dict[str, Any]:
        return protocol.batch_response_format(self._output_schema)

    @functools.cached_property
    def _json_headers(self) -> dict[str, str]:
        """A request's headers when its JSON body is encoded here (``protocol.encode``), once."""
        return {**self._headers, "Content-Type": "application/json"}


class OpenAIChat(OpenAIUpstream):
    """Calls an OpenAI-compatible chat completions endpoint, one batch per request."""

    async def call(self, items: protocol.BatchItems) -> Answer:
        """Send one batch in one request; every failure is raised classified, never retried here."""
        body = chat_body(self._config, self._prompt, self._response_format, items.array())
        url = self._base + "/chat/completions"
        try:
            response = await self._client.post(
                url, content=protocol.encode(body).encode(), headers=self._json_headers, timeout=self._config.timeout
            )
        except httpx.TransportError as exc:
            raise transport_error(exc, url, secret=self._api_key) from exc
        if response.status_code != 200:
            error = error_for(response, secret=self._api_key)
            if response.status_code == 404:
                error.stops_run = True  # the model or the endpoint is not there: no call can succeed
            raise error
        return answer_from(response)


#: Failures before the request was fully sent: nothing can have run upstream.
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.WriteError, httpx.WriteTimeout)


def transport_error(exc: httpx.TransportError, url: str, *, secret: str | None = None) -> errors.TransportError:
    """An httpx failure as a TransportError, saying whether the request may have run and been billed."""
    sent = not isinstance(exc, NOT_SENT)
    what = "timed out" if isinstance(exc, httpx.TimeoutException) else f"{type(exc).__name__}: {str(exc) or 'failed'}"
    suffix = " after the request was sent (it may have run and been billed)" if sent else ""
    return errors.TransportError(redact(f"{what}{suffix} ({url})", secret), maybe_billed=sent)


def chat_body(config: ProviderConfig, prompt: Prompt, response_format: dict[str, Any], items_json: str) -> dict[str, Any]:
    """The chat completions request for a batch whose items' JSON array is ``items_json``, under the batch protocol."""
    user = protocol.user_message(prompt.template, prompt.instructions, items_json)
    return {
        "model": config.model,
        "messages": [{"role": "system", "content": prompt.system}, {"role": "user", "content": user}],
        "response_format": response_format,
    }


def answer_from(response: httpx.Response) -> Answer:
    """The model's text from a 200 response; an unusable envelope is an empty answer."""
    try:
        return answer_of(response.json())
    except ValueError:
        return Answer(None, None)


def answer_of(body: Any) -> Answer:
    """The model's answer from a chat completion body (a response's, or a Batch API line's).

    A content sent as a list of parts is the text of its text parts; a
    content of any other shape is kept in ``raw`` with a ``problem``, never
    raised. An unusable envelope is an empty answer.
    """
    try:
        choice = body["choices"][0]
        content = choice["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return Answer(None, None)
    finish = choice.get("finish_reason")
    raw = content if isinstance(content, str) else _as_received(content)
    text, problem = _text_of(content)
    return Answer(text, finish if isinstance(finish, str) else None, raw=raw, problem=problem,
                  usage=usage.of_openai(body))


def _text_of(content: Any) -> tuple[str | None, str | None]:
    """The text to parse in a message's content, or None and why it is not text."""
    if content is None or isinstance(content, str):
        return content, None
    if isinstance(content, list):  # parts, as OpenAI-compatible servers may send; images or thinking are no answer
        return "".join(
            part["text"] for part in content
            if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)
        ), None
    return None, f"the answer's content is not text but {_as_received(content)[:100]}"


def _as_received(content: Any) -> str:
    """A content that is not text, as compact JSON; NaN and infinities (which JSON has no form for) as sent."""
    try:
        return protocol.encode(content)
    except ValueError:
        return json.dumps(content, ensure_ascii=False, separators=(",", ":"))


def error_for(response: httpx.Response, *, secret: str | None = None) -> errors.UpstreamError:
    """Classify a non-200 response into runner's error tree, ``secret`` (the job's key) masked."""
    try:
        body = response.json()
    except ValueError:
        body = {"error": {"message": response.text}}
    return classify(response.status_code, body, response.headers, secret=secret)


def classify(
    status: int, body: Any, headers: Mapping[str, str] | None = None, *, secret: str | None = None
) -> errors.UpstreamError:
    """Classify an HTTP status, its OpenAI-style error body and headers (a response, or a Batch API line).

    The message reads "status code: message", the status said once, with
    ``secret`` and anything that looks like a key masked (see ``redact``).
    """
    fields = _error_fields(body)
    message = _shortened(redact(fields.message, secret))  # masked first: a cut must not split a key
    label = _label(status, fields.codes)
    text = f"{status} {label}: {message}".rstrip(": ")
    if BILLING_CODES.intersection(fields.codes) or "credit balance is too low" in message.lower():
        return errors.BillingError(text)  # a proxy's spend limit comes as 400, 422 or 429: money, not speed
    if status == 429:
        return errors.RateLimited(text, retry_after=retry_after_seconds(headers or {}))
    if status in (408, 409) or status >= 500:
        return errors.TransportError(text, retry_after=retry_after_seconds(headers or {}))
    if (status == 404 and "model_not_found" in fields.codes) or (status == 400 and INVALID_MODEL in message.lower()):
        missing = errors.NotFound(text)
        missing.stops_run = True  # the job's model: every call would ask for it again
        return missing
    kinds: dict[int, type[errors.UpstreamError]] = {
        401: errors.AuthError,
        402: errors.BillingError,
        403: errors.PermissionDenied,
        404: errors.NotFound,
    }
    if status in kinds:
        return kinds[status](text)
    return _bad_request(f"{status} {label}: {errors.gist(message)}", fields, text)


def _bad_request(reason: str, fields: _Fields, text: str) -> errors.BadRequest:
    """A refusal as malformed, saying whether a smaller batch might pass and whether every call would fail."""
    about = " ".join([*fields.codes, fields.message]).lower()
    if any(words in about for words in TOO_LONG):
        return errors.BadRequest(text, reason=reason, splittable=True, too_long=True)
    if NO_DB in fields.codes:
        wrong_key = errors.BadRequest(f"{text} (a LiteLLM proxy without its database accepts only its master key)",
                                      reason=reason)
        wrong_key.stops_run = True
        return wrong_key
    # A parameter other than the messages is a setting of the job, sent alike in every batch.
    about_input = fields.param is None or fields.param.startswith("messages")
    return errors.BadRequest(text, reason=reason, splittable=about_input)


class _Fields(NamedTuple):
    """What an error body says: its codes (``code``, ``type``, ``details.error_code``), message and param."""

    codes: list[str]
    message: str
    param: str | None


def _error_fields(body: Any) -> _Fields:
    """The fields of an OpenAI-style error body (or Anthropic's); any other body is its own message."""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return _Fields([], str(body), None)
    details = error.get("details")
    found = [error.get("code"), error.get("type"), details.get("error_code") if isinstance(details, dict) else None]
    param = error.get("param")
    return _Fields([str(c) for c in found if _given(c)], str(error.get("message") or ""),
                   str(param) if _given(param) else None)


def _given(value: Any) -> bool:
    """Whether an error field was given: LiteLLM writes a missing one as "None"."""
    return value not in (None, "", "None")


def _label(status: int, codes: list[str]) -> str:
    """The first code that says more than the status (LiteLLM repeats it as ``code``), else its reason phrase."""
    return next((c for c in codes if c != str(status)), httpx.codes.get_reason_phrase(status))


#: Anything that looks like an OpenAI-style secret key (``sk-...``, ``sk-proj-...``), the job's or another.
KEY_LIKE = re.compile(r"\bsk-[A-Za-z0-9_-]{16,}")
#: A key shorter than this is not looked for in messages: it would mask ordinary words.
SHORTEST_SECRET = 8


def _shortened(text: str, most: int = 300) -> str:
    """At most ``most`` characters of an upstream's message, on one line."""
    text = " ".join(text.split())
    return text if len(text) <= most else text[: most - 1] + "…"


def redact(text: str, secret: str | None) -> str:
    """``text`` with the job's key ``secret``, and anything that looks like a key, masked.

    Upstreams and proxies echo keys in their messages; the messages are
    stored, shown and exported. A mask keeps the last 4 characters of a
    long key, so that a person can tell which key was refused.
    """
    if secret and len(secret) >= SHORTEST_SECRET:
        text = text.replace(secret, _masked(secret))
    return KEY_LIKE.sub(lambda found: _masked(found.group()), text)


def _masked(key: str) -> str:
    return f"[key ...{key[-4:]}]" if len(key) >= 16 else "[key]"


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """The wait a response asks for, in seconds, or None when it gives none that can be read.

    The first usable one of ``retry-after-ms``, ``retry-after`` (seconds or
    an HTTP date), then the same two as a LiteLLM proxy forwards them
    (``llm_provider-`` in front); a negative, infinite or unreadable value
    is skipped.
    """
    headers = httpx.Headers(headers)
    for prefix in ("", "llm_provider-"):
        millis = _number(headers.get(prefix + "retry-after-ms"))
        if millis is not None:
            return millis / 1000
        seconds = headers.get(prefix + "retry-after")
        wait = _number(seconds)
        if wait is None and seconds is not None:
            wait = _until(seconds, headers.get("date"))
        if wait is not None:
            return wait
    return None


def _number(value: str | None) -> float | None:
    """A header's value as a finite number not below zero, or None."""
    try:
        number = float(value) if value is not None else math.nan
    except ValueError:
        return None
    return number if math.isfinite(number) and number >= 0 else None


def _until(value: str, date: str | None) -> float | None:
    """Seconds from the response's ``Date`` (or now) to the HTTP date ``value``; a past one is 0."""
    try:
        when = email.utils.parsedate_to_datetime(value)
        sent = email.utils.parsedate_to_datetime(date) if date else None
    except (TypeError, ValueError, IndexError):
        return None
    now = sent.timestamp() if sent else email.utils.localtime().timestamp()
    return max(when.timestamp() - now, 0.0)
