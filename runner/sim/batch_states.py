"""Batch API rules as pure functions: input validation and the state machine.

A batch's life is a schedule fixed when it is created (:func:`schedule`):
``validating`` for the first tenth of the simulator's ``batch_seconds``,
then ``in_progress``, ``finalizing`` for the last tenth, and ``completed``;
or ``failed`` when validation ends, or ``expired`` at the 24 h deadline. A
cancel cuts the schedule short (:func:`entered`), keeping the lines that
ran before it (:func:`ran_before`). Nothing runs in the
background: a batch's state is computed from the clock whenever it is read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from runner.sim import chat
from runner.sim.faults import Fault

ENDPOINT = "/v1/chat/completions"
WINDOW = "24h"
WINDOW_SECONDS = 24 * 3600
VALIDATING_SHARE = 0.1
FINALIZING_SHARE = 0.1

#: The non-HTTP errors of lines that never ran, by the state that stopped them.
NOT_RUN = {
    "expired": (
        "batch_expired",
        "This request could not be executed before the completion window expired.",
    ),
    "cancelled": ("batch_cancelled", "This request was cancelled before it could be executed."),
}


class Status(StrEnum):
    """A batch's status, as OpenAI names it."""

    VALIDATING = "validating"
    FAILED = "failed"
    IN_PROGRESS = "in_progress"
    FINALIZING = "finalizing"
    COMPLETED = "completed"
    EXPIRED = "expired"
    CANCELLING = "cancelling"
    CANCELLED = "cancelled"


TERMINAL = frozenset({Status.FAILED, Status.COMPLETED, Status.EXPIRED, Status.CANCELLED})


@dataclass(frozen=True)
class Line:
    """One valid input line: its 1-based number, custom id, chat body and batch items."""

    number: int
    custom_id: str
    body: dict[str, Any]
    items: list[dict[str, Any]] | None

    @property
    def ids(self) -> list[str]:
        """The item ids the line's user message carries."""
        return [item["id"] for item in self.items or ()]


@dataclass(frozen=True)
class Input:
    """An input file read for a batch: its valid lines, and its errors."""

    lines: list[Line]
    errors: list[dict[str, Any]]

    @property
    def ids(self) -> list[str]:
        """The item ids of all valid lines, in file order."""
        return [key for line in self.lines for key in line.ids]


def batch_error(
    code: str, message: str, *, line: int | None = None, param: str | None = None
) -> dict[str, Any]:
    """One entry of a failed batch's ``errors.data``."""
    return {"code": code, "line": line, "message": message, "param": param}


