"""The ``python`` provider: a user's own async function, with the same guarantees as HTTP ones.

The handler receives a batch's item payloads (each with its ``"id"``) and
returns either the model's raw answer (a string under the batch protocol) or
the results themselves (a list of dicts, each with its ``"id"``). It
classifies its own failures by raising the ``UpstreamError`` subclasses of
:mod:`runner.errors` (``TransportError``, ``RateLimited``, ``AuthError``...).
``TimeoutError`` and ``ConnectionError`` count as transport trouble (which
may have been billed). Any other exception is a bug in the handler, not the
upstream's: its items fail as ``bad_request`` with the exception named, and
are not retried.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from .. import protocol
from ..errors import BadRequest, TransportError, UpstreamError
from . import Answer

Handler = Callable[[list[dict[str, Any]]], Awaitable[str | list[dict[str, Any]]]]


class PythonHandler:
    """Calls a user's async handler, one batch per call."""

    def __init__(self, handler: Handler) -> None:
        self._handler = handler

    async def call(self, payloads: list[dict[str, Any]]) -> Answer:
        try:
            answer = await self._handler(payloads)
        except UpstreamError:
            raise
        except (TimeoutError, ConnectionError) as exc:
            raise TransportError(f"the handler raised {type(exc).__name__}: {exc}", maybe_billed=True) from exc
        except Exception as exc:
            raise BadRequest(f"the handler raised {type(exc).__name__}: {exc}") from exc
        if isinstance(answer, str):
            return Answer(answer)
        try:
            return Answer(protocol.encode({"results": answer}))
        except (TypeError, ValueError) as exc:
            raise BadRequest(f"the handler returned results that are not JSON: {exc}") from exc
