"""The ``openai-chat`` provider: ``POST {base_url}/chat/completions``.

Works with OpenAI and the servers that copy its API (vLLM, Ollama, llama.cpp
server, LiteLLM). One batch is one request under the batch protocol. Failures
are translated here, at the boundary, into runner's error tree; the engine
decides what to retry, so no request is ever retried behind its back.
"""

from __future__ import annotations

import email.utils
from typing import Any

import httpx

from .. import errors, protocol
from ..jobs import Prompt, ProviderConfig
from . import Answer

#: 429 codes that mean money, not speed: waiting will not help.
BILLING_CODES = {
    "insufficient_quota",
    "credit_balance_exhausted",
    "billing_hard_limit_reached",
    "billing_not_active",
    "spend_limit_reached",
    "enforced_spend_limit_reached",
}

class OpenAIUpstream:
    """What both OpenAI providers hold: the job's model and prompt, an httpx client and the key."""

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
        self._response_format = protocol.batch_response_format(output_schema)
        self._client = client
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._base = config.base_url.rstrip("/")


class OpenAIChat(OpenAIUpstream):
    """Calls an OpenAI-compatible chat completions endpoint, one batch per request."""

    async def call(self, payloads: list[dict[str, Any]]) -> Answer:
        """Send one batch in one request; every failure is raised classified, never retried here."""
        body = chat_body(self._config, self._prompt, self._response_format, payloads)
        url = self._base + "/chat/completions"
        try:
            response = await self._client.post(
                url, json=body, headers=self._headers, timeout=self._config.timeout
            )
        except httpx.TransportError as exc:
            raise transport_error(exc, url) from exc
        if response.status_code == 404:
            missing = error_for(response)
            missing.stops_run = True  # the model or endpoint is not there: no call can succeed
            raise missing
        if response.status_code != 200:
            raise error_for(response)
        return answer_from(response)


#: Failures before the request was fully sent: nothing can have run upstream.
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.WriteError, httpx.WriteTimeout)


def transport_error(exc: httpx.TransportError, url: str) -> errors.TransportError:
    """An httpx failure as a TransportError, saying whether the request may have run and been billed."""
    sent = not isinstance(exc, NOT_SENT)
    what = "timed out" if isinstance(exc, httpx.TimeoutException) else f"{type(exc).__name__}: {str(exc) or 'failed'}"
    suffix = " after the request was sent (it may have run and been billed)" if sent else ""
    return errors.TransportError(f"{what}{suffix} ({url})", maybe_billed=sent)


def chat_body(
    config: ProviderConfig, prompt: Prompt, response_format: dict[str, Any], payloads: list[dict[str, Any]]
) -> dict[str, Any]:
    """The chat completions request for a batch of item payloads, under the batch protocol."""
    user = protocol.user_message(prompt.template, prompt.instructions, payloads)
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
    raw = content if isinstance(content, str) else protocol.encode(content)
    text, problem = _text_of(content)
    return Answer(text, finish if isinstance(finish, str) else None, raw=raw, problem=problem)


def _text_of(content: Any) -> tuple[str | None, str | None]:
    """The text to parse in a message's content, or None and why it is not text."""
    if content is None or isinstance(content, str):
        return content, None
    if isinstance(content, list):  # parts, as OpenAI-compatible servers may send; images or thinking are no answer
        return "".join(
            part["text"] for part in content
            if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)
        ), None
    return None, f"the answer's content is not text but {protocol.encode(content)[:100]}"


def error_for(response: httpx.Response) -> errors.UpstreamError:
    """Classify a non-200 response into runner's error tree."""
    try:
        body = response.json()
    except ValueError:
        body = {"error": {"message": response.text[:200]}}
    return classify(response.status_code, body, retry_after_seconds(response.headers), response.reason_phrase)


def classify(status: int, body: Any, retry_after: float | None = None, reason: str = "") -> errors.UpstreamError:
    """Classify an HTTP status and OpenAI error body (a response, or a Batch API error line)."""
    codes, message = _error_fields(body)
    code = codes[0] if codes else None
    text = f"{status} {code or reason}: {message}".rstrip(": ")
    if status == 429:
        if BILLING_CODES.intersection(codes):
            return errors.BillingError(text)
        return errors.RateLimited(text, retry_after=retry_after)
    if status in (408, 409) or status >= 500:
        return errors.TransportError(text, retry_after=retry_after)
    kinds: dict[int, type[errors.UpstreamError]] = {
        401: errors.AuthError,
        402: errors.BillingError,
        403: errors.PermissionDenied,
        404: errors.NotFound,
    }
    if status == 400 and "credit balance" in message.lower():
        return errors.BillingError(text)
    return kinds.get(status, errors.BadRequest)(text)


def _error_fields(body: Any) -> tuple[list[str], str]:
    """The error's code and type (in that order, those present) and its message."""
    try:
        error = body["error"]
        codes = [str(error[f]) for f in ("code", "type") if error.get(f)]
        return codes, str(error.get("message") or "")
    except (KeyError, TypeError, AttributeError):
        return [], str(body)[:200]


def retry_after_seconds(headers: httpx.Headers) -> float | None:
    """``retry-after-ms``, or ``Retry-After`` in seconds or as an HTTP date."""
    if "retry-after-ms" in headers:
        try:
            return max(float(headers["retry-after-ms"]) / 1000, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
        date = email.utils.parsedate_to_datetime(headers["date"]) if "date" in headers else None
    except (TypeError, ValueError, IndexError):
        return None
    now = date.timestamp() if date else email.utils.localtime().timestamp()
    return max(when.timestamp() - now, 0.0)
