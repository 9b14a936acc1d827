"""Store transitions: items/s through the five states, the store's own methods against raw sqlite3.

Each item goes pending, queued, running, received, completed, 25 items to a
batch, as the engine drives the store: ``add_items`` adds every item in one
transaction (one chunk, the last), then each batch takes four commits
(``claim_batch``, ``start_batch``, ``record_answer`` with the answer as it came back,
``settle_batch`` with the breaker's success), all called from
``store_batch``, the one function to re-point if those verbs change. The
baseline makes the same commits on the same kind of file (WAL,
``synchronous=FULL``, one transaction a transition) with hand-written SQL
over one bare table: no events, no counts, no batches table (so no answer
kept), no lease check, each item's text in the same row (the store keeps it
apart; a third run, for context, lays the bare table out that way too).
Two ratios to raw sqlite3: all five transitions, and the four of the
per-batch path alone (without the insert). Run at a size and at ten times
it, to show whether the cost per item grows with the store; each the best
of 5 (of 3 with ``--quick``), the store and raw sqlite3 taking turns.

    python -m bench.store [--quick]
"""

from __future__ import annotations

import itertools
import random
import sqlite3
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

from runner import breaker, lease, protocol
from runner.item_rows import ItemRow
from runner.store import Settlement, Store
from runner.store.additions import Preparing

from .common import SEED, Row, Target, profile, sample_job, standalone, transaction

BATCH = 25
#: A large enough limit that every batch holds 25 items.
MAX_CHARS = 1_000_000
STEPS = ("pending", "queued", "running", "received", "completed")
NOW = 1_800_000_000.0
RESULT = {"label": "question", "sentiment": "neutral", "summary": "asks how to export"}
ANSWER = protocol.encode(RESULT)
TOKEN = "bench"

RAW_SCHEMA = """
CREATE TABLE items (
    id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, grp TEXT NOT NULL, seq INTEGER NOT NULL,
    input TEXT NOT NULL, state TEXT NOT NULL DEFAULT 'pending', attempts INTEGER NOT NULL DEFAULT 0,
    batch_id INTEGER, output TEXT, result TEXT, updated_at REAL NOT NULL
);
CREATE INDEX items_to_claim ON items (state, grp, seq);
CREATE INDEX items_by_batch ON items (batch_id);
"""
#: The same with the items' text in a table of its own, as the store keeps it.
RAW_SCHEMA_INPUTS_APART = RAW_SCHEMA.replace("input TEXT NOT NULL, ", "") + (
    "CREATE TABLE inputs (id INTEGER PRIMARY KEY, input TEXT NOT NULL);"
)


class Steps:
    """Seconds spent in each transition, summed over the batches."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    @contextmanager
    def timing(self, step: str) -> Iterator[None]:
        start = time.perf_counter()
        yield
        self.seconds[step] += time.perf_counter() - start

    @property
    def total(self) -> float:
        return sum(self.seconds.values())

    @property
    def per_batch(self) -> float:
        """The four transitions each batch makes, without the one insert of every item (pending)."""
        return self.total - self.seconds["pending"]


def make_items(count: int) -> list[ItemRow]:
    """``count`` items over 12 groups, their text 80 to 1,500 characters long (seeded)."""
    rng = random.Random(SEED)
    words = ["export", "sync", "calendar", "crash", "login", "board", "tags", "offline", "slow", "thanks"]
    rows = []
    for seq in range(count):
        body = " ".join(rng.choices(words, k=rng.randint(12, 220)))
        text = protocol.encode(protocol.item_payload(f"p{seq:07d}", {"body": body}))
        rows.append(ItemRow(f"p{seq:07d}", f"2026-{seq % 12 + 1:02d}", seq, text, len(text), f"{seq:064x}"))
    return rows


def through_store(path: Path, rows: list[ItemRow]) -> Steps:
    """The five transitions by the store's own methods: every item added, then batch after batch."""
    job = sample_job(path.with_suffix(".jsonl"))
    steps = Steps()
    with Store(path) as store:
        lease.acquire(store, job.name, token=TOKEN, now=NOW)
        preparing = Preparing()
        with steps.timing("pending"):
            store.add_items(job, rows, preparing, now=NOW, last=True)
        run_id = preparing.run_id
        while store_batch(store, run_id, (job.name, TOKEN), steps):
            pass
    return steps


