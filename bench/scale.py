"""Scale: reads at 10,000 to 1,000,000 items, and recovery after a crash.

Each store is a run left by a dead engine, built quickly: items inserted
directly into a store made by ``Store(path)``, then the events the run would
have written (one for the items added, one per batch and move, one per item
for those that went on to wait or fail), and the counts taken from the items.
The first 80 % of the batches of 25 (in claim order) are done: their items
97 % completed, 2 % failed (five kinds), 1 % waiting; then 50 batches were in
flight when the engine died (20 sent, 20 answered, 10 formed but unsent); the
rest are pending.

- ``status``: ``views.status``, what ``runner status`` prints;
- a TUI refresh: status, failures by kind with the first 200 of the largest
  kind, the last 20 events, the last minute's throughput (from the run's
  latest events) and the batches in flight;
- an item's history (its own events and its batches'), as the TUI's and the
  notebook's item detail reads it;
- the engine's reads on every turn: its controls and the confirmed batches
  to resume (``Store.control``, ``Store.resumable``);
- recovery, as an engine starts: open the store, take the lease,
  ``Store.recover`` and ``runner.engine.saved.validate_received``.

Preparing a large input (its speed, peak memory and write lock) is
``bench.large_input``'s.

Reads are the median of 20 on an open store, after one to warm it.

    python -m bench.scale [--quick]
"""

from __future__ import annotations

import functools
import itertools
import random
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from runner import lease, protocol
from runner.store import views
from runner.engine import Engine
from runner.engine import saved
from runner.providers.handler import PythonHandler
from runner.store import Store

from .common import SEED, Row, Target, elapsed, sample_job, standalone

NAME = "bench"
NOW = 1_800_000_000.0
BATCH = 25
MONTHS = [f"2026-{m:02d}" for m in range(1, 13)]
KINDS = ["item_invalid", "transport", "batch_invalid", "bad_request", "input_changed"]
#: The batches a dead engine left in flight, by their items' state.
INTERRUPTED = ["running"] * 20 + ["received"] * 20 + ["queued"] * 10
RESULT = {"label": "question", "sentiment": "neutral", "summary": "asks how to export a board"}
READS = 20
#: The targets: reads at a million items, and recovery.
READ_TARGET = Target("value", "<", 50)
RECOVERY_TARGET = Target("value", "<", 5)


