"""Providers: how a batch reaches an upstream and how its answer comes back.

A provider that *calls* has one method, ``call(payloads) -> Answer``: one
request returns the result. It raises the classified ``UpstreamError``
subclasses of ``runner.errors`` for every failure, so that the engine treats
each kind the way it deserves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class Answer:
    """A billed answer from the upstream: the model's text, and how it ended."""

    content: str | None
    finish_reason: str | None = None


class Provider(Protocol):
    """Sends one batch of item payloads and returns the upstream's answer."""

    async def call(self, payloads: list[dict[str, Any]]) -> Answer: ...
