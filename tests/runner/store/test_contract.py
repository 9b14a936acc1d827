"""The Store protocol's contract: each verb is one transaction that makes durable what a rule decided.

Every backend runs this file (``conftest.BACKENDS``); it reads what a verb
did through the verbs themselves and the read model, never through SQL.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from support import add_all, make_job, posts

from runner.errors import RunError
from runner.jobs import Job
from runner.model import Batch, BreakerState, Claim, FailureKind, Holder, Settlement
from runner.rules.breaker import Control, Open
from runner.store import Store, views
from runner import lease
from runner.store.leases import Chooser, Role
from runner.store.protocol import RunStore

URL = "http://127.0.0.1:9/v1"
LEASE = ("test", "engine")
#: Judges of workers: every one alive, every one dead.
ALIVE: Callable[[Holder], bool] = lambda worker: True
DEAD: Callable[[Holder], bool] = lambda worker: False
#: Forming the next batch: of the one stage of a job without [[stage]] (named after its provider kind).
CLAIMS = [Claim("openai-chat", max_items=3, max_chars=10**6)]


def rule(token: str, now: float) -> Chooser:
    """Who sets the run up, as the worker ``token`` joining at ``now`` judges it (``runner.lease``)."""
    return lambda setting_up, workers: lease.setup_role(token, setting_up, workers, now)


def prepared(tmp_path: Path, store: Store, count: int = 5) -> tuple[Job, int]:
    job = make_job(tmp_path, URL, posts(count))
    run_id = add_all(store, job, now=1.0)
    store.join_run("test", token="engine", pid=1, host="here", now=1.0, choose=rule("engine", 1.0))
    return job, run_id


def states(store: Store, run_id: int) -> dict[str, str]:
    return {key: views.item(store, run_id, key)["state"] for key in (f"p{i:03d}" for i in range(5))
            if views.item(store, run_id, key) is not None}


def started(store: Store, run_id: int, *, now: float = 2.0, lease: tuple[str, str] = LEASE) -> tuple[Batch, list[int]]:
    batch = store.claim_batch(run_id, max_items=3, max_chars=10**6, now=now, owner=lease[1])
    assert batch is not None
    return batch, [item.id for item in store.start_batch(batch.id, lease=lease, max_attempts=3, now=now + 1)]


def submitted(store: Store, run_id: int) -> Batch:
    """A batch of three submitted as an upstream task (``batch_1``), at 3.0, by the engine holding the run."""
    batch = store.claim_batch(run_id, max_items=3, max_chars=10**6, now=2.0, owner="engine")
    assert batch is not None
    store.start_batch(batch.id, lease=LEASE, max_attempts=3, now=3.0, intent=False)
    store.mark_intent(batch.id, now=3.0)
    store.save_task_id(batch.id, "batch_1")
    return batch


def test_the_sqlite_store_implements_the_protocol(store: Store) -> None:
    assert isinstance(store, RunStore)


def test_preparing_a_run_adds_its_items_as_pending_and_finds_it_by_name(tmp_path: Path, store: Store) -> None:
    job, run_id = prepared(tmp_path, store)
    assert (store.run_id("test"), store.run_names(), store.job("test")) == (run_id, ["test"], job)
    assert set(states(store, run_id).values()) == {"pending"}
    with pytest.raises(RunError, match="no run named 'other'"):
        store.run_id("other")


def test_a_claim_forms_a_queued_batch_and_only_its_owner_starts_it(tmp_path: Path, store: Store) -> None:
    _, run_id = prepared(tmp_path, store)
    store.join_run("test", token="second", pid=2, host="here", now=1.5, choose=rule("second", 1.5))
    batch = store.claim_batch(run_id, max_items=3, max_chars=10**6, now=2.0, owner="engine")
    assert batch is not None and batch.size == 3
    assert store.start_batch(batch.id, lease=("test", "second"), max_attempts=3, now=3.0) == []
    assert store.start_batch(batch.id, lease=("test", "not a worker"), max_attempts=3, now=3.0) == []
    items = store.start_batch(batch.id, lease=LEASE, max_attempts=3, now=3.0)
    assert [(item.key, item.attempts_left) for item in items] == [("p000", 2), ("p001", 2), ("p002", 2)]
    assert list(states(store, run_id).values()) == ["running"] * 3 + ["pending"] * 2


def test_an_answer_is_received_then_settled_as_the_verdict_says(tmp_path: Path, store: Store) -> None:
    _, run_id = prepared(tmp_path, store)
    batch, (done, again, failed) = started(store, run_id)
    store.record_answer(batch.id, {done: '{"label": "x"}'}, raw="{}", now=4.0)
    store.settle_batch(batch.id, Settlement(
        completed=[done], retry={again: (FailureKind.ITEM_INVALID, "no label")},
        failed={failed: (FailureKind.BAD_REQUEST, "refused", False)}, not_before=9.0,
    ), now=5.0)
    assert states(store, run_id) == {"p000": "completed", "p001": "waiting", "p002": "failed",
                                     "p003": "pending", "p004": "pending"}
    assert views.results(store, run_id) == [{"key": "p000", "group": "2026-01", "result": '{"label": "x"}'}]


def test_an_item_that_gives_up_fails_retryable_with_its_tally(tmp_path: Path, store: Store) -> None:
    _, run_id = prepared(tmp_path, store)
    batch, (first, *_) = started(store, run_id)
    store.settle_batch(batch.id, Settlement(gave_up={first: (FailureKind.TRANSPORT, "reset (gave up")}), now=5.0)
    item = views.item(store, run_id, "p000")
    assert item is not None
    assert (item["state"], item["retryable"], item["message"]) == ("failed", 1, "reset (gave up; attempts: 1, paid calls: 0)")


def test_a_split_queues_new_batches_that_know_their_parent(tmp_path: Path, store: Store) -> None:
    _, run_id = prepared(tmp_path, store)
    batch, ids = started(store, run_id)
    halves = store.settle_batch(batch.id, Settlement(split=[ids[:2], ids[2:]]), now=5.0)
    assert [(half.size, half.round) for half in halves] == [(2, 1), (1, 1)]
    assert list(states(store, run_id).values())[:3] == ["queued"] * 3


def test_advance_saves_a_batch_starts_the_next_and_forms_one_more_in_one_commit(tmp_path: Path, store: Store) -> None:
    _, run_id = prepared(tmp_path, store, count=5)
    first, ids = started(store, run_id)
    store.record_answer(first.id, {i: "{}" for i in ids}, raw="{}", now=4.0)
    second = store.claim_batch(run_id, max_items=1, max_chars=10**6, now=4.0, owner=LEASE[1])
    assert second is not None
    items, formed = store.advance(run_id, second, settled=(first, Settlement(completed=ids)), lease=LEASE,
                                  max_attempts=3, now=5.0, step=False, intent=True, claims=CLAIMS)
    assert [item.key for item in items] == ["p003"] and [batch.size for batch in formed] == [1]
    assert list(states(store, run_id).values()) == ["completed"] * 3 + ["running", "queued"]


def test_recovery_gives_back_what_was_never_sent_and_holds_what_was(tmp_path: Path, store: Store) -> None:
    _, run_id = prepared(tmp_path, store)
    started(store, run_id)
    store.claim_batch(run_id, max_items=3, max_chars=10**6, now=4.0, owner="engine")
    store.recover(run_id, now=5.0, lives=DEAD)
    assert list(states(store, run_id).values()) == ["running"] * 3 + ["pending"] * 2
    assert [row["key"] for row in store.held_items(run_id)] == ["p000", "p001", "p002"]


def test_a_recovery_counts_each_call_it_holds_as_maybe_paid_once(tmp_path: Path, store: Store) -> None:
    _, run_id = prepared(tmp_path, store)
    started(store, run_id)
    store.recover(run_id, now=5.0, lives=DEAD)
    store.recover(run_id, now=6.0, lives=DEAD)  # a second engine finds them held already
    assert [row["maybe_paid"] for row in views.items(store, run_id)] == [1, 1, 1, 0, 0]
    assert views.status(store, "test", now=7.0)["maybe_paid"] == 3


def test_confirming_releases_held_items_to_be_sent_again_and_counts_each_case(tmp_path: Path, store: Store) -> None:
    _, run_id = prepared(tmp_path, store)
    started(store, run_id)
    store.recover(run_id, now=5.0, lives=DEAD)
    assert store.confirm(run_id, keys=["p001"], now=6.0) == (0, 0, 1)
    assert states(store, run_id)["p001"] == "pending" and len(store.held_items(run_id)) == 2


def test_a_worker_cut_short_holds_only_its_own_calls_while_it_is_one_of_the_runs(tmp_path: Path, store: Store) -> None:
    _, run_id = prepared(tmp_path, store)
    started(store, run_id)
    store.join_run("test", token="second", pid=2, host="here", now=4.0, choose=rule("second", 4.0))
    store.recover(run_id, now=5.0, lease=("test", "second"))  # the first worker's batch, not this one's
    assert list(states(store, run_id).values()) == ["running"] * 3 + ["pending"] * 2 and not store.held_items(run_id)
    store.leave_run("test", token="second")
    started(store, run_id, now=6.0, lease=("test", "second"))  # no longer one of the run's: starts nothing
    store.recover(run_id, now=7.0, lease=("test", "second"))
    assert list(states(store, run_id).values()) == ["running"] * 3 + ["queued"] * 2
    store.recover(run_id, now=8.0, lease=LEASE)
    assert [row["key"] for row in store.held_items(run_id)] == ["p000", "p001", "p002"]


def test_recovery_takes_over_only_the_batches_of_workers_found_dead(tmp_path: Path, store: Store) -> None:
    _, run_id = prepared(tmp_path, store)
    store.join_run("test", token="second", pid=2, host="here", now=1.5, choose=rule("second", 1.5))
    started(store, run_id)
    started(store, run_id, now=4.0, lease=("test", "second"))
    assert store.recover(run_id, now=6.0, lives=lambda worker: worker.token != "engine") == 1
    assert [row["key"] for row in store.held_items(run_id)] == ["p000", "p001", "p002"]
    assert list(states(store, run_id).values())[3:] == ["running"] * 2
    assert [worker.token for worker in store.workers("test")] == ["second"]
    assert store.recover(run_id, now=7.0, lives=lambda worker: worker.token != "engine") == 0


def worker_events(store: Store, run_id: int) -> list[tuple[int, str]]:
    """The run's own events that say a worker was found dead: the items each moved (none), and its words."""
    return [(row["items"], row["message"]) for row in views.history(store, run_id) if row["kind"] == "worker_dead"]


