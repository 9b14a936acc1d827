"""End to end: items/s of a job against the simulator, against a bare httpx loop and two durable queues.

The job is the sample job (its prompt and output schema) over posts made by
``sample_data/make_posts.py``, 25 items to a call (``max_chars`` raised so
that every batch is full), 2 calls at a time, run by ``runs.execute`` on a
fresh store: the input read, every transition committed, every answer
validated. The simulator runs in a process of its own (``runner sim
--latency 0``), as an upstream would. Baselines, in the same run:

- the targets' baseline, a floor: a hand-written durable loop (``durable_loop``):
  the bare loop below plus the two commits per batch that any runner of the
  brief makes in each slot's path, in raw sqlite3 on one bare table;
- a bare httpx loop (for context, no target): the same requests (the same
  items in the same batches of 25 by group, the same bodies), 2 at a time on
  one ``AsyncClient``, each answer's JSON decoded, nothing stored;
- Huey's ``SqliteHuey`` at its defaults (WAL, ``synchronous=FULL``, as durable
  as the store): as many no-op tasks, run by a consumer with 2 worker threads
  polling every 10 ms;
- DBOS Transact on SQLite: as many no-op workflows on a queue with 2 workers,
  polled every 10 ms (its default, 1 s, gives about 2 per second).

The runner, the bare loop and the floor take turns, 3 times each, and Huey
runs 3 times; each keeps its best run. DBOS runs once.

    python -m bench.end_to_end [--quick]
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from runner import item_rows, protocol, runs
from runner.jobs import BatchLimits, Job
from runner.providers.openai_chat import chat_body
from runner.store import Store

from .common import (
    ROOT,
    Row,
    SEED,
    Target,
    elapsed,
    machine,
    make_posts,
    profile,
    sample_job,
    standalone,
    transaction,
)

#: Large enough that every batch holds 25 items.
MAX_CHARS = 1_000_000
#: How often the peers' workers look for new work when idle.
PEER_POLL_SECONDS = 0.01


@contextmanager
def simulator(latency: float = 0.0) -> Iterator[tuple[str, int]]:
    """``runner sim`` with ``latency`` seconds a call (no jitter) in a process of its own: its base URL and pid."""
    command = [sys.executable, "-m", "runner", "sim", "--port", "0", "--latency", str(latency), "--jitter", "0",
               "--seed", str(SEED)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert process.stdout is not None
        first = process.stdout.readline()  # "simulator on http://127.0.0.1:PORT/v1 (...)"
        if not first.startswith("simulator on "):
            raise RuntimeError(f"runner sim did not start: {first!r}")
        yield first.split()[2], process.pid
    finally:
        process.terminate()
        process.wait()


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def runner_job(path: Path, job: Job, count: int) -> int:
    """Run the job to the end on a new store at ``path``; the calls it made."""
    with Store(path) as store:
        outcome = asyncio.run(runs.execute(store, job))
        completed = outcome.status["counts"]["completed"]
        if completed != count:
            raise RuntimeError(f"the job completed {completed} of {count} items: {outcome.status}")
        return int(store.rows("SELECT count(*) AS n FROM batches")[0]["n"])


def bodies(job: Job) -> list[dict[str, Any]]:
    """The requests the job's provider sends: each group's items in input order, 25 to a call."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for item in item_rows.items(job):
        groups[item.group].append(json.loads(item.input))
    response_format = protocol.batch_response_format(job.output_schema)
    size = job.batch.max_items
    return [
        chat_body(job.provider, job.prompt, response_format, protocol.encode(payloads[start:start + size]))
        for _, payloads in sorted(groups.items())
        for start in range(0, len(payloads), size)
    ]


async def bare_loop(job: Job) -> int:
    """The same requests, ``concurrency`` at a time, each answer decoded; the calls made."""
    requests = bodies(job)
    queue = iter(requests)
    url = job.provider.base_url + "/chat/completions"
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=job.batch.concurrency)) as client:

        async def worker() -> None:
            for body in queue:
                response = await client.post(url, json=body, timeout=job.provider.timeout)
                response.raise_for_status()
                response.json()

        await asyncio.gather(*(worker() for _ in range(job.batch.concurrency)))
    return len(requests)


#: A floor: the bare loop plus only the commits the brief puts in each slot's path.
FLOOR = "hand-written durable loop"
FLOOR_TABLE = """
CREATE TABLE items (id INTEGER PRIMARY KEY, key TEXT NOT NULL, grp TEXT NOT NULL, seq INTEGER NOT NULL,
    input TEXT NOT NULL, state TEXT NOT NULL DEFAULT 'pending', attempts INTEGER NOT NULL DEFAULT 0,
    batch_id INTEGER, output TEXT, result TEXT);
CREATE INDEX items_to_claim ON items (state, grp, seq);
"""


