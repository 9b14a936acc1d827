"""A prepare in chunks: the whole input checked before anything is written, then each chunk its own
transaction; the run is marked prepared only by the last, and the lease beats all along."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from scenes import states_of_items, states_told_by_events
from support import StepClock, add_all, events_into, make_job, posts, write_jsonl

from runner import item_rows, lease, preparing, runs
from runner.errors import InputChanged, InputError, RunError
from runner.jobs import Job
from runner.key_set import KeySet
from runner.store import Store, views

URL = "http://127.0.0.1:9/v1"
TOKEN = "engine-1"


def prepare(store: Store, job: Job, clock: StepClock, **options: object) -> int:
    """``preparing.prepare`` of ``job`` in chunks of 10, under a lease taken for it and given back."""
    lease.acquire(store, job.name, token=TOKEN, now=clock.now())
    try:
        return preparing.prepare(store, job, lease_token=TOKEN, now=clock.now, chunk_rows=10, **options)  # type: ignore[arg-type]
    finally:
        lease.release(store, job.name, token=TOKEN)


def can_write_now(path: Path) -> bool:
    """Whether another connection gets the store's write lock at once."""
    other = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        other.close()


def test_between_chunks_another_writer_gets_the_lock_and_the_run_is_not_yet_prepared(
    tmp_path: Path, store: Store, clock: StepClock
) -> None:
    seen: list[tuple[int, bool, bool]] = []

    def adding(added: int, total: int) -> None:
        seen.append((added, can_write_now(store.path), store.preparing("test")))

    job = make_job(tmp_path, URL, posts(35, groups=3))
    run_id = prepare(store, job, clock, adding=adding)
    assert seen == [(10, True, True), (20, True, True), (30, True, True)]
    assert not store.preparing("test")
    assert states_of_items(store) == {(run_id, "openai-chat", "pending"): 35}
    assert [event["items"] for event in events_into(store, "pending")] == [35]  # one event, moved by each chunk


@pytest.mark.parametrize("bad", ["{not json", '{"month": "2026-01"}', '{"id": "p003", "month": "2026-01"}'])
def test_bad_input_after_many_chunks_leaves_the_store_untouched(tmp_path: Path, clock: StepClock, bad: str) -> None:
    job = make_job(tmp_path, URL, posts(60))
    with job.input.path.open("a", encoding="utf-8") as lines:
        lines.write(bad + "\n")
    with Store(tmp_path / "runs.db") as store:
        with pytest.raises(InputError, match="line 61"):
            prepare(store, job, clock)
        assert store.run_names() == []
        assert states_of_items(store) == {}


def test_a_duplicate_key_names_both_lines(tmp_path: Path) -> None:
    job = make_job(tmp_path, URL, [*posts(30), posts(3)[2]])
    with pytest.raises(InputError, match="duplicate key 'p002', on line 3 and on line 31"):
        item_rows.check(job)


def test_keys_that_only_share_a_hash_are_not_duplicates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class EveryKeySeen(KeySet):
        """As if every key after the first shared the hash of one before it."""

        def add(self, key: str) -> bool:
            return not super().add("the same")

    monkeypatch.setattr(item_rows, "KeySet", EveryKeySeen)
    assert item_rows.check(make_job(tmp_path, URL, posts(5))) == 5


def test_a_key_set_says_which_keys_may_have_been_added_before() -> None:
    keys = KeySet()
    added = [keys.add(f"p{n}") for n in range(200_000)]
    assert all(added) and len(keys) == 200_000
    assert not any(keys.add(f"p{n}") for n in range(0, 200_000, 997))


def test_the_lease_beats_while_the_input_is_checked(tmp_path: Path, store: Store, clock: StepClock) -> None:
    beats: list[float] = []

    def reading(records: int) -> None:  # each record checked takes a second of the test's clock
        clock.time += item_rows.EVERY
        (worker,) = store.workers("test")
        beats.append(worker.heartbeat_at)

    start = clock.now()
    prepare(store, make_job(tmp_path, URL, posts(2_000)), clock, reading=reading)
    assert beats == [start, start + 500, start + 1_000, start + 1_500]


def test_a_prepare_whose_lease_was_taken_over_stops_and_leaves_the_run_unprepared(
    tmp_path: Path, store: Store, clock: StepClock
) -> None:
    def taken_over(added: int, total: int) -> None:
        store.recover(store.run_id("test"), now=clock.now(), lives=lambda worker: False)  # found dead

    with pytest.raises(RunError, match="taken over by another engine"):
        prepare(store, make_job(tmp_path, URL, posts(30)), clock, adding=taken_over)
    assert store.preparing("test")
    assert sum(states_of_items(store).values()) == 10


def test_an_input_changed_while_it_was_added_is_refused_and_read_again_next_time(
    tmp_path: Path, store: Store, clock: StepClock
) -> None:
    job = make_job(tmp_path, URL, posts(30))

    def edited(added: int, total: int) -> None:
        if added == 10:
            write_jsonl(job.input.path, posts(31))

    with pytest.raises(InputError, match="changed while it was read"):
        prepare(store, job, clock, adding=edited)
    assert store.preparing("test")
    assert store.input_unchanged_since(job, job.input.fingerprint()) is None
    runs.prepare(store, job, now=clock.now(), chunk_rows=10)
    assert not store.preparing("test")
    assert sum(states_of_items(store).values()) == 31
    assert states_told_by_events(store) == states_of_items(store)


def test_a_prepare_again_of_the_same_input_adds_nothing_and_marks_the_run_prepared(
    tmp_path: Path, store: Store, clock: StepClock
) -> None:
    job = make_job(tmp_path, URL, posts(25))
    run_id = runs.prepare(store, job, now=clock.now(), chunk_rows=10)
    runs.prepare(store, job, now=clock.now(), chunk_rows=10)
    assert len(views.history(store, run_id)) == 1
    assert store.input_unchanged_since(job, job.input.fingerprint()) == clock.now()


def test_an_input_changed_between_two_chunks_is_refused_before_the_next_chunk_is_added(
    tmp_path: Path, store: Store, clock: StepClock
) -> None:
    job = make_job(tmp_path, URL, posts(30))
    added_so_far: list[int] = []

    def edited(added: int, total: int) -> None:
        added_so_far.append(added)
        if added == 10:
            write_jsonl(job.input.path, [*posts(30), posts(30)[25]])

    with pytest.raises(InputChanged, match="changed while it was read"):
        prepare(store, job, clock, adding=edited)
    assert added_so_far == [10]
    assert store.preparing("test") and sum(states_of_items(store).values()) == 10


def test_a_key_found_twice_when_added_is_an_input_changed_not_a_failed_write(tmp_path: Path, store: Store) -> None:
    """The check found no key twice: one found twice when added means the input changed in between."""
    job = make_job(tmp_path, URL, [*posts(30), posts(30)[25]])
    with pytest.raises(InputChanged, match=f"^{job.input.describe()}: changed while it was read"):
        add_all(store, job, item_rows.rows(job), now=1.0)
    assert not store.preparing("test") and sum(states_of_items(store).values()) == 0