def test_a_worker_found_dead_leaves_one_event_saying_where_it_ran_when_it_last_beat_and_what_its_batches_became(
    tmp_path: Path, store: Store
) -> None:
    _, run_id = prepared(tmp_path, store)
    started(store, run_id)
    store.claim_batch(run_id, max_items=3, max_chars=10**6, now=4.0, owner="engine")
    store.recover(run_id, now=5.0, lives=DEAD)
    store.recover(run_id, now=6.0, lives=DEAD)  # no worker left to find dead: nothing more to say
    beat = time.strftime("%H:%M:%S", time.localtime(1.0))
    assert worker_events(store, run_id) == [
        (0, f"here:1 stopped beating at {beat}; its 2 batches taken over: 2 items back to pending, "
            "3 held for confirmation")]


def test_a_worker_found_dead_holding_no_batch_leaves_an_event_that_says_so(tmp_path: Path, store: Store) -> None:
    _, run_id = prepared(tmp_path, store)
    store.recover(run_id, now=5.0, lives=DEAD)
    beat = time.strftime("%H:%M:%S", time.localtime(1.0))
    assert worker_events(store, run_id) == [(0, f"here:1 stopped beating at {beat}; it held no batch")]


def test_items_left_running_are_those_neither_held_nor_confirmed_with_no_engine_alive(
    tmp_path: Path, store: Store
) -> None:
    _, run_id = prepared(tmp_path, store)
    batch = submitted(store, run_id)
    assert views.left_running(store, "test", now=3.0) == 0  # its engine is alive
    store.leave_run("test", token="engine")
    assert views.left_running(store, "test", now=3.0) == 3
    store.hold(batch.id, now=4.0)
    assert views.left_running(store, "test", now=4.0) == 0  # held: confirm shows them
    store.confirm(run_id, keys=[], now=5.0)
    assert views.left_running(store, "test", now=5.0) == 0  # confirmed: the next engine polls their task


