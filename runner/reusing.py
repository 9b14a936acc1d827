"""Unique work across runs (issue 19, ``[cache] reuse``): the work a result answers, and a found result checked.

A stage's *work* for an item is a hash of the stage's fingerprint (its model,
or a python stage's handler label, its prompt and schema, the job's version:
``Stage.fingerprint``) and the item exactly as the stage sends it (its key
and fields; in a pipeline, the fields of its state the stage picks, earlier
stages' results among them). Every validated result is saved with its work
(``Settlement.works``), whether or not its stage reuses.

A stage with ``[cache] reuse = true`` looks each item up by its work as a
batch is formed (the store's claim), before any call: a result of the same
work saved in any run of the store (this one too) that passes the stage's
check now (its output schema and the Python ``check``, if any) is the item's
answer, received with no call and not billed (the item's ``reused``, the
ledger's per stage); the engine then completes it, or sends it on to its next
stage, as any saved answer (:func:`runner.engine.saved.settle_reused`). A changed prompt,
model, schema, version or input is another work: it is sent.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import protocol
from .rules.stages import sent_fields, state_of
from .validation import ResultCheck

if TYPE_CHECKING:
    from .jobs import Job, Stage


def sent(job: Job, stage: Stage, key: str, item_input: str, results: str) -> str:
    """One item as ``stage`` sends it (compact JSON): as stored, or, in a pipeline, the stage's fields of its state."""
    if not job.staged:
        return item_input
    record, passed = json.loads(item_input), json.loads(results)
    return protocol.encode(protocol.item_payload(key, sent_fields(stage.prompt.fields, state_of(record, passed),
                                                                  passed)))


def work(fingerprint: str, item_sent: str) -> str:
    """The work of one item at a stage: 128 bits of a hash of the stage's fingerprint and the item as sent."""
    return hashlib.sha256(f"{fingerprint}\n{item_sent}".encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Reuse:
    """What a claim of one reusing stage asks of each item in line: its work, and whether a found result stands."""

    job: Job
    stage: Stage
    fingerprint: str
    check: ResultCheck

    def work(self, key: str, item_input: str, results: str) -> str:
        return work(self.fingerprint, sent(self.job, self.stage, key, item_input, results))

    def accepts(self, result: str) -> bool:
        """Whether a saved result (JSON text) passes the stage's check now."""
        try:
            value = json.loads(result)
        except ValueError:
            return False
        return self.check.problem(value) is None
