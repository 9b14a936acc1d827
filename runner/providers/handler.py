"""Python providers: a user's own async function, or submit/poll pair, with the same guarantees.

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
from typing import Any, TypeVar

from .. import protocol
from ..errors import BadRequest, TransportError, UpstreamError
from . import Answer, TaskResult

T = TypeVar("T")

Handler = Callable[[list[dict[str, Any]]], Awaitable[str | list[dict[str, Any]]]]


class PythonHandler:
    """Calls a user's async handler, one batch per call."""

    def __init__(self, handler: Handler) -> None:
        self._handler = handler
        #: The handler's qualified name, saved with the run for people to read.
        self.name = qualified_name(handler)

    async def call(self, items: protocol.BatchItems) -> Answer:
        answer = await _classified(self._handler(items.payloads()))
        if isinstance(answer, str):
            return Answer(answer)
        try:
            return Answer(protocol.encode({"results": answer}))
        except (TypeError, ValueError) as exc:
            raise _bug(f"the handler returned results that are not JSON: {exc}") from exc


Submit = Callable[[str, list[dict[str, Any]]], Awaitable[str]]
Poll = Callable[[str], Awaitable["list[dict[str, Any]] | None"]]
Find = Callable[[str], Awaitable["str | list[str] | None"]]
Cancel = Callable[[str], Awaitable[bool]]


class PythonTasks:
    """A user's own submit/poll pair (and optional find and cancel), with the Batch API's guarantees.

    ``submit(ref, payloads)`` starts a task and returns its id; the engine
    saves it before it polls. ``poll(task_id)`` returns None while the task
    runs, then its results (dicts with an ``"id"``); it raises ``NotFound``
    for a task its upstream no longer knows. ``find(ref)`` returns the task
    created for ``ref`` (or a list of every one, oldest first), if any: give
    it when a submit's answer can be lost (raise ``SubmitUnknown`` from
    ``submit`` then); without it, a lost submit is taken as never created.
    ``cancel(task_id)`` cancels a second task found for the same ``ref``
    (True if it did); without it, such a task is recorded as not cancelled.
    """

    def __init__(self, submit: Submit, poll: Poll, find: Find | None = None, cancel: Cancel | None = None) -> None:
        self._submit = submit
        self._poll = poll
        self._find = find
        self._cancel = cancel
        #: The pair's qualified names, saved with the run for people to read.
        self.name = ", ".join(qualified_name(f) for f in (submit, poll))

    async def upload(self, ref: str, items: protocol.BatchItems) -> Any:
        return items.payloads()  # the user's submit takes the payloads themselves

    async def create(self, ref: str, uploaded: Any) -> str:
        return await _classified(self._submit(ref, uploaded))

    async def find(self, ref: str) -> list[str]:
        found = await _classified(self._find(ref)) if self._find else None
        if found is None:
            return []
        return [found] if isinstance(found, str) else list(found)

    async def cancel(self, task_id: str) -> bool:
        return bool(await _classified(self._cancel(task_id))) if self._cancel else False

    async def poll(self, task_id: str) -> TaskResult | None:
        results = await _classified(self._poll(task_id))
        if results is None:
            return None
        answers: dict[str, Answer] = {}
        errors: dict[str, UpstreamError] = {}
        for result in results:
            if isinstance(result, dict):
                try:
                    answers[str(result["id"])] = Answer(protocol.encode({"results": [result]}))
                except (TypeError, ValueError) as exc:  # NaN, infinities, objects JSON has no form for
                    errors[str(result["id"])] = _bug(f"the poll returned a result that is not JSON: {exc}")
        return TaskResult(answers=answers, errors=errors)


def qualified_name(function: object) -> str:
    """``module.qualname`` of a function (of its type, for a callable object)."""
    named = function if hasattr(function, "__qualname__") else type(function)
    return f"{named.__module__}.{named.__qualname__}"


async def _classified(call: Awaitable[T]) -> T:
    """Await a handler's call, translating what it raises as ``PythonHandler`` does."""
    try:
        return await call
    except UpstreamError:
        raise
    except (TimeoutError, ConnectionError) as exc:
        raise TransportError(f"the handler raised {type(exc).__name__}: {exc}", maybe_billed=True) from exc
    except Exception as exc:
        raise _bug(f"the handler raised {type(exc).__name__}: {exc}") from exc


def _bug(message: str) -> BadRequest:
    """A handler's own failure: not the upstream's refusal, so whatever it called may have run."""
    bug = BadRequest(message)
    bug.refused = False
    return bug
