"""The notebook API takes ``reuse=`` (issue 19's unique work), and the panel says how many results were reused."""

from __future__ import annotations

from pathlib import Path

from support import posts

from runner.notebook import Run
from runner.sim import Simulator
from runner.widgets import RunPanel


async def test_a_run_defined_in_python_with_reuse_takes_the_results_of_the_same_work_with_no_call(
    tmp_path: Path, sim: Simulator
) -> None:
    records = posts(3)
    await Run("first", records, db=tmp_path / "runs.db", base_url=sim.base_url, model="sim-model").go()
    again = Run("again", records, db=tmp_path / "runs.db", base_url=sim.base_url, model="sim-model", reuse=True)
    assert again.job.cache.reuse
    outcome = await again.go()
    assert len(sim.ledger.snapshot()["calls"]) == 1
    assert outcome.status["reused"] == 3
    panel = RunPanel(tmp_path / "runs.db", "again", live=False)
    try:
        assert "reused 3, not billed" in panel.cost.value
    finally:
        panel.close()
