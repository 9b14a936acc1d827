"""The store's verbs of fan-out and join: sub-items made with their parent's results, counted down in the
transaction of each one's last move, even when two settle at the same moment from two connections."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from scenes import reopened
from support import add_all, posts, write_jsonl

from runner import jobs, lease, tables
from runner.jobs import Job
from runner.engine import joins
from runner.model import FanOut, Settlement
from runner.rules import fanout
from runner.store import Store, views
from runner.store.fanout import RETIRED

URL = "http://127.0.0.1:9/v1"
LEASE = ("fan", "t")


def fan_job(tmp_path: Path) -> Job:
    write_jsonl(tmp_path / "posts.jsonl", posts(1))
    (tmp_path / "fan.toml").write_text(
        f'name = "fan"\ninput = "posts.jsonl"\n[provider]\nbase_url = "{URL}"\n'
        '[[stage]]\nname = "split"\nfan_out = "chunks"\n[[stage]]\nname = "note"\n'
        '[[stage]]\nname = "gather"\nkind = "join"\n', encoding="utf-8")
    return jobs.load(tmp_path / "fan.toml")


def answered(store: Store, run_id: int, stage: str, result: dict[str, object]) -> tuple[int, int]:
    """One item of ``stage`` claimed, started and answered ``result`` (its id added): (batch id, item id)."""
    batch = store.claim_batch(run_id, max_items=1, max_chars=10**6, now=1.0, stage=stage, owner=LEASE[1])
    assert batch is not None
    [item] = store.start_batch(batch.id, lease=LEASE, max_attempts=3, now=1.0)
    store.record_answer(batch.id, {item.id: json.dumps({"id": item.key, **result})}, raw="", now=1.0)
    return batch.id, item.id


def fanned_out(store: Store, tmp_path: Path, chunks: list[str]) -> tuple[int, int]:
    """The one post fanned out into ``chunks`` at stage ``split``: (run id, parent id)."""
    job = fan_job(tmp_path)
    run_id = add_all(store, job, now=1.0)
    lease.acquire(store, "fan", token="t", now=1.0)
    batch_id, parent = answered(store, run_id, "split", {"chunks": chunks})
    fan = fanout.fanned(job.stage("split"), posts(1)[0], {"split": {"chunks": chunks}})
    assert isinstance(fan, fanout.Fan)
    store.settle_batch(batch_id, Settlement(completed=[parent], fingerprint="f", fan_out={
        parent: FanOut("split", "gather", "note", fan.inputs, fan.result)}), now=1.0)
    return run_id, parent


def noted(store: Store, tmp_path: Path) -> tuple[int, int]:
    """The one post fanned out into two sub-items, both completed at ``note``: (run id, parent id)."""
    run_id, parent = fanned_out(store, tmp_path, ["a", "b"])
    for batch_id, item_id in [answered(store, run_id, "note", {"note": "n"}) for _ in range(2)]:
        store.settle_batch(batch_id, Settlement(completed=[item_id], fingerprint="f"), now=2.0)
    return run_id, parent


def left(store: Store, parent: int) -> int:
    [row] = store.rows("SELECT sub_items_left FROM items WHERE id = ?", [parent])
    return int(row["sub_items_left"])


def test_a_fan_out_makes_one_sub_item_per_chunk_pending_after_it_with_its_parents_results(
    tmp_path: Path, store: Store
) -> None:
    run_id, parent = fanned_out(store, tmp_path, ["a", "b", "c"])
    subs = store.rows("SELECT key, state, stage, parent_id FROM items WHERE parent_id IS NOT NULL ORDER BY id")
    assert [(s["key"], s["state"], s["stage"]) for s in subs] == [
        ("p000/0", "pending", "note"), ("p000/1", "pending", "note"), ("p000/2", "pending", "note")]
    assert left(store, parent) == 3
    status = views.status(store, "fan", now=1.0)
    assert (status["waiting_for_sub_items"], status["stages"]["gather"]["waiting"], status["total"]) == (1, 1, 4)
    assert "1 item waiting for sub-items" in "".join(tables.status_table(views.standing(store, "fan", now=1.0)))
    kept = store.rows("SELECT result FROM results WHERE item_id = (SELECT id FROM items WHERE key = 'p000/1')")
    assert [json.loads(row["result"]) for row in kept] == [{}]
    assert store.joinable(run_id, ["gather"]) == []


def test_the_count_down_of_two_sub_items_settling_at_once_from_two_connections_loses_no_update(
    tmp_path: Path, store: Store
) -> None:
    run_id, parent = fanned_out(store, tmp_path, ["a", "b"])
    batches = [answered(store, run_id, "note", {"note": "n"}) for _ in range(2)]
    together = threading.Barrier(2)
    failures: list[BaseException] = []

    def settle(batch_id: int, item_id: int) -> None:
        try:
            with reopened(store) as other:
                together.wait()
                other.settle_batch(batch_id, Settlement(completed=[item_id], fingerprint="f"), now=2.0)
        except BaseException as exc:  # noqa: BLE001 (reported by the test's thread)
            failures.append(exc)

    threads = [threading.Thread(target=settle, args=batch) for batch in batches]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert left(store, parent) == 0
    [ready] = store.joinable(run_id, ["gather"])
    assert (ready.id, [(sub.key, sub.state) for sub in ready.subs]) == (
        parent, [("p000/0", "completed"), ("p000/1", "completed")])


def test_a_fan_out_made_again_replaces_the_sub_items_with_the_same_keys(tmp_path: Path, store: Store) -> None:
    run_id, parent = fanned_out(store, tmp_path, ["a", "b", "c"])
    store.rewind({parent: "split"}, ["split", "note", "gather"], now=3.0)
    batch_id, _ = answered(store, run_id, "split", {"chunks": ["x", "y"]})
    fan = fanout.fanned(fan_job(tmp_path).stage("split"), posts(1)[0], {"split": {"chunks": ["x", "y"]}})
    assert isinstance(fan, fanout.Fan)
    store.settle_batch(batch_id, Settlement(completed=[parent], fingerprint="f", fan_out={
        parent: FanOut("split", "gather", "note", fan.inputs, fan.result)}), now=4.0)
    keys = [row["key"] for row in store.rows("SELECT key FROM items WHERE parent_id = ? ORDER BY id", [parent])]
    assert keys == ["p000/0", "p000/1"] and left(store, parent) == 2


def test_a_cancelled_sub_item_counts_its_parent_down_and_a_cancelled_parent_cancels_its_sub_items(
    tmp_path: Path, store: Store
) -> None:
    run_id, parent = fanned_out(store, tmp_path, ["a", "b", "c"])
    assert store.cancel(run_id, keys=["p000/0"], now=2.0, engine_alive=False) == (1, 0)
    assert left(store, parent) == 2
    assert store.cancel(run_id, keys=["p000"], now=3.0, engine_alive=False) == (3, 0)
    states = store.rows("SELECT key, state, error_kind FROM items ORDER BY id")
    assert {(row["state"], row["error_kind"]) for row in states} == {("failed", "cancelled")}
    assert store.joinable(run_id, ["gather"]) == []


def test_a_parent_cancelled_while_its_fan_out_stage_was_in_flight_keeps_its_result_and_fans_out_nothing(
    tmp_path: Path, store: Store
) -> None:
    job = fan_job(tmp_path)
    run_id = add_all(store, job, now=1.0)
    lease.acquire(store, "fan", token="t", now=1.0)
    batch_id, parent = answered(store, run_id, "split", {"chunks": ["a"]})
    assert store.cancel(run_id, keys=["p000"], now=1.5, engine_alive=True) == (0, 1)
    fan = fanout.fanned(job.stage("split"), posts(1)[0], {"split": {"chunks": ["a"]}})
    assert isinstance(fan, fanout.Fan)
    store.settle_batch(batch_id, Settlement(completed=[parent], fingerprint="f", fan_out={
        parent: FanOut("split", "gather", "note", fan.inputs, fan.result)}), now=2.0)
    [row] = store.rows("SELECT state, stage, error_kind FROM items")
    assert (row["state"], row["stage"], row["error_kind"]) == ("failed", "gather", "cancelled")
    assert [r["stage"] for r in store.rows("SELECT stage FROM results")] == ["split"]


def test_a_parent_whose_sub_items_settled_before_a_stop_is_joined_from_the_store_alone(
    tmp_path: Path, store: Store
) -> None:
    run_id, parent = noted(store, tmp_path)
    job = fan_job(tmp_path)  # what the next engine reads on its first turn: the store, no call
    assert joins.join(store, run_id, job, now=3.0) == 1
    [row] = store.rows("SELECT state, stage, hold, output FROM items WHERE id = ?", [parent])
    assert (row["state"], row["stage"], row["hold"]) == ("completed", "gather", "none")
    assert [r["note"] for r in json.loads(row["output"])["results"]] == ["n", "n"]
    assert joins.join(store, run_id, job, now=4.0) == 0


def test_a_join_of_a_parent_a_person_cancelled_since_it_was_read_saves_no_result_and_leaves_it_failed(
    tmp_path: Path, store: Store
) -> None:
    run_id, parent = noted(store, tmp_path)
    ends = [joins.end_of(fan_job(tmp_path), ready) for ready in store.joinable(run_id, ["gather"])]
    assert store.cancel(run_id, keys=["p000"], now=2.5, engine_alive=True) == (1, 0)
    store.join(ends, now=3.0)
    [row] = store.rows("SELECT state, error_kind FROM items WHERE id = ?", [parent])
    assert (row["state"], row["error_kind"]) == ("failed", "cancelled")
    assert store.rows("SELECT stage FROM results WHERE item_id = ? AND stage = 'gather'", [parent]) == []


def test_a_parent_sent_back_before_its_fan_out_retires_its_sub_items_in_flight_too_never_sending_them_again(
    tmp_path: Path, store: Store
) -> None:
    run_id, parent = fanned_out(store, tmp_path, ["a", "b", "c"])
    call, task = (store.claim_batch(run_id, max_items=1, max_chars=10**6, now=1.0, stage="note", owner=LEASE[1]) for _ in range(2))
    assert call is not None and task is not None
    for batch in (call, task):
        store.start_batch(batch.id, lease=LEASE, max_attempts=3, now=1.0)
    store.count_maybe_paid(call.id)  # a call held for a person (counted as maybe paid), a line of an upstream task
    with store.write() as conn:
        conn.execute("UPDATE items SET hold = 'confirm' WHERE batch_id = ?", (call.id,))
        conn.execute("UPDATE batches SET submits = 1 WHERE id = ?", (task.id,))
    store.rewind({parent: "split"}, ["split", "note", "gather"], now=3.0, retire=[parent])
    assert store.rows("SELECT key FROM items WHERE parent_id IS NOT NULL") == []
    assert store.rows("SELECT maybe_paid FROM items WHERE id = ?", [parent]) == [{"maybe_paid": 2}]
    assert store.rows("SELECT maybe_paid FROM runs WHERE id = ?", [run_id]) == [{"maybe_paid": 2}]
    removed = store.rows("SELECT to_state, items FROM events WHERE kind = 'removed' AND message = ?", [RETIRED])
    assert sorted((e["to_state"], e["items"]) for e in removed) == [("pending", -1), ("running", -1), ("running", -1)]
    status = views.status(store, "fan", now=3.0)
    assert (status["total"], status["waiting_for_sub_items"]) == (1, 0)


def joined(store: Store, tmp_path: Path) -> tuple[int, int, list[int]]:
    """The one post fanned out into two sub-items, both noted, and joined: (run id, parent id, sub-item ids)."""
    run_id, parent = fanned_out(store, tmp_path, ["a", "b"])
    subs = []
    for batch_id, item_id in [answered(store, run_id, "note", {"note": "n"}) for _ in range(2)]:
        store.settle_batch(batch_id, Settlement(completed=[item_id], fingerprint="f"), now=2.0)
        subs.append(item_id)
    assert joins.join(store, run_id, fan_job(tmp_path), now=3.0) == 1
    return run_id, parent, subs


def test_a_sub_item_sent_again_sends_its_joined_parent_back_to_wait_at_its_join_its_results_from_it_forgotten(
    tmp_path: Path, store: Store
) -> None:
    run_id, parent, subs = joined(store, tmp_path)
    store.rewind({subs[1]: "note"}, ["split", "note", "gather"], now=4.0)
    [row] = store.rows("SELECT state, stage, hold, output FROM items WHERE id = ?", [parent])
    assert (row["state"], row["stage"], row["hold"], row["output"]) == ("waiting", "gather", "join", None)
    assert left(store, parent) == 1
    assert [r["stage"] for r in store.rows("SELECT stage FROM results WHERE item_id = ?", [parent])] == ["split"]
    assert [r["kind"] for r in store.rows("SELECT kind FROM events WHERE item_id = ? AND at = 4.0", [parent])] == [
        None, "reopened"]
    assert views.status(store, "fan", now=4.0)["waiting_for_sub_items"] == 1


def test_the_sub_items_of_a_parent_a_person_failed_are_not_found_stale_its_failure_stands(
    tmp_path: Path, store: Store
) -> None:
    run_id, parent, subs = joined(store, tmp_path)

    def stale_sub_items() -> set[int]:
        found = store.stale_items(run_id, [], ["split", "note", "gather"], inside=[("note", "changed")])
        return {item.id for item in found if item.parent is not None}

    assert stale_sub_items() == set(subs)
    with store.write() as conn:
        conn.execute("UPDATE items SET state = 'failed', error_kind = 'rejected', updated_at = 5.0 WHERE id = ?",
                     (parent,))
    assert stale_sub_items() == set()


def test_a_parent_whose_input_changed_keeps_no_count_of_the_sub_items_it_lost(tmp_path: Path, store: Store) -> None:
    run_id, parent = fanned_out(store, tmp_path, ["a", "b", "c"])
    assert left(store, parent) == 3
    changed = posts(1)
    changed[0]["body"] = "an edited post"
    write_jsonl(tmp_path / "posts.jsonl", changed)
    add_all(store, jobs.load(tmp_path / "fan.toml"), now=2.0)
    [row] = store.rows("SELECT state, error_kind, sub_items_left FROM items WHERE id = ?", [parent])
    assert (row["state"], row["error_kind"], row["sub_items_left"]) == ("failed", "input_changed", None)
    assert store.rows("SELECT key FROM items WHERE parent_id IS NOT NULL") == []
