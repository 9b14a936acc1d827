"""Migrations keep every store's data: stores of schema 7 and 8 opened by this runner."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from runner import recovery
from runner.model import BreakerState, FailureKind
from runner.store import Store, schema, views


def v7_store(path: Path, *, breaker_reason: str) -> None:
    """A store as runner wrote it at schema 7: two items held (one confirmed), one completed, its breaker open."""
    conn = sqlite3.connect(path, isolation_level=None)
    for statements in schema.MIGRATIONS[:7]:
        for statement in statements:
            conn.execute(statement)
    conn.execute("PRAGMA user_version = 7")
    conn.execute("INSERT INTO runs (name, job, created_at, updated_at, breaker, breaker_reason) "
                 "VALUES ('old', '{}', 1, 1, 'open', ?)", (breaker_reason,))
    conn.execute("INSERT INTO batches (run_id, grp, state, size, chars, created_at, intent_at, upstream_id) "
                 "VALUES (1, 'g', 'running', 3, 6, 2, 2, 'batch_1')")
    conn.executemany(
        "INSERT INTO items (run_id, key, grp, seq, chars, fingerprint, updated_at, state, batch_id, output, result, "
        "needs_confirmation) VALUES (1, ?, 'g', ?, 2, 'f', 1, ?, 1, ?, ?, ?)",
        [("held", 0, "running", None, None, 1), ("confirmed", 1, "running", None, None, 2),
         ("done", 2, "completed", '{"label": "raw"}', '{"label": "checked"}', 0)],
    )
    conn.close()


def test_held_and_confirmed_items_keep_their_hold_and_a_completed_item_its_result(tmp_path: Path) -> None:
    v7_store(tmp_path / "runs.db", breaker_reason="auth: 401 invalid_api_key")
    with Store(tmp_path / "runs.db") as store:
        assert [(h.key, h.case) for h in recovery.held(store, "old")] == [("held", recovery.Case.POLL)]
        assert [batch.id for batch in store.resumable(store.run_id("old"))] == [1]
        assert views.results(store, store.run_id("old")) == [
            {"key": "done", "group": "g", "result": '{"label": "checked"}'}]
        assert views.status(store, "old", now=10.0)["needs_confirmation"] == 1


def test_an_open_breaker_keeps_the_kind_its_reason_began_with(tmp_path: Path) -> None:
    v7_store(tmp_path / "runs.db", breaker_reason="auth: 401 invalid_api_key")
    with Store(tmp_path / "runs.db") as store:
        control = store.control(store.run_id("old"))
    assert (control.breaker, control.kind, control.reason) == (
        BreakerState.OPEN, FailureKind.AUTH, "auth: 401 invalid_api_key")


def test_a_breaker_opened_by_transport_failures_is_of_kind_transport(tmp_path: Path) -> None:
    v7_store(tmp_path / "runs.db", breaker_reason="2 consecutive transport failures, last: 503 overloaded")
    with Store(tmp_path / "runs.db") as store:
        assert store.control(store.run_id("old")).kind is FailureKind.TRANSPORT


def test_a_reason_of_no_known_kind_leaves_the_kind_unknown(tmp_path: Path) -> None:
    v7_store(tmp_path / "runs.db", breaker_reason="resumed by a person: one batch at a time until one succeeds")
    with Store(tmp_path / "runs.db") as store:
        assert store.control(store.run_id("old")).kind is None


def v8_store(path: Path) -> None:
    """A store as runner wrote it at schema 8: two runs whose items paid calls, and some may have."""
    conn = sqlite3.connect(path, isolation_level=None)
    for statements in schema.MIGRATIONS[:8]:
        for statement in statements:
            conn.execute(statement)
    conn.execute("PRAGMA user_version = 8")
    conn.executemany("INSERT INTO runs (name, job, created_at, updated_at) VALUES (?, '{}', 1, 1)", [("a",), ("b",)])
    conn.executemany(
        "INSERT INTO items (run_id, key, grp, seq, chars, fingerprint, updated_at, state, paid_calls, maybe_paid) "
        "VALUES (?, ?, 'g', ?, 2, 'f', 1, ?, ?, ?)",
        [(1, "k0", 0, "completed", 2, 0), (1, "k1", 1, "failed", 3, 1), (1, "k2", 2, "pending", 0, 0),
         (2, "k0", 0, "completed", 1, 2)],
    )
    conn.close()


def test_a_runs_paid_and_maybe_paid_totals_are_filled_from_its_items_once(tmp_path: Path) -> None:
    v8_store(tmp_path / "runs.db")
    with Store(tmp_path / "runs.db") as store:
        totals = {name: (s["paid_calls"], s["maybe_paid"]) for name in ("a", "b")
                  for s in [views.status(store, name, now=10.0)]}
        assert totals == {"a": (5, 1), "b": (1, 2)}
