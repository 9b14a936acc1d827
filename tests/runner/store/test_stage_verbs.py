"""The store's verbs of stages: items whose results may be stale are found, and sent back in one transaction."""

from __future__ import annotations

from pathlib import Path

from support import add_all, make_job, posts

from runner.store import Store

URL = "http://127.0.0.1:9/v1"


#: A pending item completed at a stage by hand, with the event and counts its batch's path would have written.
COMPLETE = [
    "INSERT INTO events (run_id, item_id, at, from_state, to_state, items, stage, to_stage) "
    "SELECT run_id, id, 1, state, 'completed', 1, stage, :stage FROM items WHERE id = :id",
    "INSERT INTO counts (run_id, stage, grp, state, n) SELECT run_id, stage, grp, state, -1 FROM items WHERE id = :id "
    "UNION ALL SELECT run_id, :stage, grp, 'completed', 1 FROM items WHERE id = :id "
    "ON CONFLICT (run_id, stage, grp, state) DO UPDATE SET n = n + excluded.n",
    "UPDATE items SET state = 'completed', stage = :stage WHERE id = :id",
]


def at(store: Store, key: str, state: str, stage: str, *results: tuple[str, str]) -> int:
    """Put an item at a stage and state, with results (stage, fingerprint), as the engine would have left it."""
    with store.write() as conn:
        (item_id,) = conn.execute("SELECT id FROM items WHERE key = ?", (key,)).fetchone()
        if state == "completed":
            for statement in COMPLETE:
                conn.execute(statement, {"id": item_id, "stage": stage})
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


def test_a_rewind_forgets_no_result_of_an_item_that_moved_meanwhile(tmp_path: Path, store: Store) -> None:
    add_all(store, make_job(tmp_path, URL, posts(1)), now=1.0)
    item_id = at(store, "p000", "failed", "b", ("a", "fa"))
    store.rewind({item_id: "a"}, ["a", "b"], now=2.0)
    [row] = store.rows("SELECT state, stage FROM items WHERE id = ?", [item_id])
    assert (row["state"], row["stage"]) == ("failed", "b")
    assert [r["stage"] for r in store.rows("SELECT stage FROM results WHERE item_id = ?", [item_id])] == ["a"]


def test_an_item_waiting_at_a_stage_gone_with_its_stages_done_completes_counted_and_logged(
    tmp_path: Path, store: Store
) -> None:
    run_id = add_all(store, make_job(tmp_path, URL, posts(1)), now=1.0)
    item_id = at(store, "p000", "waiting", "gone", ("a", "fa"))
    store.rewind({}, ["a"], now=2.0, done={item_id: "a"})
    [row] = store.rows("SELECT state, stage FROM items WHERE id = ?", [item_id])
    assert (row["state"], row["stage"]) == ("completed", "a")
    counts = {(r["stage"], r["state"]): r["n"] for r in store.rows(
        "SELECT stage, state, n FROM counts WHERE run_id = ? AND n != 0", [run_id])}
    assert counts == {("a", "completed"): 1}
