"""The notebook panel over a pipeline: a row per stage with its seven counts under the run's totals, and an item's
stage and each stage's result in its detail; a run of one stage shows no stage rows."""

from __future__ import annotations

import re
from pathlib import Path

from staged_run import FAILS, build
from support import make_job, posts

from runner import runs
from runner.sim import Simulator
from runner.store import Store, views
from runner.store.answers import STATES
from runner.widgets import RunPanel


def rows(html: str) -> dict[str, list[int]]:
    """A table of the panel's HTML read back: each row's name and its numbers (the seven states, the total, and a
    pipeline's stages the items that passed and skipped each)."""
    return {
        name: [0 if n == "·" else int(n) for n in re.findall(r">(\d+|·)</td>", cells)]
        for name, cells in re.findall(r"<tr><td[^>]*><b>(.*?)</b></td>(.*?)</tr>", html)
    }


async def test_the_panel_shows_a_pipeline_row_per_stage_with_its_seven_counts_and_what_passed_and_skipped_it(
    tmp_path: Path,
) -> None:
    db = await build(tmp_path)
    with Store(db, read_only=True) as store:
        tallies = views.stage_tallies(store, "triage")
    panel = RunPanel(db, "triage", live=False)
    try:
        assert "<th>stage</th>" in panel.stages.value
        assert "<th style='padding:2px 8px'>passed</th>" in panel.stages.value
        assert rows(panel.stages.value) == {
            t.stage: [*(t.counts[s] for s in STATES), sum(t.counts.values()), t.passed, t.skipped] for t in tallies
        }
        assert [(t.stage, t.passed) for t in tallies] == [("classify", 12), ("extract", 12 - tallies[1].skipped),
                                                          ("summarize", 11)]
        assert panel.widget.children.index(panel.stages) == panel.widget.children.index(panel.bar) + 2
    finally:
        panel.close()


async def test_the_panel_shows_a_pipeline_item_stage_and_each_stage_result(tmp_path: Path) -> None:
    db = await build(tmp_path)
    with Store(db, read_only=True) as store:
        item = views.item_view(store, "triage", FAILS, now=0.0)
    panel = RunPanel(db, "triage", live=False)
    try:
        assert panel.failed.value == FAILS
        detail = panel.detail.value
    finally:
        panel.close()
    assert f"<b>{FAILS}</b> · group {item.group} · stage {item.stage} · failed" in detail
    assert "<b>results by stage</b></div><div>classify <code" in detail
    assert detail.count("&quot;label&quot;") == 1
    assert "on to stage" in detail  # each move between stages said in the item's history


async def test_a_run_of_one_stage_shows_no_stage_rows(tmp_path: Path, sim: Simulator) -> None:
    with Store(tmp_path / "runs.db") as store:
        await runs.execute(store, make_job(tmp_path, sim.base_url, posts(6)))
    panel = RunPanel(tmp_path / "runs.db", "test", live=False)
    try:
        assert panel.stages.value == ""
        assert "results by stage" not in panel.detail.value
    finally:
        panel.close()
