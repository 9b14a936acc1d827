"""The simulator's charge ledger: what was asked, and what would be paid for.

Every chat completion request that carries a batch is recorded on arrival
(its ids, its size in characters, its model); every item of a request that
is answered with a 200 is billed once; every fault injected by the fault
plan is counted by name. Batch API lines answered with a 200 bill their
items when their batch ends (a cancelled batch's too, for the lines it ran
before the cancel: each cancel is recorded with the items it ran and those
it never ran), and uploads and created batches are counted,
as are the connections accepted (a client that keeps them alive opens few).
Tests read the ledger to prove that nothing was paid twice and that batches
kept their limits.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypedDict


class Call(TypedDict):
    """One recorded request: the item ids it carried, their size, its model."""

    ids: list[str]
    chars: int
    model: str


class Cancel(TypedDict):
    """A Batch API batch cancelled: the items of the lines it ran first (billed) and of those it never ran."""

    batch: str
    ran: list[str]
    not_run: list[str]


class Ledger:
    """Thread-safe counts of the requests a simulator received and billed.

    The attributes are written under a lock by the request threads; read a
    consistent view with :meth:`snapshot` while requests may be running.
    ``settle`` is called before each snapshot, outside the lock, so that
    work due by now (batches that the clock has ended) is billed first.
    """

    def __init__(self, *, settle: Callable[[], None] | None = None) -> None:
        self._lock = threading.Lock()
        self._settle = settle
        self.in_flight = 0
        self.reset()

    def reset(self) -> None:
        """Forget all history; requests in flight now stay counted as such."""
        with self._lock:
            self.requests = 0
            self.billed: dict[str, int] = {}
            self.max_in_flight = self.in_flight
            self.max_items_per_request = 0
            self.max_chars_per_request = 0
            self.calls: list[Call] = []
            self.faults: dict[str, int] = {}
            self.batches_created = 0
            self.files_uploaded = 0
            self.connections = 0
            self.cancels: list[Cancel] = []

    def record(self, ids: Sequence[str], chars: int, model: str) -> None:
        """Count one arriving request of ``ids`` totalling ``chars`` characters."""
        with self._lock:
            self.requests += 1
            self.max_items_per_request = max(self.max_items_per_request, len(ids))
            self.max_chars_per_request = max(self.max_chars_per_request, chars)
            self.calls.append({"ids": list(ids), "chars": chars, "model": model})

    @contextmanager
    def flight(self) -> Iterator[None]:
        """Count a request as in flight for the duration of the block."""
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            yield
        finally:
            with self._lock:
                self.in_flight -= 1

    def bill(self, ids: Iterable[str]) -> None:
        """Charge one billable request to each of ``ids``."""
        with self._lock:
            for key in ids:
                self.billed[key] = self.billed.get(key, 0) + 1

    def count_fault(self, name: str) -> None:
        """Count one request that the fault ``name`` was applied to."""
        with self._lock:
            self.faults[name] = self.faults.get(name, 0) + 1

    def count_upload(self) -> None:
        """Count one file uploaded to the Files API."""
        with self._lock:
            self.files_uploaded += 1

    def count_connection(self) -> None:
        """Count one connection accepted."""
        with self._lock:
            self.connections += 1

    def count_batch(self) -> None:
        """Count one batch created with the Batch API."""
        with self._lock:
            self.batches_created += 1

    def count_cancel(self, batch: str, ran: list[str], not_run: list[str]) -> None:
        """Record a cancelled batch as it ends: the items of the lines it ran (billed) and of those it never ran."""
        with self._lock:
            self.cancels.append({"batch": batch, "ran": list(ran), "not_run": list(not_run)})

    def snapshot(self) -> dict[str, Any]:
        """All counts as plain JSON-able data, copied under the lock."""
        if self._settle is not None:
            self._settle()
        with self._lock:
            return {
                "requests": self.requests,
                "billed": dict(self.billed),
                "in_flight": self.in_flight,
                "max_in_flight": self.max_in_flight,
                "max_items_per_request": self.max_items_per_request,
                "max_chars_per_request": self.max_chars_per_request,
                "calls": [{**call, "ids": list(call["ids"])} for call in self.calls],
                "faults": dict(self.faults),
                "batches_created": self.batches_created,
                "files_uploaded": self.files_uploaded,
                "connections": self.connections,
                "cancels": [{**cancel, "ran": list(cancel["ran"]), "not_run": list(cancel["not_run"])}
                            for cancel in self.cancels],
            }
