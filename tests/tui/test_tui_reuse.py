"""The TUI's run panel says how many results a run reused with no call (issue 19's unique work)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from support import make_job, posts

from runner import runs
from runner.job_queue import Cache
from runner.sim import Simulator
from runner.store import Store, views
from tui.run_panel import run_text


async def test_the_run_panel_says_how_many_results_were_reused_not_billed(tmp_path: Path, sim: Simulator) -> None:
    job = make_job(tmp_path, sim.base_url, posts(3))
    with Store(tmp_path / "runs.db") as store:
        await runs.execute(store, job)
        await runs.execute(store, dataclasses.replace(job, name="again", cache=Cache(reuse=True)))
        text = run_text(views.run_view(store, "again", now=1_800_000_000.0)).plain
    assert "reused 3, not billed" in text