def store_batch(store: Store, run_id: int, held: tuple[str, str], steps: Steps, *, max_items: int = BATCH) -> int:
    """One batch through the store's verbs, one commit each, as the engine calls them; its items (0: none left).

    The only place the benches name the per-batch verbs: re-point it here if they change.
    """
    with steps.timing("queued"):
        batch = store.claim_batch(run_id, max_items=max_items, max_chars=MAX_CHARS, now=NOW, owner=held[1])
    if batch is None:
        return 0
    with steps.timing("running"):
        started = store.start_batch(batch.id, lease=held, max_attempts=3, now=NOW)
    if not started:  # the bench's worker does not own the batch: the other verbs would move nothing
        raise RuntimeError(f"batch {batch.id} was claimed but none of its items started")
    outputs = {item.id: ANSWER for item in started}
    with steps.timing("received"):
        store.record_answer(batch.id, outputs, raw=raw_answer(item.key for item in started), now=NOW)
    with steps.timing("completed"):
        done = Settlement(completed=list(outputs), breaker=breaker.after_success)
        store.settle_batch(batch.id, done, now=NOW)
    return len(started)


def raw_answer(keys: Iterable[str]) -> str:
    """The model's answer to a batch as it comes back (the store keeps it): one result per key."""
    return protocol.encode({"results": [{"id": key, **RESULT} for key in keys]})


def through_raw(path: Path, rows: list[ItemRow], *, inputs_apart: bool = False) -> Steps:
    """The same commits in hand-written SQL on a bare table, same journal and durability.

    ``inputs_apart``: the items' text in a table of its own, as the store keeps it.
    """
    steps = Steps()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.executescript(RAW_SCHEMA_INPUTS_APART if inputs_apart else RAW_SCHEMA)
    with steps.timing("pending"), transaction(conn):
        raw_insert(conn, rows, inputs_apart=inputs_apart)
    batch_ids = itertools.count(1)
    while raw_batch(conn, next(batch_ids), steps, inputs_apart=inputs_apart):
        pass
    conn.close()
    return steps


def raw_insert(conn: sqlite3.Connection, rows: list[ItemRow], *, inputs_apart: bool) -> None:
    """Every item added, pending."""
    if inputs_apart:
        conn.executemany(
            "INSERT INTO items (id, key, grp, seq, updated_at) VALUES (?, ?, ?, ?, ?)",
            ((n, row.key, row.group, row.seq, NOW) for n, row in enumerate(rows, 1)),
        )
        conn.executemany("INSERT INTO inputs (id, input) VALUES (?, ?)", enumerate((r.input for r in rows), 1))
    else:
        conn.executemany(
            "INSERT INTO items (key, grp, seq, input, updated_at) VALUES (?, ?, ?, ?, ?)",
            ((row.key, row.group, row.seq, row.input, NOW) for row in rows),
        )


def raw_batch(conn: sqlite3.Connection, batch_id: int, steps: Steps, *, inputs_apart: bool) -> bool:
    """One batch's four commits (queued, running, received, completed) in raw sqlite3; False when none is left."""
    with steps.timing("queued"), transaction(conn):
        found = conn.execute(
            "SELECT id, grp FROM items WHERE state = 'pending' ORDER BY grp, seq LIMIT ?", (BATCH,)
        ).fetchall()
        ids = [(batch_id, NOW, item_id) for item_id, group in found if group == found[0][1]]
        conn.executemany("UPDATE items SET state = 'queued', batch_id = ?, updated_at = ? WHERE id = ?", ids)
    if not ids:
        return False
    with steps.timing("running"), transaction(conn):
        started = conn.execute(
            "UPDATE items SET state = 'running', attempts = attempts + 1, updated_at = ? "
            "WHERE batch_id = ? AND state = 'queued' RETURNING id, key, "
            + ("(SELECT input FROM inputs WHERE inputs.id = items.id)" if inputs_apart else "input"),
            (NOW, batch_id),
        ).fetchall()
    with steps.timing("received"), transaction(conn):
        conn.executemany(
            "UPDATE items SET state = 'received', output = ?, updated_at = ? WHERE id = ? AND state = 'running'",
            [(ANSWER, NOW, item_id) for item_id, _, _ in started],
        )
    with steps.timing("completed"), transaction(conn):
        conn.executemany(
            "UPDATE items SET state = 'completed', result = ?, updated_at = ? WHERE id = ? AND state = 'received'",
            [(ANSWER, NOW, item_id) for item_id, _, _ in started],
        )
    return True


