"""The store's verbs of stages: items whose results may be stale are found, and sent back in one transaction."""

from __future__ import annotations

from pathlib import Path

import pytest

from support import add_all, make_job, posts, write_jsonl

from runner import jobs
from runner.engine import stages as engine_stages
from runner.jobs import Job
from runner.store import Store

URL = "http://127.0.0.1:9/v1"
GONE = "its stage is no longer in the job, and every stage it needs has its result"


#: A pending item moved to a state of the batch path (``:state``) at a stage by hand, with the event and counts
#: its batch's path would have written (the trigger leaves those moves to their batch).
BY_BATCH = [
    "INSERT INTO events (run_id, item_id, at, from_state, to_state, items, stage, to_stage) "
    "SELECT run_id, id, 1, state, :state, 1, stage, :stage FROM items WHERE id = :id",
    "INSERT INTO counts (run_id, stage, grp, state, n) SELECT run_id, stage, grp, state, -1 FROM items WHERE id = :id "
    "UNION ALL SELECT run_id, :stage, grp, :state, 1 FROM items WHERE id = :id "
    "ON CONFLICT (run_id, stage, grp, state) DO UPDATE SET n = counts.n + excluded.n",
    "UPDATE items SET state = :state, stage = :stage WHERE id = :id",
]


def at(store: Store, key: str, state: str, stage: str, *results: tuple[str, str]) -> int:
    """Put an item at a stage and state, with results (stage, fingerprint), as the engine would have left it."""
    with store.write() as conn:
        (item_id,) = conn.execute("SELECT id FROM items WHERE key = ?", (key,)).fetchone()
        if state in ("queued", "running", "received"):  # completed with no batch: the trigger counts it
            for statement in BY_BATCH:
                conn.execute(statement, {"id": item_id, "stage": stage, "state": state})
        else:
            conn.execute("UPDATE items SET state = ?, stage = ? WHERE id = ?", (state, stage, item_id))
        conn.executemany("INSERT INTO results (item_id, stage, result, fingerprint, at) VALUES (?, ?, '{}', ?, 1)",
                         [(item_id, name, fingerprint) for name, fingerprint in results])
    return int(item_id)


def test_stale_items_are_those_whose_results_may_not_stand_for_the_stages_now(tmp_path: Path, store: Store) -> None:
    run_id = add_all(store, make_job(tmp_path, URL, posts(8)), now=1.0)
    fresh = at(store, "p000", "completed", "b", ("a", "fa"), ("b", "fb"), ('say "hi"', "fq"))
    stale = at(store, "p001", "completed", "b", ("a", "fa"), ("b", "old"))
    short = at(store, "p002", "completed", "a", ("a", "fa"))
    gone = at(store, "p003", "pending", "renamed", ("a", "fa"))
    at(store, "p004", "pending", "b", ("a", "fa"))
    waiting_stale = at(store, "p005", "waiting", "b", ("a", "old"))
    lacking = at(store, "p006", "completed", "b", ("b", "fb"))
    quoted = at(store, "p007", "completed", 'say "hi"', ('say "hi"', "old"))
    stages = [("a", "fa"), ("b", "fb"), ('say "hi"', "fq")]
    found = {item.id for item in store.stale_items(run_id, stages)}
    assert found == {stale, short, gone, waiting_stale, lacking, quoted}
    assert fresh not in found


def test_a_rewind_sends_items_back_pending_at_a_stage_and_forgets_the_results_from_it_on(
    tmp_path: Path, store: Store
) -> None:
    add_all(store, make_job(tmp_path, URL, posts(2)), now=1.0)
    item_id = at(store, "p000", "completed", "c", ("a", "fa"), ("b", "fb"), ("c", "fc"))
    store.rewind({item_id: "b"}, ["a", "b", "c"], now=2.0)
    [row] = store.rows("SELECT state, stage FROM items WHERE id = ?", [item_id])
    assert (row["state"], row["stage"]) == ("pending", "b")
    assert [r["stage"] for r in store.rows("SELECT stage FROM results WHERE item_id = ?", [item_id])] == ["a"]


def test_a_retry_puts_a_failed_item_back_pending_at_its_stage_keeping_the_results_before_it(
    tmp_path: Path, store: Store
) -> None:
    run_id = add_all(store, make_job(tmp_path, URL, posts(3)), now=1.0)
    failed_at_b = at(store, "p000", "failed", "b", ("a", "fa"))
    at(store, "p001", "failed", "a")
    assert store.retry_failed(run_id, kind=None, keys=[], now=2.0, stage="b").again == 1
    assert store.rows("SELECT state, stage FROM items WHERE id = ?", [failed_at_b]) == [
        {"state": "pending", "stage": "b"}]
    assert [r["stage"] for r in store.rows("SELECT stage FROM results WHERE item_id = ?", [failed_at_b])] == ["a"]
    assert store.retry_failed(run_id, kind=None, keys=[], now=3.0).again == 1


