"""Revalidating from the run screen (``k``, or the palette's Revalidate): the plan first, priced, then a yes
(issue 18). Items now valid complete with no call; items now invalid go back only after yes; no changes nothing."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from scenes import given_unchecked
from support import label_all_but_p001, make_job, posts, python_run
from tui_support import Told, press, settle

from runner import runs
from runner.providers.handler import PythonHandler
from runner.store import Store, views
from tui.app import RunnerApp
from tui.screens.dialog import AskScreen
from tui.screens.run import RunScreen

#: A label no answer of :func:`support.label_all_but_p001` has, and none required: p001's kept answer (no label)
#: passes it now, the three labelled results no longer do.
ONLY_BUGS = {"properties": {"label": {"const": "bug"}}}


async def schema_changed(store: Store, tmp_path: Path) -> None:
    """The run ``test`` of four posts (p001 failed as invalid, its answer kept), then given :data:`ONLY_BUGS`
    unchecked, as a runner before the revalidation at each start left it."""
    await python_run(store, tmp_path)
    given_unchecked(store, dataclasses.replace(store.job("test"), output_schema=ONLY_BUGS))


def states(store: Store) -> dict[str, str]:
    return {row["key"]: row["state"] for row in views.items(store, store.run_id("test"))}


async def test_k_shows_the_revalidation_s_plan_and_yes_completes_the_valid_and_sends_the_invalid_again(
    tmp_path: Path, store: Store
) -> None:
    await schema_changed(store, tmp_path)
    app = RunnerApp(store.path, "test")
    async with app.run_test(size=(120, 40)) as pilot:
        await press(pilot, "k")
        assert isinstance(app.screen, AskScreen) and app.screen.question == "Revalidate run test?"
        assert str(app.screen.body).splitlines()[:2] == [
            "plan: 4 items · 1 charge-safe (est. $0.0000) · 3 may be billed again (cost unknown)",
            "stage python: 1 item that failed as invalid would complete (charge-safe); 3 items would be sent "
            "again: may repeat a charge, they were answered",
        ]
        assert app.screen.warning == "3 items may be billed again"
        assert states(store) == {"p000": "completed", "p001": "failed", "p002": "completed", "p003": "completed"}
        await pilot.press("y")
        await settle(pilot)
        assert isinstance(app.screen, RunScreen)
    assert states(store) == {"p000": "pending", "p001": "completed", "p002": "pending", "p003": "pending"}


async def test_no_to_the_revalidation_changes_nothing(tmp_path: Path, store: Store) -> None:
    await schema_changed(store, tmp_path)
    before = states(store)
    app = RunnerApp(store.path, "test")
    async with app.run_test(size=(120, 40)) as pilot:
        await press(pilot, "k")
        assert isinstance(app.screen, AskScreen)
        await pilot.press("n")
        await settle(pilot)
        assert isinstance(app.screen, RunScreen)
    assert states(store) == before


async def test_the_palette_s_revalidate_asks_as_k_does(tmp_path: Path, store: Store) -> None:
    await schema_changed(store, tmp_path)
    app = RunnerApp(store.path, "test")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+p", *"revalidate", "enter")
        await settle(pilot)
        assert isinstance(app.screen, AskScreen) and app.screen.question == "Revalidate run test?"


async def test_a_run_with_no_saved_output_is_told_nothing_to_revalidate_with_no_dialog(
    tmp_path: Path, store: Store
) -> None:
    await schema_changed(store, tmp_path)
    runs.prepare(store, dataclasses.replace(store.job("test"), name="fresh"), now=10.0)
    told = Told()
    app = RunnerApp(store.path, "fresh")
    async with app.run_test(size=(120, 40), message_hook=told) as pilot:
        await press(pilot, "k")
        assert isinstance(app.screen, RunScreen)
    assert told.messages == ["nothing to revalidate: no saved output of run 'fresh' changes"]


async def test_a_run_given_a_python_check_is_refused_in_one_message_as_the_store_does_not_keep_the_check(
    tmp_path: Path, store: Store
) -> None:
    job = make_job(tmp_path, "http://127.0.0.1:9/v1", posts(2), check=lambda result: None)
    await runs.execute(store, job, provider=PythonHandler(label_all_but_p001))
    told = Told()
    app = RunnerApp(store.path, "test")
    async with app.run_test(size=(120, 40), message_hook=told) as pilot:
        await press(pilot, "k")
        assert isinstance(app.screen, RunScreen)
    assert told.messages == ["run 'test' checks its results with a Python function (check=), which the store does "
                             "not keep: revalidate it from Python, where its Run has its check: run.revalidate()"]
