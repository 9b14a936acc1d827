"""Answers saved but not yet validated, settled with no call: a dead engine's received items, and reused results.

Both are ``received`` items whose output is in the store: a stopped engine's
(validated as the next one starts: triage's ``validate``), and those a claim
gave the results of the same work (``[cache] reuse``, :mod:`runner.reusing`):
a batch formed ``reused`` is never given a slot; the engine settles it as
soon as the claim that formed it returns, as any saved answer (judged, then
completed or sent on to its next stage), and a busy store puts that off to
its next turn.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import StoreBusy
from ..model import StartedItem
from ..rules.judge import judge_saved
from . import stages
from .slot import settlement_of

if TYPE_CHECKING:
    from .loop import Engine


def validate_received(engine: Engine) -> None:
    """Complete locally what a stopped worker received but did not validate (triage's ``validate``): no call.

    Each batch is taken first (``take_batch``): one worker alone validates it.
    """
    by_batch: dict[tuple[int, str], list[tuple[StartedItem, str | None]]] = {}
    for claim in engine.claims:
        for batch_id, output, item in engine.store.received_items(
            engine.run_id, max_attempts=engine.work(claim.stage).stage.retry.max_attempts, stage=claim.stage, left=True
        ):
            by_batch.setdefault((batch_id, claim.stage or ""), []).append((item, output))
    for (batch_id, stage_name), saved in by_batch.items():
        if engine.store.take_batch(batch_id, token=engine.token):
            _settle(engine, batch_id, stage_name, saved)


def settle_reused(engine: Engine) -> None:
    """Settle the batches of reused results formed so far, in order, until the store is busy."""
    while engine.reused:
        batch = engine.reused[0]
        try:
            saved = engine.store.received_items(
                engine.run_id, max_attempts=engine.work(batch.stage).stage.retry.max_attempts, batch=batch.id)
            _settle(engine, batch.id, batch.stage, [(item, output) for _, output, item in saved])
        except StoreBusy:
            return
        engine.reused.popleft()


def _settle(engine: Engine, batch_id: int, stage_name: str, saved: Sequence[tuple[StartedItem, str | None]]) -> None:
    """Judge a batch's saved outputs and settle it: completed, sent on, or tried again."""
    work = engine.work(stage_name)
    started, outputs = [item for item, _ in saved], {item.id: output for item, output in saved}
    verdict = judge_saved(started, outputs, check=work.check.problem, limits=work.stage.retry, now=engine.clock.now())
    results = {i: json.loads(output) for i, output in outputs.items() if output is not None}
    engine.save(batch_id, stages.boundary(engine.job, work, started, settlement_of(verdict), results))
