"""Migrations keep every store's data: stores of schema 7, 8, 11, 14, the one before inherited results and the one
before holds per worker opened by this runner."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import staged_run
from scenes import counts_kept, counts_of_items, passes_kept, passes_of_results, states_of_items, states_told_by_events
from support import make_job, posts

from runner import item_rows, jobs, recovery, runs
from runner.model import BreakerState, FailureKind
from runner.sim import Simulator
from runner.store import Store, schema, views
from runner.store.leases import Role
from runner.store.migrations_inherited import INHERITED_RESULTS
from runner.store.migrations_workers import HOLDS_BY_WORKER


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


def v11_store(path: Path, job: jobs.Job, *, completed: int) -> None:
    """A store as runner wrote it at schema 11: the job's run, its first ``completed`` items completed, the
    others pending, with the counts and events its triggers kept (an old job's JSON has no stages)."""
    conn = sqlite3.connect(path, isolation_level=None)
    for statements in schema.MIGRATIONS[:11]:
        for statement in statements:
            conn.execute(statement)
    conn.execute("PRAGMA user_version = 11")
    saved = {k: v for k, v in json.loads(job.to_json()).items() if k not in ("stages", "staged")}
    conn.execute("INSERT INTO runs (name, job, created_at, updated_at) VALUES (?, ?, 1, 1)",
                 (job.name, json.dumps(saved)))
    rows = list(item_rows.items(job))
    conn.execute("INSERT INTO events (run_id, at, to_state, items) VALUES (1, 1, 'pending', ?)", (len(rows),))
    for n, row in enumerate(rows, 1):
        conn.execute("INSERT INTO items (id, run_id, key, grp, seq, chars, fingerprint, updated_at) "
                     "VALUES (?, 1, ?, ?, ?, ?, ?, 1)", (n, row.key, row.group, row.seq, row.chars, row.fingerprint))
        conn.execute("INSERT INTO inputs (item_id, input) VALUES (?, ?)", (n, row.input))
    conn.execute("INSERT INTO batches (run_id, grp, state, size, chars, created_at) VALUES (1, ?, 'done', ?, 0, 1)",
                 (rows[0].group, completed))
    path = ("pending", "queued", "running", "received", "completed")
    for from_state, to_state in zip(path, path[1:]):  # a batch's path, logged (and counted) once per move
        conn.execute("UPDATE items SET state = ?, batch_id = 1, output = '{\"label\": \"old\"}' WHERE id <= ?",
                     (to_state, completed))
        conn.execute("INSERT INTO events (run_id, batch_id, at, from_state, to_state, items) "
                     "VALUES (1, 1, 1, ?, ?, ?)", (from_state, to_state, completed))
    conn.close()


async def test_an_old_store_migrates_its_items_to_its_one_stage_keeping_their_results_and_runs_on(
    tmp_path: Path, sim: Simulator
) -> None:
    job = make_job(tmp_path, sim.base_url, posts(10))
    db = tmp_path / "old.db"
    v11_store(db, job, completed=4)
    with Store(db) as store:
        assert states_of_items(store) == {(1, "openai-chat", "completed"): 4, (1, "openai-chat", "pending"): 6}
        assert counts_kept(store) == counts_of_items(store)
        assert store.rows("SELECT count(*) AS n FROM results") == [{"n": 0}]  # one stage: the output is the result
        outcome = await runs.execute(store, job)
        assert sorted(sim.ledger.snapshot()["billed"]) == [f"p{i:03d}" for i in range(4, 10)]
        assert outcome.status["stages"] == {"openai-chat": {**outcome.status["counts"], "passed": 10, "skipped": 0,
                                                            "reused": 0}}
        assert outcome.status["counts"]["completed"] == 10
        assert counts_kept(store) == counts_of_items(store)
        assert states_told_by_events(store) == states_of_items(store)
        assert views.results(store, store.run_id("test"))[0]["result"] == '{"label": "old"}'



async def test_a_pipeline_store_of_schema_14_fills_what_passed_and_skipped_each_stage_from_its_results(
    tmp_path: Path,
) -> None:
    db = await staged_run.build(tmp_path)
    with Store(db) as store:
        counted = passes_of_results(store)
    conn = sqlite3.connect(db, isolation_level=None)
    for statement in ("DROP INDEX items_by_work", "DROP INDEX results_by_work", "ALTER TABLE items DROP COLUMN work",
                      "ALTER TABLE items DROP COLUMN reused", "ALTER TABLE results DROP COLUMN work",
                      "DROP TRIGGER result_saved", "DROP TRIGGER result_forgotten", "DROP TRIGGER stage_skipped",
                      "DROP TABLE passes", "DROP TABLE ledger", "ALTER TABLE batches DROP COLUMN usage",
                      "ALTER TABLE batches DROP COLUMN results_expire",
                      "DROP INDEX items_scheduled", "DROP INDEX items_backing_off", "DROP INDEX items_to_claim",
                      "CREATE INDEX items_to_claim ON items (run_id, state, stage, grp, seq)",
                      "ALTER TABLE items DROP COLUMN priority", "DROP TABLE queue_holds", "DROP TABLE queues",
                      "DROP TABLE archives",
                      *(f"DROP TABLE archived_{table}" for table in ("items", "inputs", "results", "decisions", "events")),
                      "ALTER TABLE runs DROP COLUMN budget", "ALTER TABLE results DROP COLUMN inherited",
                      *(f"ALTER TABLE items DROP COLUMN {column}"
                        for column in ("not_billed", "tokens_in", "tokens_out", "cost")),
                      "DROP TABLE workers", "DROP TABLE setups", "ALTER TABLE batches DROP COLUMN owner",
                      "ALTER TABLE runs DROP COLUMN quiet_until",
                      *(f"ALTER TABLE runs DROP COLUMN {column}" for column in ("last_refusal", "all_invalid",
                                                                              "last_invalid")),
                      "CREATE TABLE engines (run TEXT PRIMARY KEY, token TEXT NOT NULL, pid INTEGER NOT NULL, "
                      "host TEXT NOT NULL, started_at REAL NOT NULL, heartbeat_at REAL NOT NULL)",
                      "PRAGMA user_version = 14"):
        conn.execute(statement)
    conn.close()
    with Store(db) as store:
        assert passes_kept(store) == counted
        stages = views.status(store, "triage", now=0)["stages"]
    assert {stage: (row["passed"], row["skipped"]) for stage, row in stages.items()} == {
        "classify": (12, 0), "extract": (6, 6), "summarize": (11, 0),
    }


def store_before_inherited_results(path: Path) -> None:
    """A store at the schema before a sub-item's copies of its parent's results were marked: run ``fan`` (split,
    note, gather), two posts each fanned out into two sub-items and joined, the second's unit archived, with the
    passes the old trigger and archive counted (each copy a pass of its stage)."""
    conn = sqlite3.connect(path, isolation_level=None)
    version = schema.MIGRATIONS.index(INHERITED_RESULTS)
    for statements in schema.MIGRATIONS[:version]:
        for statement in statements:
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {version}")
    job = {"staged": True, "stages": [{"name": "split"}, {"name": "note"}, {"name": "gather", "kind": "join"}]}
    conn.execute("INSERT INTO runs (name, job, created_at, updated_at) VALUES ('fan', ?, 1, 1)", (json.dumps(job),))
    for table, first, key in (("", 1, "p0"), ("archived_", 4, "p1")):
        unit = [(first, key, None, "gather"), (first + 1, f"{key}/0", first, "note"),
                (first + 2, f"{key}/1", first, "note")]
        conn.executemany(f"INSERT INTO {table}items (id, run_id, key, grp, seq, chars, fingerprint, updated_at, "
                         "state, stage, parent_id) VALUES (?, 1, ?, '', 0, 2, 'f', 1, 'completed', ?, ?)",
                         [(i, k, stage, parent) for i, k, parent, stage in unit])
        results = [(first, "split"), (first, "gather")] + [(i, stage) for i in (first + 1, first + 2)
                                                           for stage in ("split", "note")]
        conn.executemany(f"INSERT INTO {table}results (item_id, stage, result, fingerprint, at) VALUES (?, ?, '{{}}', "
                         "'f', 1)", results)
    conn.execute("INSERT INTO passes (run_id, stage, passed) SELECT 1, stage, count(*) FROM archived_results "
                 "WHERE true GROUP BY stage "
                 "ON CONFLICT (run_id, stage) DO UPDATE SET passed = passed + excluded.passed")
    conn.close()


def test_a_stores_passes_count_a_sub_items_copies_of_its_parents_results_no_more_once_migrated(tmp_path: Path) -> None:
    store_before_inherited_results(tmp_path / "runs.db")
    with Store(tmp_path / "runs.db") as store:
        assert passes_kept(store) == {(1, "split"): (2, 0), (1, "note"): (4, 0), (1, "gather"): (2, 0)}
        assert passes_kept(store) == passes_of_results(store)


def test_an_old_stores_paid_and_maybe_paid_calls_become_billed_and_unknown_charges_of_unknown_tokens(
    tmp_path: Path,
) -> None:
    v8_store(tmp_path / "runs.db")
    with Store(tmp_path / "runs.db") as store:
        cost = {name: views.status(store, name, now=10.0)["cost"] for name in ("a", "b")}
        assert {name: c["charges"] for name, c in cost.items()} == {
            "a": {"billed": 5, "not_billed": 0, "unknown": 1}, "b": {"billed": 1, "not_billed": 0, "unknown": 2}}
        assert all(c["spent"] is None and c["reason"] for c in cost.values())  # tokens not known: never 0
        assert store.rows("SELECT key FROM items WHERE cost IS NULL ORDER BY run_id, key") == [
            {"key": "k0"}, {"key": "k1"}, {"key": "k0"}]


def test_a_runs_hold_in_its_queue_is_kept_as_its_workers_own_once_holds_are_kept_per_worker(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "runs.db", isolation_level=None)
    version = schema.MIGRATIONS.index(HOLDS_BY_WORKER.sqlite)
    for statements in schema.MIGRATIONS[:version]:
        for statement in statements:
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {version}")
    conn.execute("INSERT INTO runs (name, job, created_at, updated_at) VALUES ('old', '{}', 1, 1)")
    conn.execute("INSERT INTO workers (token, run, pid, host, started_at, heartbeat_at) "
                 "VALUES ('worker', 'old', 1, 'there', 1, 1)")
    conn.execute("INSERT INTO queues (name, concurrency) VALUES ('q', 4)")
    conn.execute("INSERT INTO queue_holds (run_id, queue, token, held, waiting) VALUES (1, 'q', 'worker', 2, 1)")
    conn.close()
    with Store(tmp_path / "runs.db") as store:
        store.join_run("old", token="another", pid=1, host="there", now=1.0,
                       choose=lambda setting_up, workers: Role.JOIN)
        store.join_queue(1, "q", token="another", priority=0, concurrency=4)
        store.hold_in_queue(1, token="another", held=1, waiting=0)
        assert store.rows("SELECT token, held, waiting FROM queue_holds ORDER BY token") == [
            {"token": "another", "held": 1, "waiting": 0}, {"token": "worker", "held": 2, "waiting": 1}]