def test_a_confirm_or_retry_that_releases_nothing_logs_no_command(tmp_path: Path, store: Store) -> None:
    _, run_id = prepared(tmp_path, store)
    assert store.confirm(run_id, keys=[], now=6.0) == (0, 0, 0)
    assert store.retry_failed(run_id, kind=None, keys=[], now=6.0).again == 0
    assert views.command_tail(store, run_id, limit=5) == []


def test_a_held_task_confirmed_is_resumed_without_a_new_attempt(tmp_path: Path, store: Store) -> None:
    _, run_id = prepared(tmp_path, store)
    batch = submitted(store, run_id)
    store.hold(batch.id, now=4.0)
    assert store.confirm(run_id, keys=[], now=5.0) == (3, 0, 0)
    (resumable,) = store.resumable(run_id)
    assert store.take_batch(resumable.id, token="engine")
    items = store.resume_batch(resumable.id, lease=LEASE, max_attempts=3, now=6.0)
    assert [item.attempts_left for item in items] == [2, 2, 2] and store.task_id(batch.id) == "batch_1"


def test_a_confirmed_batch_is_taken_by_one_worker_alone(tmp_path: Path, store: Store) -> None:
    _, run_id = prepared(tmp_path, store)
    batch = submitted(store, run_id)
    store.join_run("test", token="second", pid=2, host="here", now=3.5, choose=rule("second", 3.5))
    store.recover(run_id, now=4.0, lives=lambda worker: worker.token != "engine")  # its owner died
    store.confirm(run_id, keys=[], now=5.0)
    store.join_run("test", token="third", pid=3, host="here", now=5.5, choose=rule("third", 5.5))
    assert store.take_batch(batch.id, token="second") and not store.take_batch(batch.id, token="third")
    assert store.resume_batch(batch.id, lease=("test", "third"), max_attempts=3, now=6.0) == []
    assert len(store.resume_batch(batch.id, lease=("test", "second"), max_attempts=3, now=6.0)) == 3


