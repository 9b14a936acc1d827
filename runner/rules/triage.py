"""Triage: what recovery does with each item a stopped engine left, in the brief's order.

The first row that holds decides:

| what the stopped engine left                      | case          | what happens                                 |
|---------------------------------------------------|---------------|----------------------------------------------|
| the input's fingerprint changed                   | input_changed | not restored; failed, said so                |
| output saved (``received``)                       | validate      | validated and completed locally, no call     |
| never sent: no call intent, or a task's create    | pending       | back to pending: sending it cannot charge    |
| never sent                                        |               | twice                                        |
| sent, not confirmed by a person                   | hold          | held, shown as needing confirmation          |
| confirmed, its upstream task id saved             | poll          | that task polled, never resubmitted          |
| confirmed, a task's create sent, its id not saved | adopt         | looked for by its reference, then polled     |
| confirmed, a call whose answer was lost           | resubmit      | sent again, after the warning that this may  |
|                                                   |               | run and charge twice                         |

In a pipeline the triage is per stage: an item's case is that of its current
stage (its call, its answer, its hold), and the results of the stages it
passed are never touched by it; an input changed starts the item over at the
first stage, its results forgotten (``Store.add_items``).

Who writes each: ``Store.add_items`` fails changed inputs, ``Store.recover``
frees the unsent and holds the sent, the engine validates saved outputs,
``recovery.confirm`` releases held items to poll, adopt or resubmit, and
``TaskDriver.resume`` polls or adopts.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum


class Case(StrEnum):
    """What recovery does with one item, in the order the cases are tried."""

    INPUT_CHANGED = "input_changed"
    VALIDATE = "validate"
    PENDING = "pending"
    HOLD = "hold"
    POLL = "poll"
    ADOPT = "adopt"
    RESUBMIT = "resubmit"


@dataclass(frozen=True)
class Left:
    """What a stopped engine left of one item."""

    #: The item's input fingerprint changed since it was sent or answered.
    input_changed: bool = False
    #: Its output is saved (``received``), not yet validated.
    output_saved: bool = False
    #: Its call's intent (for a task, its create) was written: the upstream may have received it.
    sent: bool = False
    #: A person confirmed that it may be recovered.
    confirmed: bool = False
    #: Its batch's upstream task id is saved.
    task_id_saved: bool = False
    #: Its batch is a task whose create was sent: the task may exist though its id was not saved.
    create_sent: bool = False


def triage(left: Left) -> Case:
    """The case of one item, the first row of the module's table that holds."""
    if left.input_changed:
        return Case.INPUT_CHANGED
    if left.output_saved:
        return Case.VALIDATE
    if not left.sent:
        return Case.PENDING
    if not left.confirmed:
        return Case.HOLD
    if left.task_id_saved:
        return Case.POLL
    return Case.ADOPT if left.create_sent else Case.RESUBMIT


def on_confirm(left: Left) -> Case:
    """What confirming a held item does: poll, adopt or resubmit."""
    return triage(replace(left, confirmed=True))
