"""What a person is asked after a crash, and what confirming releases.

When an engine starts on a run that a dead engine left, items it had sent
(``running``, no output) may or may not have reached the upstream. They are
held, never re-sent on their own; each is shown with its case:

- ``poll``: the upstream task id was saved: confirming polls that task, no
  new task, no new charge; a task the upstream no longer knows fails the
  items (``not_found``), never replaced by a new one.
- ``adopt``: a task's create was sent but its id was not saved:
  confirming looks for it by its reference and polls it; if the upstream
  has none once a create sent then can no longer land (``lands_by``: the
  provider's timeout and ``create_margin`` after it was sent, saved then;
  the engine keeps looking until then), nothing was created and the items are
  sent again, which cannot charge twice.
- ``resubmit``: a call was made and its answer lost: confirming sends the
  items again, which may run and charge twice.

Items whose input changed are never restored (``input_changed``, see
``RunStore.prepare_run``), and saved outputs are completed locally with no call
(``Engine``); neither needs a person. The order of all these cases is
:func:`runner.rules.triage.triage`'s; a held item's case is what it says
confirming does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from .rules import triage
from .store.protocol import RunStore

class Case(StrEnum):
    """How a held item can be recovered, and what it may cost."""

    POLL = "poll"
    ADOPT = "adopt"
    RESUBMIT = "resubmit"

    @property
    def warning(self) -> str:
        return {
            Case.POLL: "polls the task already submitted: no new task, no new charge",
            Case.ADOPT: "looks for the task it may have created and polls it (no new charge); "
            "if there is none once a create sent then can no longer land, sends the items again, "
            "which cannot charge twice",
            Case.RESUBMIT: "sends the items again: the first call may have run, so this may run and charge twice",
        }[self]

    @property
    def may_charge_twice(self) -> bool:
        return self is Case.RESUBMIT


@dataclass(frozen=True)
class HeldItem:
    """An item held for a person's confirmation, and why."""

    key: str
    group: str
    case: Case
    task_id: str | None
    attempts: int
    paid_calls: int
    #: ``adopt``: until when the create whose answer was lost may still land upstream.
    lands_by: float | None = None


def held(store: RunStore, name: str) -> list[HeldItem]:
    """The items of a run that wait for a person, with their case."""
    return [
        HeldItem(r["key"], r["grp"], _case(r), r["upstream_id"], r["attempts"], r["paid_calls"],
                 r["lands_by"] if _case(r) is Case.ADOPT else None)
        for r in store.held_items(store.run_id(name))
    ]


def _case(row: dict[str, Any]) -> Case:
    """What confirming a held item does (a held task's create was sent, or its items would be pending)."""
    left = triage.Left(sent=True, task_id_saved=bool(row["upstream_id"]), create_sent=bool(row["submits"]))
    return Case(triage.on_confirm(left))


def confirm(store: RunStore, name: str, *, now: float, keys: Sequence[str] = ()) -> dict[Case, int]:
    """Release held items (all, or ``keys``) for the engine: poll, adopt, or send again.

    Returns how many of each case were released. One transaction.
    """
    polled, adopted, resent = store.confirm(store.run_id(name), keys=keys, now=now)
    return {Case.POLL: polled, Case.ADOPT: adopted, Case.RESUBMIT: resent}
