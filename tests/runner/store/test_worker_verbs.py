"""Several workers on one run, as the store keeps them: what the others hold, read in one statement."""

from __future__ import annotations

from pathlib import Path

from support import add_all, make_job, posts
from test_contract import rule

from runner.store import Store
from runner.store.owners import Elsewhere

NOW = 1_800_000_000.0
URL = "http://127.0.0.1:9/v1"


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