def test_a_person_retries_failed_items_with_a_fresh_attempt_budget(tmp_path: Path, store: Store) -> None:
    _, run_id = prepared(tmp_path, store)
    batch, ids = started(store, run_id)
    store.settle_batch(batch.id, Settlement(failed={i: (FailureKind.AUTH, "401", True) for i in ids}), now=5.0)
    assert store.retry_failed(run_id, kind="billing", keys=[], now=6.0).again == 0
    assert store.retry_failed(run_id, kind="auth", keys=["p000"], now=6.0).again == 1
    assert store.retry_failed(run_id, kind=None, keys=[], now=6.0).again == 2
    assert list(states(store, run_id).values()) == ["pending"] * 5


def test_a_retry_or_a_confirm_naming_a_key_the_run_does_not_have_is_refused_and_changes_nothing(
    tmp_path: Path, store: Store
) -> None:
    _, run_id = prepared(tmp_path, store)
    batch, ids = started(store, run_id)
    store.settle_batch(batch.id, Settlement(failed={i: (FailureKind.AUTH, "401", True) for i in ids}), now=5.0)
    before = states(store, run_id)
    with pytest.raises(RunError, match=r"^run 'test' has no item 'nope': nothing was changed$"):
        store.retry_failed(run_id, kind=None, keys=["p000", "nope"], now=6.0)
    with pytest.raises(RunError, match=r"^run 'test' has no item 'nope': nothing was changed$"):
        store.confirm(run_id, keys=["nope"], now=6.0)
    assert states(store, run_id) == before and "failed" in before.values()


def test_the_breaker_moves_with_the_batch_that_moved_it_and_a_command_is_logged(tmp_path: Path, store: Store) -> None:
    _, run_id = prepared(tmp_path, store)
    batch, ids = started(store, run_id)
    store.settle_batch(batch.id, Settlement(breaker=Open(FailureKind.AUTH, "auth: 401")), now=5.0)
    assert store.control(run_id) == Control(BreakerState.OPEN, "auth: 401", kind=FailureKind.AUTH)
    paused = store.command(run_id, "pause", lambda control: replace(control, paused=True), now=6.0)
    assert paused.paused and store.control(run_id) == paused
    assert [row["command"] for row in views.command_tail(store, run_id, limit=5)] == ["pause"]


