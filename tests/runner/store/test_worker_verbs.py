"""Several workers on one run, as the store keeps them: what the others hold, read in one statement; the run's
streaks, moved by every worker's settlement."""

from __future__ import annotations

from pathlib import Path

from support import add_all, make_job, posts
from test_contract import rule

from runner.model import BreakerState, FailureKind, Settlement
from runner.rules.streaks import AllInvalid, Move, Refused, Reset, Streaks
from runner.store import Store
from runner.store.owners import Elsewhere

NOW = 1_800_000_000.0
URL = "http://127.0.0.1:9/v1"
NO_LABEL = "result has no label"


def test_what_the_other_workers_hold_and_how_many_workers_live_are_one_read(tmp_path: Path, store: Store) -> None:
    run_id = add_all(store, make_job(tmp_path, URL, posts(9)), now=NOW)
    for token, at in (("a", NOW), ("b", NOW), ("late", NOW - 20)):
        store.join_run("test", token=token, pid=1, host="there", now=at, choose=rule(token, at))
    a_running, _, b_queued = (
        store.claim_batch(run_id, max_items=3, max_chars=10**6, now=NOW, owner=owner) for owner in ("a", "a", "b"))
    assert a_running is not None and b_queued is not None
    store.start_batch(a_running.id, lease=("test", "a"), max_attempts=3, now=NOW)
    assert store.elsewhere(run_id, token="b", since=NOW - 15) == Elsewhere(held=2, running=1, live=2)
    assert store.elsewhere(run_id, token="a", since=NOW - 15) == Elsewhere(held=1, running=0, live=2)
    assert store.elsewhere(run_id, token="a", since=NOW - 30).live == 3


def settle_each(store: Store, run_id: int, moves: list[Move], *, batch_size: int = 2) -> None:
    """One batch after another of the run, claimed and started by workers ``a`` and ``b`` in turn, each settled with
    its move of the run's streaks (its items re-attempted)."""
    for number, streak in enumerate(moves):
        owner = "ab"[number % 2]
        batch = store.claim_batch(run_id, max_items=batch_size, max_chars=10**6, now=NOW, owner=owner)
        assert batch is not None
        started = store.start_batch(batch.id, lease=("test", owner), max_attempts=3, now=NOW)
        retry = {item.id: (FailureKind.ITEM_INVALID, NO_LABEL) for item in started}
        store.settle_batch(batch.id, Settlement(retry=retry, not_before=NOW + 1, streak=streak), now=NOW)


def two_workers(tmp_path: Path, store: Store, count: int) -> int:
    run_id = add_all(store, make_job(tmp_path, URL, posts(count)), now=NOW)
    for token in "ab":
        store.join_run("test", token=token, pid=1, host="here", now=NOW, choose=rule(token, NOW))
    return run_id


def test_the_runs_streak_of_all_invalid_answers_counts_every_workers_and_its_third_opens_the_breaker(
    tmp_path: Path, store: Store
) -> None:
    run_id = two_workers(tmp_path, store, 12)
    settle_each(store, run_id, [AllInvalid(NO_LABEL), AllInvalid(NO_LABEL)])
    assert store.streaks(run_id) == Streaks(all_invalid=2, last_invalid=NO_LABEL)
    assert store.control(run_id).breaker is BreakerState.CLOSED
    settle_each(store, run_id, [Reset(), AllInvalid(NO_LABEL), AllInvalid(NO_LABEL)])  # b's answer ended a's two
    assert store.streaks(run_id) == Streaks(all_invalid=2, last_invalid=NO_LABEL)
    assert store.control(run_id).breaker is BreakerState.CLOSED
    settle_each(store, run_id, [AllInvalid(NO_LABEL)])
    control = store.control(run_id)
    assert (control.breaker, control.kind) == (BreakerState.OPEN, FailureKind.ITEM_INVALID)
    assert control.reason == ("item_invalid: result has no label (every result of 3 answers in a row: the job and "
                              "the model disagree)")


def test_the_same_400_twice_in_a_row_of_two_workers_opens_the_runs_breaker(tmp_path: Path, store: Store) -> None:
    run_id = two_workers(tmp_path, store, 4)
    settle_each(store, run_id, [Refused("# unknown parameter #", "400 unknown parameter 7")])
    assert (store.streaks(run_id), store.control(run_id).breaker) == (
        Streaks(last_refusal="# unknown parameter #"), BreakerState.CLOSED)
    settle_each(store, run_id, [Refused("# unknown parameter #", "400 unknown parameter 7")])
    control = store.control(run_id)
    assert (control.breaker, control.kind, control.reason) == (
        BreakerState.OPEN, FailureKind.BAD_REQUEST, "bad_request: 400 unknown parameter 7 (refused so twice in a row)")


def test_a_run_set_up_again_starts_its_streaks_afresh(tmp_path: Path, store: Store) -> None:
    run_id = two_workers(tmp_path, store, 4)
    settle_each(store, run_id, [AllInvalid(NO_LABEL), Refused("# unknown parameter #", "400 unknown parameter 7")])
    assert store.streaks(run_id) == Streaks("# unknown parameter #", 1, NO_LABEL)
    store.end_setup("test", token="a")
    assert store.streaks(run_id) == Streaks()
