"""The panel's Revalidate: the revalidation's plan shown first (priced, stage by stage), Go applies it, Cancel does
not (issue 18)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from scenes import given_unchecked
from support import label_all_but_p001, posts, python_run

from runner import notebook, runs
from runner.notebook import Run
from runner.store import Store, views
from runner.widgets import RunPanel

#: No label required, and only ``bug``: p001's kept answer (no label) passes now, the three labelled results do not.
ONLY_BUGS = {"properties": {"label": {"const": "bug"}}}
BEFORE = {"p000": "completed", "p001": "failed", "p002": "completed", "p003": "completed"}


@pytest.fixture
async def panel(tmp_path: Path, store: Store) -> AsyncIterator[RunPanel]:
    """The panel of the run ``test`` of four posts (p001 failed as invalid, its answer kept), then given
    :data:`ONLY_BUGS` unchecked, as a runner before the revalidation at each start left it."""
    await python_run(store, tmp_path)
    given_unchecked(store, dataclasses.replace(store.job("test"), output_schema=ONLY_BUGS))
    made = RunPanel(store.path, "test", live=False, now=lambda: 20.0)
    yield made
    made.close()


def states(store: Store) -> dict[str, str]:
    return {row["key"]: row["state"] for row in views.items(store, store.run_id("test"))}


def test_revalidate_shows_the_plan_and_go_completes_the_valid_and_sends_the_invalid_again(
    panel: RunPanel, store: Store
) -> None:
    panel.revalidate.button.click()
    assert panel.plan.text.value == (
        "<b>plan: 4 items · 1 charge-safe (est. $0.0000) · 3 may be billed again (cost unknown)</b><br>stage python: "
        "1 item that failed as invalid would complete (charge-safe); 3 items would be sent again: may repeat a "
        "charge, they were answered")
    assert panel.plan.go_button.button_style == "danger" and states(store) == BEFORE
    panel.plan.go_button.click()
    assert "revalidated run &#x27;test&#x27;: 1 result kept or completed with no call, 3 items sent again" in (
        panel.message.value)
    assert states(store) == {"p000": "pending", "p001": "completed", "p002": "pending", "p003": "pending"}


def test_cancel_of_the_revalidation_s_plan_changes_nothing(panel: RunPanel, store: Store) -> None:
    panel.revalidate.button.click()
    panel.plan.cancel_button.click()
    assert panel.plan.widget.layout.display == "none" and states(store) == BEFORE


def test_a_run_with_no_saved_output_is_told_nothing_to_revalidate_with_no_plan(panel: RunPanel, store: Store) -> None:
    runs.prepare(store, dataclasses.replace(store.job("test"), name="fresh"), now=10.0)
    fresh = RunPanel(store.path, "fresh", live=False)
    try:
        fresh.revalidate.button.click()
        assert fresh.plan.widget.layout.display == "none"
        assert "nothing to revalidate: no saved output of run &#x27;fresh&#x27; changes" in fresh.message.value
    finally:
        fresh.close()


def labelled(result: dict[str, Any]) -> str | None:
    """A notebook's Python check: a result needs a label."""
    return None if result.get("label") else "no label"


async def test_run_panel_revalidates_with_the_run_s_python_check_which_a_panel_of_the_store_s_job_refuses(
    tmp_path: Path,
) -> None:
    run = Run("checked", posts(3), db=tmp_path / "runs.db", provider=label_all_but_p001, check=labelled,
              retry={"max_attempts": 1})
    await run.go()
    of_any, own = notebook.panel("checked", db=tmp_path / "runs.db"), run.panel()
    try:
        of_any.revalidate.button.click()
        assert "checks its results with a Python function (check=), which the store does not keep" in (
            of_any.message.value)
        own.revalidate.button.click()  # p001's answer has no label: still invalid, not completed
        assert own.plan.text.value.endswith("<br>stage python: 2 results still valid would be kept (charge-safe); "
                                            "1 failed item still invalid, left failed")
    finally:
        of_any.close()
        own.close()
