"""The events: a batch's forward path once per move, every other change per item, and histories that follow both."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scenes import counts_kept, counts_of_items, schema_version, states_of_items, states_told_by_events, v4_store
from support import add_all, make_job, posts

from runner import control, item_rows, lease, recovery
from runner.store import schema, views
from runner.jobs import Job
from runner.model import FailureKind
from runner.store import Settlement, Store

URL = "http://127.0.0.1:9/v1"
LEASE = ("test", "engine")
DEAD = lambda worker: False  # noqa: E731  (every worker found dead)


def prepared(tmp_path: Path, store: Store, records: list[dict[str, Any]], **limits: Any) -> tuple[Job, int]:
    """The job over ``records`` prepared at time 1, its lease held by ``LEASE``."""
    job = make_job(tmp_path, URL, records, **limits)
    run_id = add_all(store, job, now=1.0)
    lease.acquire(store, "test", token="engine", now=1.0)
    return job, run_id


def fields(store: Store, run_id: int, *names: str) -> list[tuple[Any, ...]]:
    """The fields ``names`` of every item of the run, in input order."""
    return [tuple(item[name] for name in names) for item in views.items(store, run_id)]


def results(store: Store, run_id: int) -> dict[str, str]:
    """The result saved for each completed item, by key."""
    return {row["key"]: row["result"] for row in views.results(store, run_id)}


def moves(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(r["batch_id"], r["from_state"], r["to_state"], r["items"], r["batch_move"]) for r in rows]


def test_a_batchs_forward_path_is_one_event_per_move_with_how_many_items_moved(tmp_path: Path, store: Store) -> None:
    job, run_id = prepared(tmp_path, store, posts(5))
    batch = store.claim_batch(run_id, max_items=5, max_chars=10**6, now=2.0, owner=LEASE[1])
    assert batch is not None
    started = store.start_batch(batch.id, lease=LEASE, max_attempts=3, now=3.0)
    answered = {item.id: "{}" for item in started[:4]}
    store.record_answer(batch.id, answered, raw="{}", answered=list(answered), now=4.0)
    store.settle_batch(batch.id, Settlement(
        completed=list(answered), retry={started[4].id: (FailureKind.ITEM_INVALID, "no result")}, not_before=9.0,
    ), now=5.0)
    events = [(r["key"], r["batch_id"], r["from_state"], r["to_state"], r["items"], r["at"])
              for r in views.history(store, run_id)]
    assert events == [
        (None, None, None, "pending", 5, 1.0),
        (None, batch.id, "pending", "queued", 5, 2.0),
        (None, batch.id, "queued", "running", 5, 3.0),
        (None, batch.id, "running", "received", 4, 4.0),
        (None, batch.id, "received", "completed", 4, 5.0),
        ("p004", batch.id, "running", "waiting", 1, 5.0),
    ]


def test_a_settlement_completes_only_items_whose_output_was_received(tmp_path: Path, store: Store) -> None:
    """Invariant 3 at the store: ``completed`` only over a committed ``received``, the saved output as its result."""
    job, run_id = prepared(tmp_path, store, posts(2))
    batch = store.claim_batch(run_id, max_items=2, max_chars=10**6, now=2.0, owner=LEASE[1])
    assert batch is not None
    answered, unanswered = store.start_batch(batch.id, lease=LEASE, max_attempts=3, now=3.0)
    store.record_answer(batch.id, {answered.id: '{"label":"x"}'}, raw="{}", answered=[answered.id], now=4.0)
    store.settle_batch(batch.id, Settlement(completed=[answered.id, unanswered.id]), now=5.0)
    assert fields(store, run_id, "key", "state") == [("p000", "completed"), ("p001", "running")]
    assert results(store, run_id) == {"p000": '{"label":"x"}'}
    assert counts_kept(store) == counts_of_items(store)


def test_adding_items_logs_one_event_for_the_new_ones_and_none_when_there_are_none(
    tmp_path: Path, store: Store
) -> None:
    prepared(tmp_path, store, posts(3))
    changed = posts(5)
    changed[0]["body"] = "an edited post"
    job = make_job(tmp_path, URL, changed)
    run_id = add_all(store, job, now=2.0)
    add_all(store, job, now=3.0)
    added = [(r["at"], r["items"]) for r in views.history(store, run_id) if r["from_state"] is None]
    assert added == [(1.0, 3), (2.0, 2)]


def test_an_items_history_shows_every_batch_it_was_in_including_after_a_split(tmp_path: Path, store: Store) -> None:
    job, run_id = prepared(tmp_path, store, posts(4))
    first = store.claim_batch(run_id, max_items=4, max_chars=10**6, now=2.0, owner=LEASE[1])
    assert first is not None
    started = store.start_batch(first.id, lease=LEASE, max_attempts=3, now=3.0)
    ids = [item.id for item in started]
    halves = store.settle_batch(first.id, Settlement(split=[ids[:2], ids[2:]]), now=4.0)
    half = halves[0]
    store.start_batch(half.id, lease=LEASE, max_attempts=3, now=5.0)
    store.record_answer(half.id, {ids[0]: "{}", ids[1]: "{}"}, raw="{}", now=6.0)
    store.settle_batch(half.id, Settlement(
        completed=[ids[0]], retry={ids[1]: (FailureKind.ITEM_INVALID, "no label")}, not_before=7.0,
    ), now=7.0)
    again = store.claim_batch(run_id, max_items=4, max_chars=10**6, now=8.0, owner=LEASE[1])
    assert again is not None and again.size == 1
    store.start_batch(again.id, lease=LEASE, max_attempts=3, now=9.0)
    store.record_answer(again.id, {ids[1]: "{}"}, raw="{}", now=10.0)
    store.settle_batch(again.id, Settlement(completed=[ids[1]]), now=11.0)

    assert [b["parent_id"] for b in views.batches(store, run_id)] == [
        None, first.id, first.id, None,
    ]
    assert moves(views.item_history(store, ids[1])) == [
        (first.id, "pending", "queued", 4, 1),
        (first.id, "queued", "running", 4, 1),
        (half.id, "running", "queued", 2, 1),
        (half.id, "queued", "running", 2, 1),
        (half.id, "running", "received", 2, 1),
        (half.id, "received", "completed", 1, 1),
        (half.id, "received", "waiting", 1, 0),
        (again.id, "waiting", "queued", 1, 1),
        (again.id, "queued", "running", 1, 1),
        (again.id, "running", "received", 1, 1),
        (again.id, "received", "completed", 1, 1),
    ]
    # The other half was split off too, and is still queued: its history follows it to its parent.
    assert moves(views.item_history(store, ids[3])) == [
        (first.id, "pending", "queued", 4, 1),
        (first.id, "queued", "running", 4, 1),
        (halves[1].id, "running", "queued", 2, 1),
    ]


def test_the_events_and_counts_account_for_every_item_through_failures_recovery_and_a_persons_hand(
    tmp_path: Path, store: Store
) -> None:
    records = posts(12, groups=2)
    records[0]["body"] = "x" * 500
    job, run_id = prepared(tmp_path, store, records, max_chars=400)

    def claim(at: float) -> int:
        batch = store.claim_batch(run_id, max_items=3, max_chars=400, now=at, owner=LEASE[1])
        assert batch is not None
        return batch.id

    answered = claim(2.0)  # the oversized item fails here, with no call
    items = store.start_batch(answered, lease=LEASE, max_attempts=3, now=2.0)
    store.record_answer(answered, {items[0].id: "{}"}, raw="{}", answered=[items[0].id], now=3.0)
    store.settle_batch(answered, Settlement(
        completed=[items[0].id], failed={items[1].id: (FailureKind.BAD_REQUEST, "refused", True)},
        retry={items[2].id: (FailureKind.TRANSPORT, "reset")}, not_before=4.0,
    ), now=3.0)
    sent = claim(3.0)
    store.start_batch(sent, lease=LEASE, max_attempts=3, now=3.0)
    claim(3.0)  # formed, never sent
    store.recover(run_id, now=5.0, lives=DEAD)  # unsent back to pending; sent held for a person
    assert recovery.confirm(store, "test", now=6.0)[recovery.Case.RESUBMIT] == 2
    assert control.retry(store, "test", now=7.0).again == 2
    edited = [dict(r, body=f"edited {r['body']}", month="2026-09") for r in records]
    add_all(store, job, item_rows.items(make_job(tmp_path, URL, edited, max_chars=400)), now=8.0)

    assert states_told_by_events(store) == states_of_items(store)
    assert counts_kept(store) == counts_of_items(store)
    assert {state for (_, _, state) in states_of_items(store)} == {"pending", "waiting", "failed"}


def test_a_queued_item_whose_input_changed_leaves_its_batch_for_pending(tmp_path: Path, store: Store) -> None:
    job, run_id = prepared(tmp_path, store, posts(3))
    batch = store.claim_batch(run_id, max_items=3, max_chars=10**6, now=2.0, owner=LEASE[1])
    assert batch is not None
    edited = posts(3)
    edited[1].update(body="an edited post", month="2026-05")
    add_all(store, job, item_rows.items(make_job(tmp_path, URL, edited)), now=3.0)
    started = store.start_batch(batch.id, lease=LEASE, max_attempts=3, now=4.0)
    assert [item.key for item in started] == ["p000", "p002"]
    assert fields(store, run_id, "key", "state", "batch_id")[1] == ("p001", "pending", None)
    assert views.counts(store, run_id)["2026-05"]["pending"] == 1


def test_a_migrated_v4_store_keeps_its_events_readable(tmp_path: Path) -> None:
    v4_store(tmp_path / "runs.db")
    with Store(tmp_path / "runs.db") as store:
        assert schema_version(store.path) == schema.SCHEMA_VERSION
        run_id = store.run_id("old")
        old = [(r["from_state"], r["to_state"], r["items"], r["batch_move"]) for r in views.item_history(store, 1)]
        assert old == [
            (None, "pending", 1, 0), ("pending", "queued", 1, 0), ("queued", "running", 1, 0),
            ("running", "received", 1, 0), ("received", "completed", 1, 0),
        ]
        assert [(e["key"], e["to_state"]) for e in views.event_tail(store, run_id, limit=2)] == [
            ("k1", "completed"), ("k0", "completed"),
        ]
        store.recover(run_id, now=6.0, lives=DEAD)
        recovery.confirm(store, "old", now=7.0)
        lease.acquire(store, "old", token="engine", now=8.0)
        batch = store.claim_batch(run_id, max_items=5, max_chars=100, now=8.0, owner=LEASE[1])
        assert batch is not None
        store.start_batch(batch.id, lease=("old", "engine"), max_attempts=3, now=9.0)
        history = [(r["batch_id"], r["from_state"], r["to_state"], r["batch_move"])
                   for r in views.item_history(store, 3)]
        assert history[-3:] == [
            (1, "running", "pending", 0), (batch.id, "pending", "queued", 1), (batch.id, "queued", "running", 1),
        ]
        assert states_told_by_events(store) == states_of_items(store)
        assert counts_kept(store) == counts_of_items(store)


def test_an_item_received_without_a_usable_result_is_never_completed(tmp_path: Path, store: Store) -> None:
    """Invariant 3 again: an answer saved for an item that held no result of it gives nothing to complete."""
    job, run_id = prepared(tmp_path, store, posts(2))
    batch = store.claim_batch(run_id, max_items=2, max_chars=10**6, now=2.0, owner=LEASE[1])
    assert batch is not None
    answered, unusable = store.start_batch(batch.id, lease=LEASE, max_attempts=3, now=3.0)
    store.record_answer(batch.id, {answered.id: '{"label":"x"}'}, raw='{"results": "broken"}', now=4.0)
    store.settle_batch(batch.id, Settlement(completed=[answered.id, unusable.id]), now=5.0)
    assert fields(store, run_id, "key", "state", "output") == [
        ("p000", "completed", '{"label":"x"}'), ("p001", "received", None),
    ]
    assert results(store, run_id) == {"p000": '{"label":"x"}'}
    assert [b["answer"] for b in views.batches(store, run_id)] == ['{"results": "broken"}']
