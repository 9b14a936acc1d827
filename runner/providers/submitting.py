"""What every provider that submits a task shares: a create whose answer was lost, a task forgotten, a line not run.

Both the OpenAI Batch API (:mod:`.openai_batch`) and Anthropic's Message
Batches (:mod:`.anthropic_batch`) take a create that no idempotency key
guards: its answer may be lost after the task was made, so it is never sent
again here, only looked for (``TaskProvider.find``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from .. import errors
from .openai_chat import NOT_SENT


async def created(send: Callable[[], Awaitable[dict[str, Any]]], ref: str, *, timeout: float) -> dict[str, Any]:
    """The task ``send`` creates for ``ref``, within ``timeout`` in all (httpx's applies to each phase apart).

    Any failure but one before the request was sent is ``SubmitUnknown``: a
    proxy in front may have sent the create on before it failed (LiteLLM
    retries on its own), so the task is looked for, never created again.
    """
    try:
        async with asyncio.timeout(timeout):
            return await send()
    except TimeoutError as exc:
        raise errors.SubmitUnknown(f"the answer to creating batch {ref} was lost (none within {timeout:g} s)") from exc
    except errors.UpstreamError as exc:
        if isinstance(exc.__cause__, NOT_SENT):
            raise
        raise errors.SubmitUnknown(f"creating batch {ref} failed ({exc.message})", cause=exc) from exc


def forgotten(task_id: str) -> errors.NotFound:
    """A task the upstream no longer knows: it was known before, so it may have run; a person may send it anew."""
    lost = errors.NotFound(f"recovery failed: the upstream no longer knows batch {task_id}; "
                           "nothing was submitted again (retry to send the items anew)")
    lost.retryable = True
    lost.refused = False
    return lost


def not_run(why: str) -> errors.TransportError:
    """A request of a task that the upstream never ran (expired, cancelled): it cost nothing, it is sent again."""
    error = errors.TransportError(f"{why}: not run by the upstream, not billed")
    error.refused = True  # nothing ran: the try does not count against max_attempts
    return error


def json_object(response: httpx.Response, what: str) -> dict[str, Any]:
    """The JSON object a 200 answered; anything else is a ``TransportError`` naming ``what`` was asked."""
    try:
        body = response.json()
    except ValueError as exc:
        raise errors.TransportError(f"{what}: the answer is not JSON") from exc
    if not isinstance(body, dict):
        raise errors.TransportError(f"{what}: the answer is not a JSON object")
    return body