def parse_input(content: bytes, endpoint: str) -> Input:
    """The lines of a JSONL input file, and an error for each line that is wrong.

    Blank lines are skipped; a file without lines is an ``empty_file`` error.
    """
    lines: list[Line] = []
    errors: list[dict[str, Any]] = []
    seen: set[str] = set()
    for number, raw in enumerate(content.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            value = json.loads(raw)
        except ValueError:
            value = None
        problem = _problem(value, endpoint, seen)
        if problem is not None:
            code, message, param = problem
            errors.append(batch_error(code, message, line=number, param=param))
            continue
        seen.add(value["custom_id"])
        lines.append(Line(number, value["custom_id"], value["body"], chat.items_of(value["body"])))
    if not lines and not errors:
        errors.append(batch_error("empty_file", "The batch input file is empty."))
    return Input(lines, errors)


def _problem(value: Any, endpoint: str, seen: set[str]) -> tuple[str, str, str | None] | None:
    """What is wrong with one parsed line: code, message, param; None when nothing."""
    if not isinstance(value, dict):
        return "invalid_json_line", "This line is not parseable as valid JSON.", None
    custom_id = value.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id:
        return "missing_required_parameter", "Missing required parameter: 'custom_id'.", "custom_id"
    if custom_id in seen:
        message = f"The custom_id {custom_id!r} is used more than once."
        return "duplicate_custom_id", message, "custom_id"
    if value.get("method") != "POST":
        return "invalid_method", "The method must be 'POST'.", "method"
    if value.get("url") != endpoint:
        message = f"The URL {value.get('url')!r} does not match the batch endpoint {endpoint!r}."
        return "url_mismatch", message, "url"
    if not chat.is_chat_body(value.get("body")):
        return "missing_required_parameter", chat.NOT_CHAT, "body"
    return None


def schedule(created: float, seconds: float, *, failed: bool, expires: bool) -> dict[Status, float]:
    """When a batch that nobody cancels enters each of its states, in order.

    ``seconds`` is how long a batch takes from creation to ``completed``; one
    that would take the whole 24 h window, or ``expires``, ends ``expired``
    at the deadline instead.
    """
    deadline = created + WINDOW_SECONDS
    validated = created + min(seconds, WINDOW_SECONDS) * VALIDATING_SHARE
    if failed:
        return {Status.VALIDATING: created, Status.FAILED: validated}
    if expires or seconds >= WINDOW_SECONDS:
        return {Status.VALIDATING: created, Status.IN_PROGRESS: validated, Status.EXPIRED: deadline}
    return {
        Status.VALIDATING: created,
        Status.IN_PROGRESS: validated,
        Status.FINALIZING: created + seconds * (1 - FINALIZING_SHARE),
        Status.COMPLETED: created + seconds,
    }


def entered(
    planned: Mapping[Status, float],
    now: float,
    *,
    cancelling_at: float | None = None,
    cancelled_at: float | None = None,
) -> dict[Status, float]:
    """The states a batch has entered by ``now``, with their times, in order.

    A state is entered once the clock is past its time; a cancel stops the
    schedule where it was, and is followed by ``cancelled`` once it is seen.
    """
    until = now if cancelling_at is None else min(now, cancelling_at)
    states = {
        status: at
        for status, at in planned.items()
        if status is Status.VALIDATING or at < until
    }
    if cancelling_at is not None:
        states[Status.CANCELLING] = cancelling_at
    if cancelled_at is not None:
        states[Status.CANCELLED] = cancelled_at
    return states


def current(states: Mapping[Status, float]) -> Status:
    """The state entered last."""
    return list(states)[-1]


def ran_before(planned: Mapping[Status, float], cancelling_at: float, count: int) -> int:
    """How many of a batch's ``count`` lines had run when it was cancelled, at ``cancelling_at``.

    The lines run in order at an even pace while the batch is ``in_progress``
    (OpenAI's cancel: the lines that finished are in the output, billed;
    the others are never run).
    """
    start = planned.get(Status.IN_PROGRESS)
    end = planned.get(Status.FINALIZING, planned.get(Status.EXPIRED))
    if start is None or end is None or cancelling_at <= start:
        return 0
    if cancelling_at >= end:
        return count
    return int(count * (cancelling_at - start) / (end - start))


def split(
    lines: Sequence[Line], status: Status, fault: Fault | None, *, ran: int = 0
) -> tuple[list[Line], list[Line]]:
    """The lines a batch that ended in ``status`` answered, and those it never ran.

    A line in neither list went missing: ``missing_rows`` drops the lines
    holding its targets, else the second half. A cancelled batch answered
    the first ``ran`` lines (:func:`ran_before`).
    """
    if status is Status.COMPLETED:
        missing = {line.number for line in _missing(lines, fault)}
        return [line for line in lines if line.number not in missing], []
    if status is Status.EXPIRED:
        half = max(1, len(lines) // 2)
        return list(lines[:half]), list(lines[half:])
    if status is Status.CANCELLED:
        return list(lines[:ran]), list(lines[ran:])
    return [], []


def _missing(lines: Sequence[Line], fault: Fault | None) -> list[Line]:
    if fault is None or fault.name != "missing_rows":
        return []
    if fault.targets:
        return [line for line in lines if set(line.ids).intersection(fault.targets)]
    return list(lines[len(lines) // 2 :])
