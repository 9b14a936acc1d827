"""A read transaction (``Database.reading``): every read in it sees the store as its first read did, on either
backend, whatever another connection writes meanwhile; after it, the reader sees what was written."""

from __future__ import annotations

from scenes import engine_elsewhere, reopened

from runner.store import Store


def test_reads_in_one_read_transaction_see_the_store_as_the_first_read_did(store: Store) -> None:
    engine_elsewhere(store, "r", "first")
    with reopened(store, read_only=True) as reader:
        with reader.database.reading():
            before = [worker.token for worker in reader.workers("r")]
            engine_elsewhere(store, "r", "second")
            during = [worker.token for worker in reader.workers("r")]
        after = sorted(worker.token for worker in reader.workers("r"))
    assert (before, during, after) == (["first"], ["first"], ["first", "second"])