def floor_start(conn: sqlite3.Connection, batch_id: int, done: list[int]) -> list[tuple[int, str, str]]:
    """One commit: the slot's previous batch completed, its next batch (25 of one group) running, attempts + 1."""
    with transaction(conn):
        conn.execute(
            "UPDATE items SET state = 'completed', result = output "
            "WHERE id IN (SELECT value FROM json_each(?)) AND state = 'received'",
            (json.dumps(done),),
        )
        found = conn.execute("SELECT id, grp FROM items WHERE state = 'pending' ORDER BY grp, seq LIMIT 25").fetchall()
        chosen = [item_id for item_id, group in found if group == found[0][1]]
        return conn.execute(
            "UPDATE items SET state = 'running', attempts = attempts + 1, batch_id = ? "
            "WHERE id IN (SELECT value FROM json_each(?)) RETURNING id, key, input",
            (batch_id, json.dumps(chosen)),
        ).fetchall()


def floor_receive(conn: sqlite3.Connection, outputs: dict[int, str]) -> None:
    """One commit: the answer's outputs saved, those items received."""
    with transaction(conn):
        conn.executemany(
            "UPDATE items SET state = 'received', output = ? WHERE id = ? AND state = 'running'",
            [(output, item_id) for item_id, output in outputs.items()],
        )


async def durable_loop(job: Job, path: Path) -> int:
    """The floor: the bare loop with the commits the brief puts in each slot's path, hand-written; the calls made.

    A new store at ``path`` (WAL, ``synchronous=FULL``, one bare table) takes
    the input. Each slot commits its batch running before the call and the
    outputs received after it, as the runner must; the batch completes in the
    commit that starts the slot's next one (as the runner does). The bodies are
    built from the stored inputs and each answer's results are parsed; no
    events, counts, batch rows, lease or validation.
    """
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.executescript(FLOOR_TABLE)
    with transaction(conn):
        conn.executemany(
            "INSERT INTO items (key, grp, seq, input) VALUES (?, ?, ?, ?)",
            ((row.key, row.group, row.seq, row.input) for row in item_rows.items(job)),
        )
    url = job.provider.base_url + "/chat/completions"
    response_format = protocol.batch_response_format(job.output_schema)
    batch_ids = itertools.count(1)
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=job.batch.concurrency)) as client:

        async def slot() -> None:
            done: list[int] = []
            while started := floor_start(conn, next(batch_ids), done):
                payloads = [json.loads(item_input) for _, _, item_input in started]
                body = chat_body(job.provider, job.prompt, response_format, protocol.encode(payloads))
                response = await client.post(url, json=body, timeout=job.provider.timeout)
                response.raise_for_status()
                content = response.json()["choices"][0]["message"]["content"]
                results = protocol.parse_results(content, (key for _, key, _ in started)).results
                outputs = {item_id: protocol.encode(results[key]) for item_id, key, _ in started if key in results}
                floor_receive(conn, outputs)
                done = list(outputs)

        await asyncio.gather(*(slot() for _ in range(job.batch.concurrency)))
    (calls,) = conn.execute("SELECT count(DISTINCT batch_id) FROM items").fetchone()
    conn.close()
    return int(calls)


def huey_tasks(folder: Path, count: int) -> float:
    """Seconds for a SqliteHuey consumer (2 threads) to run ``count`` no-op tasks as they are enqueued."""
    from huey import SqliteHuey  # type: ignore[import-untyped]

    huey = SqliteHuey("runner-bench", filename=str(folder / "huey.db"))
    lock, done = threading.Lock(), threading.Event()
    ran = itertools.count(1)

    @huey.task()  # type: ignore[untyped-decorator]
    def noop() -> None:
        with lock:
            if next(ran) == count:
                done.set()

    consumer = huey.create_consumer(
        workers=2, worker_type="thread", periodic=False, check_worker_health=False,
        initial_delay=PEER_POLL_SECONDS, backoff=1.0, max_delay=PEER_POLL_SECONDS,
    )
    def enqueue_and_wait() -> None:
        for _ in range(count):
            noop()
        done.wait()

    consumer.start()
    try:
        return elapsed(enqueue_and_wait)
    finally:
        consumer.stop(graceful=True)


def dbos_workflows(folder: Path, count: int) -> float:
    """Seconds for DBOS on SQLite to run ``count`` no-op workflows through a queue with 2 workers."""
    from dbos import DBOS

    DBOS(config={"name": "runner-bench", "system_database_url": f"sqlite:///{folder / 'dbos.sqlite'}",
                 "log_level": "WARNING"})

    @DBOS.workflow()
    def noop() -> None:
        return None

    def enqueue_and_wait() -> None:
        handles = [queue.enqueue(noop) for _ in range(count)]
        for handle in handles:
            handle.get_result()

    DBOS.launch()
    try:
        queue = DBOS.register_queue("bench", worker_concurrency=2, polling_interval_sec=PEER_POLL_SECONDS)
        return elapsed(enqueue_and_wait)
    finally:
        DBOS.destroy()


