"""The store's verbs of decisions: arrival at a decide stage, a decision in one transaction, decisions kept."""

from __future__ import annotations

from pathlib import Path

import pytest
import support

from runner import deciding, jobs, runs
from runner.errors import RunError
from runner.jobs import Job
from runner.store import Store

def reviewed(tmp_path: Path, store: Store) -> Job:
    """A classify stage, then a person's review, over three posts."""
    job = jobs.load(support.reviewed(tmp_path, stages="classify review"))
    runs.prepare(store, job, now=1.0)
    return job


def put(store: Store, key: str, state: str, stage: str) -> None:
    """An item left pending at a stage, as a boundary, a retry or a rewind leaves it (before its arrival)."""
    with store.write() as conn:
        conn.execute("UPDATE items SET state = ?, stage = ? WHERE key = ?", (state, stage, key))
        conn.execute("DELETE FROM counts")
        conn.execute("INSERT INTO counts (run_id, stage, grp, state, n) "
                     "SELECT run_id, stage, grp, state, count(*) FROM items GROUP BY run_id, stage, grp, state")
        conn.execute("DELETE FROM events")
        conn.execute("INSERT INTO events (run_id, item_id, at, to_state, items, stage) "
                     "SELECT run_id, id, 1, state, 1, stage FROM items")


def where(store: Store) -> dict[str, tuple[str, str, str]]:
    return {r["key"]: (r["stage"], r["state"], r["hold"]) for r in store.rows("SELECT key, stage, state, hold FROM items")}


def test_items_pending_at_a_decide_stage_arrive_waiting_with_hold_decide_and_others_stay(
    tmp_path: Path, store: Store
) -> None:
    reviewed(tmp_path, store)
    put(store, "p001", "pending", "review")
    store.arrive(store.run_id("reviewed"), now=2.0)
    assert where(store) == {"p000": ("classify", "pending", "none"), "p001": ("review", "waiting", "decide"),
                            "p002": ("classify", "pending", "none")}


def test_a_decision_with_one_item_refused_changes_nothing_at_all(tmp_path: Path, store: Store) -> None:
    reviewed(tmp_path, store)
    put(store, "p001", "pending", "review")
    put(store, "p002", "completed", "review")
    before = where(store)
    with pytest.raises(RunError, match="'p002': it is completed"):
        deciding.decide(store, "reviewed", ["p000", "p001", "p002"], approve=True, now=3.0)
    assert where(store) == before
    assert store.rows("SELECT count(*) AS n FROM decisions")[0]["n"] == 0
    assert store.rows("SELECT count(*) AS n FROM commands")[0]["n"] == 0


def test_a_kept_decision_is_replaced_by_a_later_one_and_applied_once_when_the_item_arrives(
    tmp_path: Path, store: Store
) -> None:
    job = reviewed(tmp_path, store)
    run_id = store.run_id("reviewed")
    assert deciding.decide(store, "reviewed", ["p000"], approve=False, now=2.0).kept == 1
    assert deciding.decide(store, "reviewed", ["p000"], approve=True, data={"v": 2}, now=3.0).kept == 1
    assert deciding.apply_kept(store, run_id, job, now=4.0) == 0  # not there yet
    put(store, "p000", "pending", "review")
    store.arrive(run_id, now=5.0)
    assert deciding.apply_kept(store, run_id, job, now=6.0) == 1
    assert where(store)["p000"] == ("review", "completed", "none")
    assert store.rows("SELECT result FROM results WHERE stage = 'review'") == [{"result": '{"v": 2}'}]
    assert store.rows("SELECT count(*) AS n FROM decisions")[0]["n"] == 0
    assert deciding.apply_kept(store, run_id, job, now=7.0) == 0


def test_a_stage_skipped_drops_the_decision_kept_for_it_with_an_event_and_keeps_the_others(
    tmp_path: Path, store: Store
) -> None:
    from runner.model import Skip
    from runner.store.skips import skip

    reviewed(tmp_path, store)
    deciding.decide(store, "reviewed", ["p000", "p001"], approve=False, now=2.0)
    (p000,) = store.rows("SELECT id FROM items WHERE key = 'p000'")
    with store.write() as conn:
        skip(conn, [({"id": p000["id"], "now": 3.0}, Skip("review"))])
    assert store.rows("SELECT i.key FROM decisions d JOIN items i ON i.id = d.item_id") == [{"key": "p001"}]
    assert store.rows("SELECT kind, stage, message FROM events WHERE item_id = ? AND at = 3.0", [p000["id"]]) == [
        {"kind": "skipped", "stage": "review", "message": "its when is false: stage skipped"},
        {"kind": "decision_dropped", "stage": "review",
         "message": "its when is false: the rejection kept for this stage was dropped (never applied)"}]
