"""Providers: how a batch reaches an upstream and how its answer comes back.

A provider gets a batch's items as the store keeps them
(:class:`runner.protocol.BatchItems`). One that *calls* has one method,
``call(items) -> Answer``: one
request returns the result. A provider that *submits and polls* gets a task
id first and the result later, so the engine can save the id in between
(``TaskProvider``). Both raise the classified ``UpstreamError`` subclasses
of ``runner.errors`` for every failure, so that the engine treats each kind
the way it deserves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..batch_api import RequestsFile
from ..errors import UpstreamError
from ..protocol import BatchItems
from ..usage import Usage


@dataclass(frozen=True)
class Answer:
    """A billed answer from the upstream: the text to parse, how it ended, and what exactly came back."""

    #: The model's text to parse under the batch protocol (text parts joined); None when it has none.
    content: str | None
    finish_reason: str | None = None
    #: The content exactly as received, JSON-encoded when it was not a string; ``content`` when not given.
    raw: str = ""
    #: Why the content is not text (a JSON object, a number...), when it is not: the answer is invalid.
    problem: str | None = None
    #: The tokens the call used, as the upstream reported them; None when it did not (its cost is unknown).
    usage: Usage | None = None

    def __post_init__(self) -> None:
        if not self.raw and self.content:  # a handler's answer is text as received
            object.__setattr__(self, "raw", self.content)


@runtime_checkable
class Provider(Protocol):
    """Sends one batch of items and returns the upstream's answer."""

    async def call(self, items: BatchItems) -> Answer: ...


@dataclass(frozen=True)
class TaskResult:
    """A finished upstream task, item by item: answers (billed), errors, and what it never ran."""

    answers: dict[str, Answer] = field(default_factory=dict)
    errors: dict[str, UpstreamError] = field(default_factory=dict)
    #: The task as a whole ended without running (refused at validation, say).
    failure: UpstreamError | None = None


@runtime_checkable
class TaskProvider(Protocol):
    """Submits a batch as an upstream task, finds it again by its reference, and polls it.

    Submitting is two calls, so that the engine can commit the moment the
    create is sent between them: ``upload`` puts the batch's input where the
    upstream can read it (nothing runs, nothing is billed), ``create`` starts
    the task (from then on the upstream may bill it).
    """

    async def upload(self, ref: str, items: BatchItems) -> Any:
        """Put the input of the task for ``ref`` upstream; what ``create`` needs of it."""
        ...

    async def create(self, ref: str, uploaded: Any) -> str:
        """Create the task for ``ref``; its id. Raises ``SubmitUnknown`` when the answer was lost."""
        ...

    async def find(self, ref: str) -> list[str]:
        """The ids of every task the upstream has for ``ref``, oldest first (a create sent twice makes two)."""
        ...

    async def cancel(self, task_id: str) -> bool:
        """Ask the upstream to cancel a task; whether it accepted (lines already run stay billed)."""
        ...

    async def poll(self, task_id: str) -> TaskResult | None:
        """None while the task runs; its result when it ended. ``NotFound`` if unknown."""
        ...


@runtime_checkable
class SizedTasks(Protocol):
    """A task provider whose upload is a file of bounded size (the Batch API's requests file): batches are formed
    to fit it. Optional beside ``TaskProvider``; a provider that wraps another keeps it by passing ``sizing`` on."""

    def sizing(self) -> RequestsFile | None:
        """What each item's line takes of the file, and the file's bound; None when batches need not fit one."""
        ...


@runtime_checkable
class KeepsTasks(Protocol):
    """A task provider told which task was kept for each reference (made, adopted, or saved before a restart).

    Optional beside ``TaskProvider``: ``find`` can then tell that task from the others, when the upstream shows
    no reference on a task still running (Anthropic's Message Batches).
    """

    def kept(self, ref: str, task_id: str) -> None:
        """The task ``task_id`` is the one kept for ``ref``."""
        ...


@runtime_checkable
class ExpiringTasks(Protocol):
    """A task provider that knows, from a task's create, when the upstream drops its results.

    Optional beside ``TaskProvider``: the engine saves the time with the task id, so that ``runner status``
    warns about results not fetched that will soon be gone (:mod:`runner.store.expiry`).
    """

    def results_expire(self, task_id: str) -> float | None:
        """When the results of ``task_id``, a task this provider created, may no longer be fetched (Unix seconds;
        a lower bound); None when it does not know."""
        ...
