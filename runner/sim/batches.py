"""The files and batches of the simulator's Batch API, kept under one lock.

:class:`BatchStore` holds uploaded files, the batches made from them and the
output and error files they end with. A batch's state is computed from the
clock (:mod:`runner.sim.batch_states`) whenever the store is read; the first
read that finds a batch ended writes its files and bills its answered lines,
exactly once. Files and batches live as long as the simulator.
"""

from __future__ import annotations

import itertools
import json
import random
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from runner.sim import chat
from runner.sim.batch_states import (
    NOT_RUN,
    TERMINAL,
    WINDOW,
    WINDOW_SECONDS,
    Input,
    Line,
    Status,
    batch_error,
    current,
    entered,
    ran_before,
    schedule,
    split,
)
from runner.sim.faults import Fault
from runner.sim.replies import Reply, error_reply

FILE_RETENTION_SECONDS = 30 * 24 * 3600

#: The ``errors.data`` of a batch that the ``batch_failed`` fault fails.
FAILED_BY_FAULT = [
    batch_error(
        "token_limit_exceeded",
        "Enqueued token limit reached for this model (a simulated fault).",
    )
]

_TIMESTAMPS = {
    "in_progress_at": Status.IN_PROGRESS,
    "finalizing_at": Status.FINALIZING,
    "completed_at": Status.COMPLETED,
    "failed_at": Status.FAILED,
    "expired_at": Status.EXPIRED,
    "cancelling_at": Status.CANCELLING,
    "cancelled_at": Status.CANCELLED,
}


@dataclass(frozen=True)
class StoredFile:
    """One file of the Files API: an upload, or a batch's output or errors."""

    id: str
    filename: str
    purpose: str
    content: bytes
    created: float

    def to_json(self) -> dict[str, Any]:
        """The OpenAI file object."""
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.content),
            "created_at": int(self.created),
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
            "expires_at": int(self.created) + FILE_RETENTION_SECONDS,
        }


@dataclass
class Batch:
    """One batch: its request, its read input, its planned states, its fault, its end."""

    id: str
    input_file_id: str
    endpoint: str
    metadata: dict[str, str] | None
    created: float
    input: Input
    errors: list[dict[str, Any]]
    planned: dict[Status, float]
    fault: Fault | None
    cancelling_at: float | None = None
    cancelled_at: float | None = None
    #: Set when the batch has ended and its files are written.
    counts: dict[str, int] | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None

    @property
    def unknown(self) -> bool:
        """Whether the upstream forgot this batch (the ``batch_unknown`` fault)."""
        return self.fault is not None and self.fault.name == "batch_unknown"

    def states(self, now: float) -> dict[Status, float]:
        """The states entered by ``now``, with their times."""
        return entered(
            self.planned, now, cancelling_at=self.cancelling_at, cancelled_at=self.cancelled_at
        )

    def to_json(self, now: float) -> dict[str, Any]:
        """The OpenAI batch object as of ``now``."""
        states = self.states(now)
        status = current(states)
        errors = {"object": "list", "data": [dict(e) for e in self.errors]}
        timestamps = {
            name: int(states[state]) if state in states else None
            for name, state in _TIMESTAMPS.items()
        }
        return {
            "id": self.id,
            "object": "batch",
            "endpoint": self.endpoint,
            "errors": errors if status is Status.FAILED else None,
            "input_file_id": self.input_file_id,
            "completion_window": WINDOW,
            "status": status.value,
            "output_file_id": self.output_file_id,
            "error_file_id": self.error_file_id,
            "created_at": int(self.created),
            "expires_at": int(self.created + WINDOW_SECONDS),
            **timestamps,
            "request_counts": self._counts(status),
            "metadata": None if self.metadata is None else dict(self.metadata),
        }

    def _counts(self, status: Status) -> dict[str, int]:
        if self.counts is not None:
            return dict(self.counts)
        total = 0 if status is Status.VALIDATING else len(self.input.lines)
        return {"total": total, "completed": 0, "failed": 0}


