"""What a dead engine received but did not validate, completed locally as the run starts (triage's ``validate``).

No call: each saved output is judged (:func:`runner.rules.judge.judge_saved`)
with its stage's check and limits, and its batch saved as any other.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ..model import StartedItem
from ..rules.judge import judge_saved
from . import stages
from .slot import settlement_of

if TYPE_CHECKING:
    from .loop import Engine


def validate_received(engine: Engine) -> None:
    """Judge and save the items of the run that a dead engine left ``received``, batch by batch."""
    by_batch: dict[tuple[int, str], list[tuple[StartedItem, str | None]]] = {}
    for claim in engine.claims:
        for batch_id, output, item in engine.store.received_items(
            engine.run_id, max_attempts=engine.work(claim.stage).stage.retry.max_attempts, stage=claim.stage
        ):
            by_batch.setdefault((batch_id, claim.stage or ""), []).append((item, output))
    for (batch_id, stage_name), saved in by_batch.items():
        work = engine.work(stage_name)
        started, outputs = [item for item, _ in saved], {item.id: output for item, output in saved}
        verdict = judge_saved(started, outputs, check=work.check.problem, limits=work.stage.retry,
                              now=engine.clock.now())
        results = {i: json.loads(output) for i, output in outputs.items() if output is not None}
        engine.save(batch_id, stages.boundary(engine.job, work, started, settlement_of(verdict), results))