def item_rows(run_id: int, count: int) -> Iterator[tuple[Any, ...]]:
    """Rows for ``items`` as a dead engine left them, in input order (seeded)."""
    rng = random.Random(SEED)
    words = ["export", "sync", "calendar", "crash", "login", "board", "tags", "offline", "slow", "thanks"]
    bodies = [" ".join(rng.choices(words, k=rng.randint(30, 220))) for _ in range(1_000)]
    groups = len(MONTHS)
    batches = [-(-len(range(g, count, groups)) // BATCH) for g in range(groups)]
    first_batch = list(itertools.accumulate(batches, initial=1))  # batches are claimed group by group
    done = int(sum(batches) * 0.8)
    for seq in range(count):
        key, group = f"p{seq:07d}", seq % groups
        batch = first_batch[group] + seq // groups // BATCH
        state, kind = fate(rng, batch - done)
        output = protocol.encode({"id": key, **RESULT}) if state in ("completed", "received") else None
        yield (
            seq + 1, run_id, key, MONTHS[group], seq,
            protocol.encode(protocol.item_payload(key, {"body": rng.choice(bodies)})),
            state, int(state != "pending"), int(state not in ("pending", "queued", "running")),
            None if state == "pending" else batch, NOW + 60 if state == "waiting" else None,
            output,
            kind, f"{kind}: a seeded failure" if kind else None, 1 if kind else None, NOW,
        )


def fate(rng: random.Random, after_done: int) -> tuple[str, str | None]:
    """An item's state and failure kind, from its batch's place after the last batch done."""
    if after_done <= 0:
        roll = rng.random()
        if roll < 0.02:
            return "failed", rng.choice(KINDS)
        return ("waiting", "transport") if roll < 0.03 else ("completed", None)
    if after_done <= len(INTERRUPTED):
        return INTERRUPTED[after_done - 1], None
    return "pending", None


def build(path: Path, count: int) -> None:
    """A store of ``count`` items as a dead engine left it (see the module's docstring)."""
    job = sample_job(path.with_suffix(".jsonl"), name=NAME)
    with Store(path) as store, store.write() as conn:
        (run_id,) = conn.execute(
            "INSERT INTO runs (name, job, nonce, created_at, updated_at) VALUES (?, ?, 'bench', ?, ?) RETURNING id",
            (NAME, job.to_json(), NOW, NOW),
        ).fetchone()
        rows = item_rows(run_id, count)
        while chunk := list(itertools.islice(rows, 10_000)):
            conn.executemany(
                "INSERT INTO items (id, run_id, key, grp, seq, chars, fingerprint, state, attempts, paid_calls, "
                "batch_id, not_before, output, error_kind, error, retryable, updated_at) "
                "VALUES (?1, ?2, ?3, ?4, ?5, length(?6), printf('%064x', ?5), ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, "
                "?15, ?16)",
                chunk,
            )
            conn.executemany("INSERT INTO inputs (item_id, input) VALUES (?, ?)", [(row[0], row[5]) for row in chunk])
        conn.execute(
            "INSERT INTO batches (id, run_id, grp, state, size, chars, created_at, started_at, intent_at, finished_at) "
            "SELECT batch_id, run_id, min(grp), state, count(*), sum(chars), :now, "
            "CASE WHEN state = 'queued' THEN NULL ELSE :now END, CASE WHEN state = 'queued' THEN NULL ELSE :now END, "
            "CASE WHEN state IN ('running', 'received', 'queued') THEN NULL ELSE :now END "
            "FROM (SELECT batch_id, run_id, grp, chars, CASE WHEN state IN ('running', 'received') THEN 'running' "
            "WHEN state = 'queued' THEN 'queued' ELSE 'done' END AS state FROM items WHERE batch_id IS NOT NULL) "
            "GROUP BY batch_id",
            {"now": NOW},
        )
        conn.execute(
            "INSERT INTO events (run_id, at, to_state, items) VALUES (?, ?, 'pending', ?)", (run_id, NOW, count)
        )
        conn.execute(EVENTS, {"now": NOW})
        # A batch's events move its counts as well: count the items as they are, once.
        conn.execute("DELETE FROM counts WHERE run_id = ?", (run_id,))
        conn.execute(
            "INSERT INTO counts (run_id, grp, state, n) SELECT run_id, grp, state, count(*) FROM items "
            "WHERE run_id = ? GROUP BY grp, state",
            (run_id,),
        )


#: Each batch's moves, as far as its items' states say it went (those waiting or
#: failed were answered, then judged one by one), in claim order.
EVENTS = """
INSERT INTO events (run_id, item_id, batch_id, at, from_state, to_state, kind, message, items)
WITH moves (step, from_state, to_state) AS (
    VALUES (1, 'pending', 'queued'), (2, 'queued', 'running'), (3, 'running', 'received'), (4, 'received', 'completed')
), reached (state, step) AS (
    VALUES ('queued', 1), ('running', 2), ('received', 3), ('waiting', 3), ('failed', 3), ('completed', 4)
)
SELECT run_id, item_id, batch_id, :now, from_state, to_state, kind, message, items FROM (
    SELECT i.run_id, NULL AS item_id, i.batch_id, m.step, m.from_state, m.to_state, NULL AS kind, NULL AS message,
           count(*) AS items
    FROM items i JOIN reached r ON r.state = i.state JOIN moves m ON m.step <= r.step
    GROUP BY i.batch_id, m.step
    UNION ALL
    SELECT run_id, id, batch_id, 5, 'received', state, error_kind, error, 1 FROM items
    WHERE state IN ('waiting', 'failed')
)
ORDER BY batch_id, step, item_id
"""


def median_ms(read: Callable[[], object]) -> float:
    read()
    return statistics.median(elapsed(read) for _ in range(READS)) * 1000


def tui_refresh(store: Store) -> None:
    run_id = store.run_id(NAME)
    views.status(store, NAME, now=NOW)
    kinds = views.failure_kinds(store, run_id)
    if kinds:
        views.failed_items(store, run_id, kind=kinds[0]["kind"], limit=200)
    views.event_tail(store, run_id, limit=20)
    views.finished_since(store, run_id, since=NOW - 60)
    views.batches_in_flight(store, run_id)


def reads(path: Path) -> dict[str, float]:
    """Milliseconds of each read, and of the TUI's refresh as a whole."""
    with Store(path, create=False) as store:
        run_id = store.run_id(NAME)
        largest = views.failure_kinds(store, run_id)[0]["kind"]
        (waited,) = store.rows("SELECT id FROM items WHERE run_id = ? AND state = 'waiting' LIMIT 1", [run_id])
        return {
            "status": median_ms(lambda: views.status(store, NAME, now=NOW)),
            "TUI refresh": median_ms(lambda: tui_refresh(store)),
            "  failures by kind": median_ms(lambda: views.failure_kinds(store, run_id)),
            "  first 200 failures of the largest kind": median_ms(
                lambda: views.failed_items(store, run_id, kind=largest, limit=200)),
            "  last 20 events": median_ms(lambda: views.event_tail(store, run_id, limit=20)),
            "  throughput, last minute": median_ms(lambda: views.finished_since(store, run_id, since=NOW - 60)),
            "  batches in flight": median_ms(lambda: views.batches_in_flight(store, run_id)),
            "item history": median_ms(lambda: views.item_history(store, waited["id"])),
            "engine turn reads": median_ms(lambda: engine_turn(store)),
        }


def sql_profile(path: Path, read: Callable[[Store], object]) -> str:
    """Each statement ``read`` runs, slowest first: its milliseconds on its own and SQLite's plan."""
    with Store(path, create=False) as store:
        statements: list[str] = []
        conn = store.database.conn
        assert isinstance(conn, sqlite3.Connection)  # SQLite's own trace and plans
        conn.set_trace_callback(statements.append)
        read(store)
        conn.set_trace_callback(None)
        timed = []
        for sql in (sql for sql in dict.fromkeys(statements) if sql.startswith("SELECT")):  # not savepoints
            plan = "; ".join(row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}"))
            timed.append((median_ms(functools.partial(store.rows, sql)), " ".join(sql.split()), plan))
    timed.sort(reverse=True)
    return "\n".join(f"{ms:9.3f} ms  {sql[:150]}\n             plan: {plan}" for ms, sql, plan in timed)


def engine_turn(store: Store) -> None:
    run_id = store.run_id(NAME)
    store.control(run_id)
    store.resumable(run_id)


def recover(path: Path) -> dict[str, float]:
    """Seconds of each step of an engine's start on a store a dead engine left."""
    async def never(items: list[dict[str, Any]]) -> str:
        raise AssertionError("recovery makes no call")

    job = sample_job(path.with_suffix(".jsonl"), name=NAME)
    steps: dict[str, float] = {}
    start = time.perf_counter()
    store = Store(path, create=False)
    lease.acquire(store, NAME, token="bench", now=NOW)
    engine = Engine(store, job, PythonHandler(never))
    engine.run_id = store.run_id(NAME)
    steps["open, lease"] = time.perf_counter() - start
    before = views.status(store, NAME, now=NOW)["counts"]
    steps["Store.recover"] = elapsed(lambda: store.recover(engine.run_id, now=NOW))
    steps["validate_received"] = elapsed(lambda: saved.validate_received(engine))
    after = views.status(store, NAME, now=NOW)
    store.close()
    expected = (before["running"], 0, 0, before["completed"] + before["received"])
    found = (after["needs_confirmation"], after["counts"]["received"], after["counts"]["queued"],
             after["counts"]["completed"])
    if found != expected:
        raise RuntimeError(f"recovery did not do its work: (held, received, queued, completed) {found} != {expected}")
    return steps


def grown(measure: str, values: dict[int, float], unit: str, target: Target | None) -> list[Row]:
    """One row per size, each against the smallest size's value."""
    smallest = min(values)
    return [
        Row(f"{measure}, {n:,} items", value, unit, None if n == smallest else values[smallest],
            f"at {smallest:,}", target)
        for n, value in values.items()
    ]


def breakdown(figures: dict[int, dict[str, float]], unit: str) -> str:
    sizes = list(figures)
    lines = [f"| {unit} | " + " | ".join(f"{n:,} items" for n in sizes) + " |", "|---" * (len(sizes) + 1) + "|"]
    for name in figures[sizes[0]]:
        lines.append(f"| {name} | " + " | ".join(f"{figures[n][name]:.3f}" for n in sizes) + " |")
    return "\n".join(lines)


def run(*, quick: bool) -> list[Row]:
    sizes = (10_000, 50_000) if quick else (10_000, 100_000, 1_000_000)
    read_ms: dict[int, dict[str, float]] = {}
    recovery: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="runner-bench-") as name:
        folder = Path(name)
        for count in sizes:
            path = folder / f"store-{count}.db"
            seconds = elapsed(functools.partial(build, path, count))
            print(f"built a store of {count:,} items in {seconds:.1f} s", flush=True)
            read_ms[count] = reads(path)
            if count == sizes[-1]:
                profiles = {what: sql_profile(path, read) for what, read in
                            (("a TUI refresh", tui_refresh), ("the engine's reads on every turn", engine_turn))}
            recovery[count] = recover(path)
            path.unlink()
    print(f"\nReads, ms (median of {READS}):\n\n{breakdown(read_ms, 'ms')}")
    print(f"\nRecovery, s:\n\n{breakdown(recovery, 's')}")
    for what, text in profiles.items():
        print(f"\nThe statements of {what} at {sizes[-1]:,} items, slowest first:\n\n{text}")
    return [
        *grown("status", {n: r["status"] for n, r in read_ms.items()}, "ms", READ_TARGET),
        *grown("TUI refresh", {n: r["TUI refresh"] for n, r in read_ms.items()}, "ms", READ_TARGET),
        *grown("engine turn reads", {n: r["engine turn reads"] for n, r in read_ms.items()}, "ms", None),
        *grown("recovery of 50 interrupted batches", {n: sum(r.values()) for n, r in recovery.items()}, "s",
               RECOVERY_TARGET),
    ]


def main() -> None:
    standalone("Scale", run, __doc__)


if __name__ == "__main__":
    main()
