"""The ``anthropic-messages`` provider: Anthropic's Messages API, ``POST {base_url}/v1/messages``.

One batch is one request under the batch protocol: the same system prompt
and user message as ``openai-chat``. Anthropic has no ``response_format``;
the answer is asked for as a tool call instead (Anthropic's documented way to
get JSON of a given schema): one tool, ``batch_results``, whose input schema
is the batch protocol's ``{"results": [...]}`` (each result under the job's
output schema, if any), and ``tool_choice`` forcing it. The tool call's
input is the answer; a model that answers in text instead is read as text,
and validated like any other answer.

``base_url`` is the host, as the Anthropic SDK takes it
(``https://api.anthropic.com``); a ``/v1`` at its end is taken as said once.
Headers: ``x-api-key`` (the job's key) and ``anthropic-version``.

Errors come as ``{"type": "error", "error": {"type", "message"}}`` and are
classified by the same function as OpenAI's (:func:`.openai_chat.classify`,
which reads both shapes): 529 ``overloaded_error`` and 5xx transport; 429
``rate_limit_error`` with ``retry-after`` rate limited (with
``enforced_spend_limit_reached``: billing); 402 ``billing_error`` and a 400
"credit balance is too low" billing; 401 auth; 403 permission; 404 not found;
any other 400 a bad request.

The answer's ``usage`` (``input_tokens``, ``output_tokens``,
``cache_creation_input_tokens``, ``cache_read_input_tokens``) is in the
message body, kept as the answer's usage (:func:`runner.usage.of_anthropic`), the cached parts as input.
"""

from __future__ import annotations

import functools
from typing import Any

from .. import errors, protocol, usage
from . import Answer
from .openai_chat import Upstream

#: The API version sent in ``anthropic-version``: the one whose shapes the providers and the simulator follow.
API_VERSION = "2023-06-01"
TOOL = protocol.BATCH_SCHEMA_NAME
#: Anthropic's stop reasons, as the judge reads OpenAI's finish reasons.
FINISH = {"end_turn": "stop", "tool_use": "stop", "stop_sequence": "stop", "max_tokens": "length",
          "refusal": "content_filter"}


class AnthropicUpstream(Upstream):
    """What both Anthropic providers hold besides: the tool asked for; the key goes as ``x-api-key``."""

    def auth(self, api_key: str | None) -> dict[str, str]:
        return {"anthropic-version": API_VERSION, "content-type": "application/json",
                **({"x-api-key": api_key} if api_key else {})}

    def root(self, base_url: str) -> str:
        return host(base_url)

    @functools.cached_property
    def _tool(self) -> dict[str, Any]:
        return {
            "name": TOOL,
            "description": "Record the result of every record of the batch, each with the record's id.",
            "input_schema": protocol.batch_schema(self._output_schema),
        }

    def params(self, items_json: str) -> dict[str, Any]:
        """The Messages request for a batch whose items' JSON array is ``items_json``, under the batch protocol."""
        user = protocol.user_message(self._prompt.template, self._prompt.instructions, items_json)
        return {
            "model": self._config.model,
            "max_tokens": self._config.max_tokens,
            "system": self._prompt.system,
            "messages": [{"role": "user", "content": user}],
            "tools": [self._tool],
            "tool_choice": {"type": "tool", "name": TOOL},
        }


class AnthropicMessages(AnthropicUpstream):
    """Calls Anthropic's Messages API, one batch per request."""

    async def call(self, items: protocol.BatchItems) -> Answer:
        """Send one batch in one request; every failure is raised classified, never retried here."""
        body = protocol.encode(self.params(items.array())).encode()
        try:
            response = await self._request("POST", "/v1/messages", content=body)
        except errors.NotFound as exc:
            exc.stops_run = True  # the model or the endpoint is not there: no call can succeed
            raise
        try:
            return message_answer(response.json())
        except ValueError:
            return Answer(None, None)


def host(base_url: str) -> str:
    """The host part of an Anthropic ``base_url``: without a trailing slash or ``/v1`` (paths say ``/v1``)."""
    base = base_url.rstrip("/")
    return base.removesuffix("/v1")


def message_answer(body: Any) -> Answer:
    """The model's answer in a Messages body (a response's, or a Message Batches line's).

    The ``batch_results`` tool call's input, as JSON, when there is one; else
    the text blocks joined. An unusable envelope is an empty answer.
    """
    content = body.get("content") if isinstance(body, dict) else None
    if not isinstance(content, list):
        return Answer(None, None)
    used = usage.of_anthropic(body)
    stop = body.get("stop_reason")
    finish = FINISH.get(stop, stop) if isinstance(stop, str) else None
    for block in content:
        if isinstance(block, dict) and block.get("type") == "tool_use" and block.get("name") == TOOL:
            try:
                text = protocol.encode(block.get("input"))
            except ValueError:
                return Answer(None, finish, raw=str(block.get("input")), problem="the tool call's input is not JSON",
                              usage=used)
            return Answer(text, finish, raw=text, usage=used)
    text = "".join(block["text"] for block in content
                   if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str))
    return Answer(text, finish, raw=text, usage=used)