def seconds_in(steps: Steps, step: str) -> float:
    """Seconds of one transition, of the four each batch makes, or of all five."""
    if step == "all five":
        return steps.total
    return steps.per_batch if step == "per batch (the last four)" else steps.seconds[step]


def breakdown(best: dict[tuple[str, int], Steps], sizes: tuple[int, int]) -> str:
    """Microseconds per item in each transition, store and raw sqlite3, at both sizes."""
    columns = [(kind, count) for kind in ("store", "raw") for count in sizes]
    head = " | ".join(f"{'raw sqlite3' if kind == 'raw' else kind} at {count:,}" for kind, count in columns)
    lines = [f"| µs per item | {head} |", "|---" * (len(columns) + 1) + "|"]
    for step in (*STEPS, "per batch (the last four)", "all five"):
        cells = [seconds_in(best[column], step) / column[1] * 1e6 for column in columns]
        lines.append(f"| {step} | " + " | ".join(f"{cell:.1f}" for cell in cells) + " |")
    return "\n".join(lines)


#: Each way through the transitions: the store, raw sqlite3, raw sqlite3 with the items' text apart.
WAYS: dict[str, Callable[[Path, list[ItemRow]], Steps]] = {"store": through_store, "raw": through_raw, "apart": partial(through_raw, inputs_apart=True)}


def measure(folder: Path, sizes: tuple[int, int], repeats: int) -> dict[tuple[str, int], list[Steps]]:
    """Every way at both sizes, ``repeats`` times each, the ways taking turns."""
    files = (folder / f"{n}.db" for n in itertools.count())
    runs: dict[tuple[str, int], list[Steps]] = defaultdict(list)
    for count in sizes:
        rows = make_items(count)
        for _ in range(repeats):  # alternated, so that a slow spell of the disk hits both
            for way, through in WAYS.items():
                runs[way, count].append(through(next(files), rows))
    return runs


def run(*, quick: bool) -> list[Row]:
    small, large = (1_000, 10_000) if quick else (2_000, 20_000)
    with tempfile.TemporaryDirectory(prefix="runner-bench-") as folder:
        runs = measure(Path(folder), (small, large), repeats=3 if quick else 5)
        best = {key: min(done, key=lambda steps: steps.total) for key, done in runs.items()}
        print(f"\nWhere the time goes (the best run of each):\n\n{breakdown(best, (small, large))}")
        rates = {key: key[1] / steps.total for key, steps in best.items()}
        batch_rates = {(way, n): n / min(steps.per_batch for steps in done) for (way, n), done in runs.items()}
        rows_out = [
            Row(f"store transitions, {n:,} items", rates["store", n], "items/s", rates["raw", n], "raw sqlite3",
                Target("ratio", ">=", 0.7))
            for n in (small, large)
        ]
        rows_out += [  # the path the store rewrite changes, without the one insert of every item
            Row(f"store per-batch transitions (claim, start, receive, settle), {n:,} items", batch_rates["store", n],
                "items/s", batch_rates["raw", n], "raw sqlite3")
            for n in (small, large)
        ]
        rows_out.append(Row(
            f"store transitions as it grows: {large:,} vs {small:,} items", rates["store", large], "items/s",
            rates["store", small], f"store at {small:,}", Target("ratio", ">=", 0.9),
        ))
        rows_out += [  # context: the baseline laid out as the store is, its text apart from the hot rows
            Row(f"store transitions vs raw sqlite3 with inputs apart, {n:,} items", rates["store", n], "items/s",
                rates["apart", n], "raw sqlite3, inputs apart")
            for n in (small, large)
        ]
        rows_out.append(Row(  # context: how much of the growth SQLite itself shows
            f"raw sqlite3 as it grows: {large:,} vs {small:,} items", rates["raw", large], "items/s",
            rates["raw", small], f"raw sqlite3 at {small:,}",
        ))
        if any(row.met is False for row in rows_out):
            items = make_items(small)
            print(f"\nProfile of the store at {small:,} items:\n")
            print(profile(lambda: through_store(Path(folder) / "profiled.db", items)))
    return rows_out


def main() -> None:
    standalone("Store transitions", run, __doc__)


if __name__ == "__main__":
    main()