class BatchStore:
    """Files and batches under one lock, settled against the clock on every read.

    ``seconds`` is how long a batch takes from creation to ``completed``;
    ``numbers`` numbers the chat completions that answer batch lines (shared
    with the chat route, so their ids never repeat); ``bill`` charges the
    items of an answered line; ``cancelled`` is told of each cancelled batch
    as it ends (its id, the items of the lines it ran before the cancel, and
    of those it never ran); ``seed`` seeds the shuffle of output lines.
    """

    def __init__(
        self,
        *,
        seconds: float,
        numbers: Callable[[], int],
        bill: Callable[[Iterable[str]], None],
        cancelled: Callable[[str, list[str], list[str]], None] = lambda batch, ran, not_run: None,
        seed: int = 0,
    ) -> None:
        self._seconds = seconds
        self._numbers = numbers
        self._bill = bill
        self._cancelled = cancelled
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._files: dict[str, StoredFile] = {}
        self._batches: dict[str, Batch] = {}
        self._file_numbers = itertools.count(1)
        self._batch_numbers = itertools.count(1)
        self._line_numbers = itertools.count(1)

    def add_file(self, filename: str, purpose: str, content: bytes, now: float) -> StoredFile:
        """Store a file and return it."""
        with self._lock:
            return self._add_file(filename, purpose, content, now)

    def file(self, file_id: str) -> StoredFile | None:
        """The file with this id, if it exists."""
        with self._lock:
            return self._files.get(file_id)

    def delete_file(self, file_id: str) -> bool:
        """Delete a file; False when there was none with this id."""
        with self._lock:
            return self._files.pop(file_id, None) is not None

    def create(
        self,
        *,
        input_file_id: str,
        endpoint: str,
        metadata: Mapping[str, str] | None,
        read: Input,
        fault: Fault | None,
        now: float,
    ) -> dict[str, Any]:
        """Create a batch over the ``read`` input file; its object as created."""
        errors = read.errors or (FAILED_BY_FAULT if fault and fault.name == "batch_failed" else [])
        expires = fault is not None and fault.name == "expire"
        planned = schedule(now, self._seconds, failed=bool(errors), expires=expires)
        with self._lock:
            self._settle(now)
            batch = Batch(
                f"batch_{next(self._batch_numbers)}",
                input_file_id,
                endpoint,
                None if metadata is None else dict(metadata),
                now,
                read,
                errors,
                planned,
                fault,
            )
            self._batches[batch.id] = batch
            return batch.to_json(now)

    def batch(self, batch_id: str, now: float) -> dict[str, Any] | None:
        """The batch's object as of ``now``; None for an unknown batch."""
        with self._lock:
            self._settle(now)
            batch = self._known(batch_id)
            return None if batch is None else batch.to_json(now)

    def page(
        self, now: float, *, limit: int, after: str | None = None
    ) -> tuple[list[dict[str, Any]], bool] | None:
        """Up to ``limit`` batches, newest first, created before ``after``; and whether more follow.

        None when ``after`` names no batch.
        """
        with self._lock:
            self._settle(now)
            newest = [b for b in reversed(self._batches.values()) if not b.unknown]
            if after is not None:
                order = {batch_id: n for n, batch_id in enumerate(self._batches)}
                if after not in order:
                    return None
                newest = [b for b in newest if order[b.id] < order[after]]
            return [b.to_json(now) for b in newest[:limit]], len(newest) > limit

    def timeline(self) -> dict[str, tuple[float, float]]:
        """Each batch's creation and the time it ends as planned (a cancel aside), by id, to time polls against."""
        with self._lock:
            return {b.id: (b.created, max(b.planned.values())) for b in self._batches.values()}

    def cancel(self, batch_id: str, now: float) -> dict[str, Any] | None:
        """Ask to cancel a batch that has not ended; its object after; None for an unknown batch."""
        with self._lock:
            self._settle(now)
            batch = self._known(batch_id)
            if batch is None:
                return None
            if batch.cancelling_at is None and current(batch.states(now)) not in TERMINAL:
                batch.cancelling_at = now
            return batch.to_json(now)

    def settle(self, now: float) -> None:
        """End the batches that have ended by ``now``: write their files, bill their lines."""
        with self._lock:
            self._settle(now)

    def _known(self, batch_id: str) -> Batch | None:
        batch = self._batches.get(batch_id)
        return None if batch is None or batch.unknown else batch

    def _add_file(self, filename: str, purpose: str, content: bytes, now: float) -> StoredFile:
        stored = StoredFile(f"file-{next(self._file_numbers)}", filename, purpose, content, now)
        self._files[stored.id] = stored
        return stored

    def _settle(self, now: float) -> None:
        for batch in self._batches.values():
            if batch.counts is not None or batch.unknown:
                continue
            if (
                batch.cancelling_at is not None
                and batch.cancelled_at is None
                and now > batch.cancelling_at
            ):
                batch.cancelled_at = now  # the first read after the cancel
            states = batch.states(now)
            status = current(states)
            if status in TERMINAL:
                self._finish(batch, status, states[status])

    def _finish(self, batch: Batch, status: Status, at: float) -> None:
        ran = 0 if batch.cancelling_at is None else ran_before(batch.planned, batch.cancelling_at, len(batch.input.lines))
        answered, not_run = split(batch.input.lines, status, batch.fault, ran=ran)
        output: list[dict[str, Any]] = []
        errors: list[dict[str, Any]] = []
        for line in answered:
            reply = _answer(line, self._numbers(), at)
            response = {
                "status_code": reply.status,
                "request_id": reply.headers["x-request-id"],
                "body": reply.payload,
            }
            (output if reply.status == 200 else errors).append(self._record(line, response, None))
            self._bill(reply.bill)
        if not_run:
            code, message = NOT_RUN[status]
            error = {"code": code, "message": message}
            errors += [self._record(line, None, error) for line in not_run]
        if status is Status.CANCELLED:
            self._cancelled(batch.id, [key for line in answered for key in line.ids],
                            [key for line in not_run for key in line.ids])
        total = 0 if status is Status.FAILED else len(batch.input.lines)
        batch.counts = {"total": total, "completed": len(output), "failed": len(errors)}
        batch.output_file_id = self._write(f"{batch.id}_output.jsonl", output, at)
        batch.error_file_id = self._write(f"{batch.id}_error.jsonl", errors, at)

    def _record(
        self, line: Line, response: dict[str, Any] | None, error: dict[str, str] | None
    ) -> dict[str, Any]:
        number = next(self._line_numbers)
        return {
            "id": f"batch_req_{number}",
            "custom_id": line.custom_id,
            "response": response,
            "error": error,
        }

    def _write(self, filename: str, records: list[dict[str, Any]], now: float) -> str | None:
        """Store the records as a shuffled JSONL output file; None when there are none."""
        if not records:
            return None
        self._rng.shuffle(records)
        content = "".join(json.dumps(record) + "\n" for record in records).encode()
        return self._add_file(filename, "batch_output", content, now).id


def _answer(line: Line, number: int, at: float) -> Reply:
    """What the chat route would answer the line's body at ``at``; only a 200 bills."""
    if line.items is None:
        return replace(error_reply(400, chat.NO_ITEMS), headers={"x-request-id": f"req_{number}"})
    return chat.completion(number, line.body, line.items, None, created=at)
