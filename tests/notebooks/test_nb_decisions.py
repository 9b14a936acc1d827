"""The notebook API of a decide stage: the decisions waiting (rows, or a DataFrame), and a person's decide."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import support
from support import posts

from runner.errors import RunError
from runner.model import ItemState
from runner.notebook import Run
from runner.sim import Simulator

def reviewed(tmp_path: Path, sim: Simulator) -> Run:
    """Each post classified, then reviewed by a person, then summarized."""
    job = support.reviewed(tmp_path, stages="classify review summarize", base_url=sim.base_url)
    return Run.from_job_file(job, db=tmp_path / "runs.db")


@asynccontextmanager
async def reviewed_panel(tmp_path: Path, sim: Simulator) -> AsyncIterator[tuple[Run, Any]]:
    """The run stopped at the review (three items waiting), and a panel over it (not live), closed after."""
    from runner.widgets import RunPanel

    run = reviewed(tmp_path, sim)
    await run.go()
    panel = RunPanel(tmp_path / "runs.db", "reviewed", live=False)
    try:
        yield run, panel
    finally:
        panel.close()


async def test_the_notebook_lists_the_decisions_waiting_and_decides_them(tmp_path: Path, sim: Simulator) -> None:
    run = reviewed(tmp_path, sim)
    stopped = await run.go()
    assert stopped.exit_code == 4 and run.status()["needs_decision"] == 3
    waiting = run.decisions()
    assert [(row["key"], row["stage"]) for row in waiting] == [("p000", "review"), ("p001", "review"),
                                                              ("p002", "review")]
    assert waiting[0]["input"] == posts(1)[0] and waiting[0]["state"]["classify"]["label"] in {"bug", "praise"}
    assert run.decide("p000", data={"ok": True}) == (1, 0, 0)
    assert run.decide("p001", approve=False) == (0, 1, 0)
    with pytest.raises(RunError, match="'p001': it was rejected at stage 'review'"):
        run.decide("p001")
    done = await run.go()
    assert done.status["counts"][ItemState.COMPLETED] == 1 and [row["key"] for row in run.decisions()] == ["p002"]
    assert run.results()[0]["review.ok"] is True


def test_the_decisions_come_as_a_dataframe_when_asked(tmp_path: Path, sim: Simulator) -> None:
    pandas = pytest.importorskip("pandas")
    run = reviewed(tmp_path, sim)
    asyncio.run(run.go())
    frame = run.decisions(frame=True)
    assert isinstance(frame, pandas.DataFrame) and list(frame["key"]) == ["p000", "p001", "p002"]


async def test_the_panel_decisions_tab_approves_with_its_data_and_refuses_data_that_is_not_an_object(
    tmp_path: Path, sim: Simulator
) -> None:
    async with reviewed_panel(tmp_path, sim) as (run, panel):
        tab = panel.decisions
        assert panel.tabs.titles[3] == "Decisions (3)" and tab.key == "p000"
        assert "waiting for a decision at stage <b>review</b>" in tab.detail.value
        tab.data.value = "[1, 2]"
        tab.approve.click()
        assert "the data is not saved: a JSON object" in panel.message.value
        assert run.status()["needs_decision"] == 3
        tab.data.value = '{"ok": true}'
        tab.approve.click()
        assert "p000 approved" in panel.message.value and panel.tabs.titles[3] == "Decisions (2)"
        assert tab.key == "p001"
        tab.reject.click()
        assert "p001 rejected" in panel.message.value and panel.tabs.titles[3] == "Decisions (1)"
    assert [row["key"] for row in run.failures()] == ["p001"]
    assert run.item("p000")["stage"] == "summarize"


async def test_the_panel_decisions_tab_types_each_items_data_afresh_and_unchooses_an_item_decided_elsewhere(
    tmp_path: Path, sim: Simulator
) -> None:
    async with reviewed_panel(tmp_path, sim) as (run, panel):
        tab = panel.decisions
        assert tab.key == "p000" and tab.items.options[0] == ("p000 · review", "p000")
        tab.data.value = '{"by": "ana"}'
        tab.items.value = "p001"
        assert tab.data.value == "{}"
        tab.items.value = "p000"
        tab.data.value = '{"by": "ana"}'
        tab.approve.click()
        assert "p000 approved" in panel.message.value and tab.key == "p001" and tab.data.value == "{}"
        run.decide("p001", data={"by": "bo"})
        panel.refresh()
        assert tab.key is None and tab.approve.disabled and tab.reject.disabled
        assert "p001 was decided elsewhere" in panel.message.value
        assert "choose an item to decide" in tab.detail.value
        panel.refresh()
        assert tab.key is None
        tab.items.value = "p002"
        assert not tab.approve.disabled
        tab.approve.click()
    from runner import export
    from runner.store import Store

    with Store(tmp_path / "runs.db", create=False) as store:
        reviews = {row["key"]: row["review"] for row in export.rows(store, "reviewed")}
    assert reviews == {"p000": {"approved": True, "by": "ana"}, "p001": {"approved": True, "by": "bo"},
                       "p002": {"approved": True}}
