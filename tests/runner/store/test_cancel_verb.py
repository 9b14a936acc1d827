"""A person's cancel, as the store makes it: items not in flight fail at once, those in flight when their batch ends.

Every backend runs this file (``conftest.BACKENDS``), through the verbs and the read model.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import commands_given
from test_contract import DEAD, LEASE, prepared, rule, started, states, submitted

from runner import control
from runner.errors import RunError
from runner.model import FailureKind, Settlement
from runner.store import Store, views


def kinds(store: Store) -> dict[str, str]:
    return {f["key"]: f["kind"] for f in views.failures(store, "test")}


def test_cancel_fails_pending_queued_and_waiting_items_at_once(tmp_path: Path, store: Store) -> None:
    _, run_id = prepared(tmp_path, store)
    store.claim_batch(run_id, max_items=2, max_chars=10**6, now=2.0, owner=LEASE[1])
    assert store.cancel(run_id, keys=[], now=3.0, engine_alive=True) == (5, 0)
    assert set(states(store, run_id).values()) == {"failed"}
    assert set(kinds(store).values()) == {FailureKind.CANCELLED}
    assert {f["retryable"] for f in views.failures(store, "test")} == {True}


def test_cancel_of_keys_fails_only_those_keys(tmp_path: Path, store: Store) -> None:
    _, run_id = prepared(tmp_path, store)
    assert store.cancel(run_id, keys=["p001", "p003"], now=3.0, engine_alive=True) == (2, 0)
    assert states(store, run_id) == {"p000": "pending", "p001": "failed", "p002": "pending", "p003": "failed",
                                     "p004": "pending"}


def test_cancel_of_unknown_keys_is_refused_and_changes_nothing(tmp_path: Path, store: Store) -> None:
    _, run_id = prepared(tmp_path, store)
    with pytest.raises(RunError, match="has no item 'nope'"):
        store.cancel(run_id, keys=["p000", "nope"], now=3.0, engine_alive=True)
    assert set(states(store, run_id).values()) == {"pending"}


def test_items_in_flight_are_cancelled_when_their_batch_settles_and_an_answer_that_completes_one_keeps_it(
    tmp_path: Path, store: Store
) -> None:
    _, run_id = prepared(tmp_path, store)
    batch, (done, again, split) = started(store, run_id)
    assert store.cancel(run_id, keys=[], now=4.0, engine_alive=True) == (2, 3)
    assert states(store, run_id)["p000"] == "running"
    store.record_answer(batch.id, {done: '{"label": "x"}'}, raw="{}", now=5.0)
    store.settle_batch(batch.id, Settlement(completed=[done], retry={again: (FailureKind.ITEM_INVALID, "no label")},
                                            split=[[split]]), now=6.0)
    assert states(store, run_id) == {"p000": "completed", "p001": "failed", "p002": "failed", "p003": "failed",
                                     "p004": "failed"}
    failed = {f["key"]: f["message"] for f in views.failures(store, "test")}
    assert failed["p001"] == "cancelled by a person; its batch finished: no label"


def test_a_batch_all_of_whose_items_were_cancelled_in_flight_says_so_and_a_partly_cancelled_one_does_not(
    tmp_path: Path, store: Store
) -> None:
    _, run_id = prepared(tmp_path, store)
    batch = submitted(store, run_id)
    store.cancel(run_id, keys=["p000"], now=4.0, engine_alive=True)
    assert not store.all_cancelled(batch.id)
    store.cancel(run_id, keys=["p001", "p002"], now=4.0, engine_alive=True)
    assert store.all_cancelled(batch.id)


def test_with_no_live_engine_items_left_running_fail_at_once_as_maybe_billed(tmp_path: Path, store: Store) -> None:
    _, run_id = prepared(tmp_path, store)
    started(store, run_id)
    assert store.cancel(run_id, keys=[], now=4.0, engine_alive=False) == (5, 0)
    rows = {row["key"]: row for row in views.items(store, run_id)}
    assert {rows[key]["maybe_paid"] for key in ("p000", "p001", "p002")} == {1}
    assert set(kinds(store).values()) == {FailureKind.CANCELLED}


def test_a_recovery_fails_the_cancelled_items_a_stopped_engine_left_instead_of_holding_them(
    tmp_path: Path, store: Store
) -> None:
    _, run_id = prepared(tmp_path, store)
    started(store, run_id)
    store.cancel(run_id, keys=["p000"], now=4.0, engine_alive=True)
    store.recover(run_id, now=5.0, lives=DEAD)
    assert kinds(store) == {"p000": FailureKind.CANCELLED}
    assert [item["key"] for item in store.held_items(run_id)] == ["p001", "p002"]


def test_retry_does_not_retry_cancelled_items_unless_named(tmp_path: Path, store: Store) -> None:
    _, run_id = prepared(tmp_path, store)
    store.cancel(run_id, keys=["p000", "p001"], now=2.0, engine_alive=True)
    assert store.retry_failed(run_id, kind=None, keys=[], now=3.0).again == 0
    assert store.retry_failed(run_id, kind=None, keys=["p000"], now=3.0).again == 1
    assert store.retry_failed(run_id, kind=FailureKind.CANCELLED, keys=[], now=3.0).again == 1
    assert set(states(store, run_id).values()) == {"pending"}


def test_a_cancel_is_logged_as_a_command(tmp_path: Path, store: Store) -> None:
    _, run_id = prepared(tmp_path, store)
    store.cancel(run_id, keys=["p002"], now=2.0, engine_alive=True)
    assert store.cancel(run_id, keys=["p002"], now=3.0, engine_alive=True) == (0, 0)
    assert commands_given(store) == ["cancel"]


def test_a_held_batch_holds_its_cancelled_items_too_while_its_task_may_still_bill(tmp_path: Path, store: Store) -> None:
    _, run_id = prepared(tmp_path, store)
    batch = submitted(store, run_id)
    store.cancel(run_id, keys=["p001"], now=4.0, engine_alive=True)
    store.hold(batch.id, now=5.0)  # its task could not be polled
    assert kinds(store) == {} and [item["key"] for item in store.held_items(run_id)] == ["p000", "p001", "p002"]
    assert store.cancel(run_id, keys=["p001"], now=6.0, engine_alive=True) == (0, 1)  # released to be polled
    assert [b.id for b in store.resumable(run_id)] == [batch.id]


def test_a_step_is_not_spent_on_a_batch_whose_items_were_all_cancelled(tmp_path: Path, store: Store) -> None:
    _, run_id = prepared(tmp_path, store)
    batch = store.claim_batch(run_id, max_items=2, max_chars=10**6, now=2.0, owner=LEASE[1])
    assert batch is not None
    control.pause(store, "test", now=2.5)
    control.step(store, "test", now=2.6)
    store.cancel(run_id, keys=["p000", "p001"], now=3.0, engine_alive=True)
    assert store.start_batch(batch.id, lease=LEASE, max_attempts=3, now=4.0, step=True) == []
    assert store.control(run_id).steps == 1


def test_a_run_cancelled_whole_still_reads_cancelled_after_its_compensations_ran(tmp_path: Path, store: Store) -> None:
    _, run_id = prepared(tmp_path, store)
    store.cancel(run_id, keys=[], now=3.0, engine_alive=True)
    claim, _ = store.claim_compensations(run_id, now=4.0)  # what run.cancel() with on_cancel does next
    store.compensated(claim, called=5, errors=0, now=4.0)
    assert views.standing(store, "test", now=5.0).state.value == "cancelled by a person"


def test_cancelled_items_are_claimed_for_their_compensation_once_per_cancel(tmp_path: Path, store: Store) -> None:
    _, run_id = prepared(tmp_path, store)
    store.cancel(run_id, keys=["p000", "p001"], now=3.0, engine_alive=True)
    claim, due = store.claim_compensations(run_id, now=4.0)
    assert [row["key"] for row in due] == ["p000", "p001"]
    assert store.claim_compensations(run_id, now=4.5) == (0, [])  # claimed, not yet ended: not claimed again
    store.retry_failed(run_id, kind=None, keys=["p000"], now=5.0)
    store.cancel(run_id, keys=["p000"], now=6.0, engine_alive=True)
    assert [row["key"] for row in store.claim_compensations(run_id, now=7.0)[1]] == ["p000"]  # a new cancel


def test_a_cancel_with_no_live_engine_keeps_a_received_answer_for_the_next_engine_to_validate(
    tmp_path: Path, store: Store
) -> None:
    _, run_id = prepared(tmp_path, store)
    batch, (done, _, _) = started(store, run_id)
    store.record_answer(batch.id, {done: '{"label": "x"}'}, raw="{}", now=5.0, answered=[done])  # paid, not validated
    store.leave_run("test", token="engine")
    assert store.cancel(run_id, keys=["p000"], now=6.0, engine_alive=False) == (0, 1)
    store.recover(run_id, now=7.0, lives=DEAD)
    assert views.item(store, run_id, "p000")["state"] == "received"
    (saved,) = store.received_items(run_id, max_attempts=3)
    assert saved[:2] == (batch.id, '{"label": "x"}')
    store.settle_batch(batch.id, Settlement(completed=[done]), now=8.0)  # validated: it completes, as paid for
    assert views.item(store, run_id, "p000")["state"] == "completed"


def test_a_cancel_with_no_live_engine_leaves_a_submitted_task_running_for_the_next_engine_to_cancel_upstream(
    tmp_path: Path, store: Store
) -> None:
    _, run_id = prepared(tmp_path, store)
    batch = submitted(store, run_id)  # upstream task batch_1 running, its id saved
    store.leave_run("test", token="engine")
    assert store.cancel(run_id, keys=[], now=6.0, engine_alive=False) == (2, 3)
    assert states(store, run_id) == {"p000": "running", "p001": "running", "p002": "running",
                                     "p003": "failed", "p004": "failed"}
    assert store.retry_failed(run_id, kind=FailureKind.CANCELLED, keys=["p000"], now=6.5).again == 0  # never sent twice
    store.recover(run_id, now=7.0, lives=DEAD)
    (resumable,) = store.resumable(run_id)  # the next engine polls the task at once, with no person's confirmation
    assert resumable.id == batch.id and not store.held_items(run_id)
    store.join_run("test", token="next", pid=2, host="here", now=8.0, choose=rule("next", 8.0))
    assert store.take_batch(batch.id, token="next")
    assert len(store.resume_batch(batch.id, lease=("test", "next"), max_attempts=3, now=8.0)) == 3
    assert store.all_cancelled(batch.id)


def test_a_cancel_of_items_held_for_a_person_releases_their_upstream_task_to_be_polled_and_cancelled(
    tmp_path: Path, store: Store
) -> None:
    _, run_id = prepared(tmp_path, store)
    batch = submitted(store, run_id)
    store.hold(batch.id, now=4.0)
    assert store.cancel(run_id, keys=["p000", "p001", "p002"], now=5.0, engine_alive=True) == (0, 3)
    assert [b.id for b in store.resumable(run_id)] == [batch.id] and not store.held_items(run_id)
    assert store.cancel(run_id, keys=[], now=6.0, engine_alive=False) == (2, 0)  # those three are released already


def test_a_recovery_releases_the_cancelled_items_of_a_submitted_task_to_be_polled_instead_of_failing_them(
    tmp_path: Path, store: Store
) -> None:
    _, run_id = prepared(tmp_path, store)
    batch = submitted(store, run_id)
    store.cancel(run_id, keys=["p000", "p001", "p002"], now=4.0, engine_alive=True)  # its engine then dies
    store.recover(run_id, now=5.0, lives=DEAD)
    assert kinds(store) == {} and [b.id for b in store.resumable(run_id)] == [batch.id]


def test_a_cancel_with_no_live_engine_of_a_task_whose_create_was_sent_leaves_it_to_be_looked_for(
    tmp_path: Path, store: Store
) -> None:
    _, run_id = prepared(tmp_path, store)
    batch = store.claim_batch(run_id, max_items=2, max_chars=10**6, now=2.0, owner=LEASE[1])
    assert batch is not None
    store.start_batch(batch.id, lease=LEASE, max_attempts=3, now=3.0, intent=False)
    store.mark_intent(batch.id, now=3.0)
    store.mark_create_sent(batch.id, lands_by=40.0)  # its answer lost with the engine: the task may exist
    store.leave_run("test", token="engine")
    assert store.cancel(run_id, keys=[], now=6.0, engine_alive=False) == (3, 2)
    assert [b.id for b in store.resumable(run_id)] == [batch.id] and store.task_id(batch.id) is None