def test_a_second_worker_waits_while_the_first_sets_the_run_up_then_joins_it(tmp_path: Path, store: Store) -> None:
    prepared(tmp_path, store)
    assert store.workers("test") == [Holder(pid=1, host="here", heartbeat_at=1.0, token="engine")]
    assert store.join_run("test", token="second", pid=2, host="here", now=2.0, choose=rule("second", 2.0)) is Role.WAIT
    assert store.take_setup("test", token="second", choose=rule("second", 2.0)) is Role.WAIT
    store.end_setup("test", token="engine")
    assert store.take_setup("test", token="second", choose=rule("second", 3.0)) is Role.JOIN
    assert store.beat("test", token="second", now=3.0) and not store.beat("test", token="third", now=3.0)
    store.leave_run("test", token="engine")
    assert [worker.token for worker in store.workers("test")] == ["second"]


def test_a_setup_left_by_a_dead_worker_is_taken_over(tmp_path: Path, store: Store) -> None:
    prepared(tmp_path, store)
    store.join_run("test", token="second", pid=2, host="here", now=2.0, choose=rule("second", 2.0))
    assert store.take_setup("test", token="second", choose=rule("second", 100.0)) is Role.SET_UP  # engine: silent


def test_a_duplicate_task_is_kept_once_as_an_unknown_charge(tmp_path: Path, store: Store) -> None:
    _, run_id = prepared(tmp_path, store)
    batch, _ = started(store, run_id)
    assert store.record_duplicate(batch.id, "batch_2", cancelled=True, message="second task", now=4.0)
    assert not store.record_duplicate(batch.id, "batch_2", cancelled=True, message="second task", now=5.0)
    assert [row["upstream_id"] for row in views.duplicates(store, run_id)] == ["batch_2"]
    item = views.item(store, run_id, "p000")
    assert item is not None and item["maybe_paid"] == 1


def test_a_new_input_fails_what_was_sent_and_gives_what_was_not_back_to_pending(tmp_path: Path, store: Store) -> None:
    job, run_id = prepared(tmp_path, store)
    batch, (done, failed, _) = started(store, run_id)
    store.record_answer(batch.id, {done: "{}"}, raw="{}", now=4.0)
    store.settle_batch(batch.id, Settlement(completed=[done], failed={failed: (FailureKind.AUTH, "401", True)}),
                       now=5.0)
    store.claim_batch(run_id, max_items=1, max_chars=10**6, now=6.0, owner=LEASE[1])
    edited = make_job(tmp_path, URL, [dict(post, body="edited") for post in posts(5)])
    add_all(store, edited, now=7.0)
    assert states(store, run_id) == {"p000": "failed", "p001": "pending", "p002": "failed", "p003": "pending",
                                     "p004": "pending"}
    item = views.item(store, run_id, "p000")
    assert item is not None and item["kind"] == "input_changed"


def test_an_answer_that_comes_after_another_engine_held_its_items_is_kept_and_ends_their_hold(
    tmp_path: Path, store: Store
) -> None:
    _, run_id = prepared(tmp_path, store)
    batch, (done, again, _) = started(store, run_id)
    store.recover(run_id, now=4.0, lives=DEAD)  # an engine that took the run over holds what the first one sent
    store.record_answer(batch.id, {done: '{"label": "x"}'}, raw="{}", now=5.0)
    store.settle_batch(batch.id, Settlement(completed=[done], retry={again: (FailureKind.ITEM_INVALID, "no label")},
                                            not_before=6.0), now=5.0)
    assert list(states(store, run_id).values())[:3] == ["completed", "waiting", "received"]
    assert store.held_items(run_id) == [] and views.holds(store, run_id) == {"none": 5}
    due = store.claim_batch(run_id, max_items=5, max_chars=10**6, now=7.0, owner=LEASE[1])  # the waiting item first, alone
    assert due is not None and due.size == 1 and states(store, run_id)["p001"] == "queued"


