"""Queuety's compensation: a person's function called once per cancelled item, with its state, after the cancel.

A run defined in Python may take ``on_cancel`` (``Run(..., on_cancel=f)``):
``f(state)`` undoes, for one item a person cancelled, what its earlier
calls set going (a row reserved, a message queued). It is called after the
cancel is committed, for every item failed ``cancelled`` whose compensation
has not run since it was cancelled, whoever cancelled it (the notebook, the
TUI, ``runner cancel``): by ``run.cancel()`` at once, and when the run's
engine in this process ends (for items whose batch was in flight). An
exception in it is reported (logged, and in the returned report, by key),
never undoes the cancel, and does not stop the calls for the other items.

Once means at most once, per cancel, across processes. The items are
claimed before ``f`` is called: one transaction logs the command
``on_cancel`` with their keys, so two processes (``run.cancel()`` and the
run's engine ending, two kernels) never call it for the same item; the
command is ended (its ``done_at`` and outcome) after the last call. A
process that stops between the claim and its end (a crash, a kernel
restarted) leaves the items it had not called yet uncompensated for good,
and its command without an end in the log ("claimed, not yet ended"):
which of them ran cannot be known here, and calling again could undo
twice. A compensation that must happen whatever comes should be
idempotent, and run again by hand for such a claim's keys.

An item's state is its input fields as sent (its key under the job's
``key``); a run with stages adds each stage's result under its name.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from .rules import stages
from .store.sqlite import Store

log = logging.getLogger(__name__)

#: A person's compensation for one cancelled item, given its state.
OnCancel = Callable[[dict[str, Any]], object]


class Compensated(NamedTuple):
    """What a cancel did, and the compensations that followed: items failed now, items whose batch finishes first,
    the keys ``on_cancel`` was called for, and what it raised for some (key -> ``Type: message``)."""

    failed: int = 0
    finishing: int = 0
    called: tuple[str, ...] = ()
    errors: Mapping[str, str] = {}


def compensate(store: Store, name: str, key_field: str, on_cancel: OnCancel, *, now: float) -> Compensated:
    """Call ``on_cancel`` at most once for each cancelled item of run ``name`` not compensated since it was
    cancelled: the items are claimed first, in the store, so no other call (in this process or another) takes them."""
    command_id, due = store.claim_compensations(store.run_id(name), now=now)
    errors: dict[str, str] = {}
    for row in due:
        try:
            on_cancel(state_of(row, key_field))
        except Exception as exc:  # reported, never lost: the cancel stands, the other items are called
            log.exception("on_cancel raised for item %r of run %r", row["key"], name)
            errors[row["key"]] = f"{type(exc).__name__}: {exc}"
    if due:
        store.compensated(command_id, called=len(due), errors=len(errors), now=now)
    return Compensated(called=tuple(row["key"] for row in due), errors=errors)


def state_of(row: Mapping[str, Any], key_field: str) -> dict[str, Any]:
    """A cancelled item's state: its input fields as sent, its key under the job's ``key``, and the result of
    each stage it passed under the stage's name."""
    sent = json.loads(row["input"]) if row["input"] else {}
    fields = {field: value for field, value in sent.items() if field != "id"} if isinstance(sent, dict) else {}
    return stages.state_of({key_field: row["key"], **fields}, json.loads(row["results"] or "{}"))
