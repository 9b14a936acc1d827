"""The decisions screen: one item at a time, approve with edited data, reject, and invalid JSON refused."""

from __future__ import annotations

from pathlib import Path

from support import posts, reviewed, write_jsonl
from textual.widgets import Static, TextArea
from tui_support import press, settle, shown

from runner import export, jobs, runs
from runner.model import FailureKind, ItemState
from runner.store import Store, views
from tui.app import RunnerApp
from tui.screens.decisions import DataScreen, DecisionsScreen
from tui.screens.failures import FailedTable

def waiting_for_review(tmp_path: Path, store: Store) -> None:
    """Three posts waiting at the review, as an engine leaves them (no call needed before it)."""
    runs.prepare(store, jobs.load(reviewed(tmp_path, stages="review summarize")), now=1.0)
    store.arrive(store.run_id("reviewed"), now=1.0)


def where(store: Store, key: str) -> tuple[str, str]:
    row = views.item(store, store.run_id("reviewed"), key)
    assert row is not None
    return row["stage"], row["state"]


async def test_the_decisions_screen_approves_with_edited_data_and_rejects_one_item_at_a_time(
    tmp_path: Path, store: Store
) -> None:
    waiting_for_review(tmp_path, store)
    app = RunnerApp(store.path, "reviewed")
    async with app.run_test(size=(120, 40)) as pilot:
        await press(pilot, "d")
        screen = app.screen
        assert isinstance(screen, DecisionsScreen) and screen.view is not None
        assert (screen.view.waiting, screen.key) == (3, "p000")
        assert screen.item is not None and screen.item.state == posts(3)[0]
        await press(pilot, "e")
        assert isinstance(app.screen, DataScreen)
        app.screen.query_one(TextArea).load_text('{"ok": tru')
        await pilot.press("ctrl+s")
        assert isinstance(app.screen, DataScreen)
        assert "not saved: not JSON" in str(app.screen.query_one("#edit-error", Static).render())
        app.screen.query_one(TextArea).load_text('{"ok": true}')
        await pilot.press("ctrl+s")
        assert app.screen is screen and screen.data == {"p000": {"ok": True}}
        await press(pilot, "a")
        await settle(pilot, read=True)
        assert screen.key == "p001" and screen.view.waiting == 2
        await press(pilot, "x")
        await settle(pilot, read=True)
        assert screen.key == "p002"
    assert where(store, "p000") == ("summarize", ItemState.PENDING)
    reviews = [row["review"] for row in export.rows(store, "reviewed") if row["key"] == "p000"]
    assert reviews == [{"approved": True, "ok": True}]
    (rejected,) = views.failures(store, "reviewed")
    assert (rejected["key"], rejected["kind"]) == ("p001", FailureKind.REJECTED)
    assert where(store, "p002") == ("review", ItemState.WAITING)



async def test_the_decisions_screen_shows_an_item_s_text_with_its_line_breaks_not_json_escapes(
    tmp_path: Path, store: Store
) -> None:
    reviewed(tmp_path, stages="review summarize")
    body = 'First line of the post.\nSecond line, "quoted".'
    write_jsonl(tmp_path / "posts.jsonl", [{"id": "p000", "month": "2026-01", "body": body}])
    runs.prepare(store, jobs.load(tmp_path / "job.toml"), now=1.0)
    store.arrive(store.run_id("reviewed"), now=1.0)
    app = RunnerApp(store.path, "reviewed")
    async with app.run_test(size=(120, 40)) as pilot:
        await press(pilot, "d")
        lines = shown(app.screen.query_one("#decide-state"))
    assert lines[:5] == ["input", "  id: p000", "  month: 2026-01", "  body: First line of the post.",
                         '        Second line, "quoted".']
    assert not [line for line in lines if "\\n" in line or '\\"' in line]


async def test_a_rejected_item_s_failure_names_its_stage_once(tmp_path: Path, store: Store) -> None:
    waiting_for_review(tmp_path, store)
    app = RunnerApp(store.path, "reviewed")
    async with app.run_test(size=(120, 40)) as pilot:
        await press(pilot, "d", "x", "escape", "f")
        rows = shown(app.screen.query_one(FailedTable))
    assert [row for row in rows if "p000" in row][0].endswith("at review: rejected by a person")