def test_a_runs_paid_and_maybe_paid_totals_are_its_items_sums_after_retries_a_lost_answer_and_a_recovery(
    tmp_path: Path, store: Store
) -> None:
    _, run_id = prepared(tmp_path, store)
    batch, (first, second, third) = started(store, run_id)
    store.record_answer(batch.id, {first: '{"label": "x"}', second: "{}"}, raw="{}", now=4.0, answered=[first, second])
    store.settle_batch(batch.id, Settlement(
        completed=[first], retry={second: (FailureKind.ITEM_INVALID, "no label"), third: (FailureKind.TRANSPORT, "reset")},
        maybe_paid={third}, not_before=5.0,
    ), now=5.0)
    again, _ = started(store, run_id, now=6.0)  # the two waiting items, due
    store.count_maybe_paid(again.id)  # sent, the answer lost
    store.record_duplicate(again.id, "batch_2", cancelled=False, message="second task", now=6.0)
    store.recover(run_id, now=7.0, lives=DEAD)  # the engine died before it settled them: held, and counted again (an upper bound)
    store.confirm(run_id, keys=[], now=8.0)  # sent again: may charge twice
    store.join_run("test", token="engine", pid=1, host="here", now=8.0, choose=rule("engine", 8.0))  # the next engine
    last, (resent, also_resent, p003) = started(store, run_id, now=8.0)
    store.record_answer(last.id, {resent: "{}", also_resent: "{}"}, raw="{}", now=9.0, answered=[resent, also_resent])
    store.settle_batch(last.id, Settlement(completed=[resent, also_resent],
                                           failed={p003: (FailureKind.TRANSPORT, "reset", True)}), now=10.0)
    store.retry_failed(run_id, kind=None, keys=[], now=11.0)
    items = views.items(store, run_id)
    status = views.status(store, "test", now=12.0)
    assert (status["paid_calls"], status["maybe_paid"]) == (sum(i["paid_calls"] for i in items),
                                                            sum(i["maybe_paid"] for i in items))
    assert (status["paid_calls"], status["maybe_paid"]) == (4, 7)


def test_failures_carry_what_each_item_paid_and_may_have_paid(tmp_path: Path, store: Store) -> None:
    _, run_id = prepared(tmp_path, store)
    batch, (answered, lost, _) = started(store, run_id)
    store.record_answer(batch.id, {answered: "{}"}, raw="{}", now=4.0, answered=[answered])
    store.settle_batch(batch.id, Settlement(
        failed={answered: (FailureKind.ITEM_INVALID, "no label", True), lost: (FailureKind.TRANSPORT, "reset", True)},
        maybe_paid={lost},
    ), now=5.0)
    assert [(f["key"], f["paid_calls"], f["maybe_paid"]) for f in views.failures(store, "test")] == [
        ("p000", 1, 0), ("p001", 0, 1)]


def test_an_input_read_is_remembered_until_the_input_or_the_job_changes(tmp_path: Path, store: Store) -> None:
    job, _ = prepared(tmp_path, store)
    assert store.input_unchanged_since(job, job.input.fingerprint()) == 1.0
    assert store.input_unchanged_since(replace(job, version="2"), job.input.fingerprint()) is None
    with job.input.path.open("a", encoding="utf-8") as grown:
        grown.write('{"id": "p005", "month": "2026-01", "body": "one more"}\n')
    assert store.input_unchanged_since(job, job.input.fingerprint()) is None
    add_all(store, job, now=2.0)
    assert store.input_unchanged_since(job, job.input.fingerprint()) == 2.0
    assert store.input_unchanged_since(job, None) is None


def test_the_next_due_time_is_the_earliest_waiting_items_unless_its_stage_is_skipped(tmp_path: Path, store: Store) -> None:
    _, run_id = prepared(tmp_path, store)
    batch, (first, *_) = started(store, run_id)
    store.settle_batch(batch.id, Settlement(retry={first: (FailureKind.TRANSPORT, "reset")}, not_before=6.0), now=4.0)
    assert views.next_due(store, run_id) == 6.0
    assert views.next_due(store, run_id, skip=["openai-chat"]) is None