def test_items_left_at_a_stage_gone_are_sent_on_kept_failed_or_completed_in_one_transaction_with_their_counts(
    tmp_path: Path, store: Store
) -> None:
    run_id = add_all(store, make_job(tmp_path, URL, posts(4)), now=1.0)
    received = at(store, "p000", "received", "gone", ("a", "fa"))
    held = at(store, "p001", "running", "gone", ("a", "fa"))
    cancelled = at(store, "p002", "failed", "gone", ("a", "fa"))
    done = at(store, "p003", "failed", "gone", ("a", "fa"), ("b", "fb"))
    found = {item.id: (item.state, item.stage) for item in store.stale_items(run_id, [("a", "fa"), ("b", "fb")])}
    assert found == {received: ("received", "gone"), held: ("running", "gone"), cancelled: ("failed", "gone"),
                     done: ("failed", "gone")}
    store.rewind({received: "b", held: "b"}, ["a", "b"], now=2.0, restage={cancelled: "b"}, finish={done: "b"})
    rows = store.rows("SELECT key, state, stage FROM items ORDER BY key")
    assert [(r["key"], r["state"], r["stage"]) for r in rows] == [
        ("p000", "pending", "b"), ("p001", "pending", "b"), ("p002", "failed", "b"), ("p003", "completed", "b")]


def test_a_rewind_moves_no_item_a_person_cancelled_meanwhile_and_forgets_none_of_its_results(
    tmp_path: Path, store: Store
) -> None:
    add_all(store, make_job(tmp_path, URL, posts(1)), now=1.0)
    item_id = at(store, "p000", "failed", "b", ("a", "fa"))
    with store.write() as conn:
        conn.execute("UPDATE items SET error_kind = 'cancelled' WHERE id = ?", (item_id,))
    store.rewind({item_id: "a"}, ["a", "b"], now=2.0)
    [row] = store.rows("SELECT state, stage FROM items WHERE id = ?", [item_id])
    assert (row["state"], row["stage"]) == ("failed", "b")
    assert [r["stage"] for r in store.rows("SELECT stage FROM results WHERE item_id = ?", [item_id])] == ["a"]


@pytest.mark.parametrize("hold", ["none", "decide", "join"])
def test_an_item_waiting_at_a_stage_gone_with_its_stages_done_completes_counted_and_logged_once(
    tmp_path: Path, store: Store, hold: str
) -> None:
    run_id = add_all(store, make_job(tmp_path, URL, posts(1)), now=1.0)
    item_id = at(store, "p000", "waiting", "gone", ("a", "fa"))
    with store.write() as conn:  # waiting for a time, a person's decision, or its sub-items
        conn.execute("UPDATE items SET hold = ? WHERE id = ?", (hold, item_id))
    store.rewind({}, ["a"], now=2.0, finish={item_id: "a"})
    [row] = store.rows("SELECT state, stage FROM items WHERE id = ?", [item_id])
    assert (row["state"], row["stage"]) == ("completed", "a")
    counts = {(r["stage"], r["state"]): r["n"] for r in store.rows(
        "SELECT stage, state, n FROM counts WHERE run_id = ? AND n != 0", [run_id])}
    assert counts == {("a", "completed"): 1}


def test_an_item_completed_because_its_stage_is_gone_says_why_in_its_history_counted_once(
    tmp_path: Path, store: Store
) -> None:
    run_id = add_all(store, make_job(tmp_path, URL, posts(1)), now=1.0)
    item_id = at(store, "p000", "waiting", "gone", ("a", "fa"))
    store.rewind({}, ["a"], now=2.0, finish={item_id: "a"})
    history = store.rows("SELECT from_state, to_state, kind, message, items FROM events WHERE item_id = ? AND at = 2",
                         [item_id])
    assert [(e["from_state"], e["to_state"], e["kind"], e["message"], e["items"]) for e in history] == [
        ("waiting", "completed", None, None, 1), ("completed", "completed", "finished", GONE, 0)]
    assert store.rows("SELECT output FROM items WHERE id = ?", [item_id]) == [{"output": "{}"}]
    counts = store.rows("SELECT stage, state, n FROM counts WHERE run_id = ? AND n != 0", [run_id])
    assert [(r["stage"], r["state"], r["n"]) for r in counts] == [("a", "completed", 1)]


def two_stages(tmp_path: Path) -> Job:
    write_jsonl(tmp_path / "posts.jsonl", posts(2))
    (tmp_path / "two.toml").write_text(
        f'name = "two"\ninput = "posts.jsonl"\nkey = "id"\n[provider]\nbase_url = "{URL}"\n'
        '[[stage]]\nname = "a"\n[[stage]]\nname = "b"\n', encoding="utf-8")
    return jobs.load(tmp_path / "two.toml")


def test_a_persons_cancel_of_an_item_in_flight_at_a_stage_gone_stands_failed_cancelled_at_its_next_stage(
    tmp_path: Path, store: Store
) -> None:
    job = two_stages(tmp_path)
    run_id = add_all(store, job, now=1.0)
    a = ("a", job.stage("a").fingerprint(job.version))
    cancelled, other = at(store, "p000", "running", "gone", a), at(store, "p001", "running", "gone", a)
    with store.write() as conn:
        conn.execute("UPDATE items SET error_kind = 'cancelled', error = 'cancelled by a person' WHERE id = ?",
                     (cancelled,))
    assert engine_stages.rewind(store, run_id, job, {}, now=2.0).gone == {"gone": 2}
    rows = {r["id"]: (r["state"], r["stage"], r["error_kind"]) for r in store.rows(
        "SELECT id, state, stage, error_kind FROM items")}
    assert rows == {cancelled: ("failed", "b", "cancelled"), other: ("pending", "b", None)}
    counts = store.rows("SELECT stage, state, n FROM counts WHERE run_id = ? AND n != 0 ORDER BY state", [run_id])
    assert [(r["stage"], r["state"], r["n"]) for r in counts] == [("b", "failed", 1), ("b", "pending", 1)]