def peer(name: str, count: int, repeats: int, measure: Callable[[], float]) -> tuple[float | None, str]:
    """A peer's tasks/s (the best of ``repeats``), or None and why it could not run here."""
    try:
        return count / min(measure() for _ in range(repeats)), ""
    except ImportError as exc:
        return None, f"{name} is not installed ({exc}); pip install -e '.[bench]'"
    except Exception as exc:  # noqa: BLE001 - said in the table, not hidden
        return None, f"{name} failed here: {type(exc).__name__}: {exc}"


@dataclass(frozen=True)
class Measured:
    seconds: float
    calls: int
    #: CPU seconds of this process and of the simulator's.
    cpu: float
    sim_cpu: float


def measured(go: Callable[[], int], sim_pid: int) -> Measured:
    before, sim_before = os.times(), cpu_seconds(sim_pid)
    start = time.perf_counter()
    calls = go()
    seconds = time.perf_counter() - start
    after = os.times()
    cpu = after.user + after.system - before.user - before.system
    return Measured(seconds, calls, cpu, cpu_seconds(sim_pid) - sim_before)


def run(*, quick: bool) -> list[Row]:
    count, repeats = (2_000, 3) if quick else (5_000, 3)
    dbos_count = 200 if quick else count  # DBOS does about 20-40 a second here
    with tempfile.TemporaryDirectory(prefix="runner-bench-") as tmp, simulator() as (url, sim_pid):
        folder = Path(tmp)
        job = sample_job(make_posts(count, folder / "posts.jsonl"), base_url=url)
        job = dataclasses.replace(job, batch=BatchLimits(max_items=25, max_chars=MAX_CHARS, concurrency=2))
        stores = (folder / f"runs-{n}.db" for n in itertools.count())
        results: dict[str, list[Measured]] = defaultdict(list)
        for _ in range(repeats):  # alternated, so that a slow spell of the machine hits both
            results["runner"].append(measured(lambda: runner_job(next(stores), job, count), sim_pid))
            results["bare httpx loop"].append(measured(lambda: asyncio.run(bare_loop(job)), sim_pid))
            results[FLOOR].append(measured(lambda: asyncio.run(durable_loop(job, next(stores))), sim_pid))
        huey = peer("Huey", count, repeats, lambda: huey_tasks(Path(tempfile.mkdtemp(dir=folder)), count))
        dbos = peer("DBOS", dbos_count, 1, lambda: dbos_workflows(folder, dbos_count))
        best = {kind: min(done, key=lambda m: m.seconds) for kind, done in results.items()}
        print(f"\nPer 1,000 items (the best run of each), {count:,} items:\n")
        print("| | calls | wall s | this process CPU s | simulator CPU s |\n|---|---|---|---|---|")
        per = 1000 / count
        for kind, m in best.items():
            print(f"| {kind} | {m.calls} | {m.seconds * per:.3f} | {m.cpu * per:.3f} | {m.sim_cpu * per:.3f} |")
        print(f"\nWhere the runner's time goes ({count:,} items, wall clock of the engine's thread):\n")
        print(profile(lambda: runner_job(next(stores), job, count)))
    rate, bare_rate, floor_rate = (count / best[kind].seconds for kind in ("runner", "bare httpx loop", FLOOR))
    dbos_name = "DBOS" if dbos_count == count else f"DBOS ({dbos_count:,} workflows)"
    floor = (floor_rate, "")
    targets = [(f"the {FLOOR} (a floor)", floor, 0.9), ("Huey", huey, 3.5), (dbos_name, dbos, 50)]
    return [
        *(Row(f"runner job vs {name}, {count:,} items", rate, "items/s", baseline, name,
              Target("ratio", ">=", limit), note)
          for name, (baseline, note), limit in targets),
        Row(f"runner job vs a bare httpx loop, {count:,} items", rate, "items/s", bare_rate, "a bare httpx loop"),
        Row(f"the {FLOOR} vs a bare httpx loop, {count:,} items", floor_rate, "items/s", bare_rate,
            "a bare httpx loop"),
        *(Row(f"the {FLOOR} vs {name}, {count:,} items", floor_rate, "items/s", baseline, name, note=note)
          for name, (baseline, note), _ in targets[1:]),
    ]

def main() -> None:
    standalone("End to end", run, __doc__)


if __name__ == "__main__":
    main()
