"""Several workers on one run: the items/s of 1, 2 and 4 ``runner run`` processes together, on each backend.

One simulator (``runner.sim.Simulator``, latency L = 1 s, no jitter) runs
in this process on 127.0.0.1, its ledger read after each run. For each
backend (a SQLite file; a PostgreSQL schema of its own, the server
``RUNNER_BENCH_PG`` or one started by ``.ci/postgres``) and each number of
workers W in 1, 2, 4: a fresh store, then W ``runner run JOB --no-wait``
processes started together (the real console script; one prepares the run,
the others join it) on the sample job with ``concurrency`` C = 256 over the
same 19,200 posts (6,400 with ``--quick``), 25 items to a call. Each worker
holds at most its share, ceil(C / live workers), so the run's C calls in
flight are shared whatever W is; C is large enough (6,400 items/s at L = 1 s)
that one worker's CPU, not C, is what limits it: more workers add processes
(CPU, connections to the store), not calls.

The rate is the items over the wall time from the first start to the last
exit (start-up and the input read into the store included, as in
``bench.concurrency``); the baseline is one worker on the same backend in the
same run. Every run must end with every process exited 0, each item billed
exactly once by the simulator, and never more than C calls in flight
together: otherwise the bench stops and says what it saw.

    python -m bench.workers [--quick]
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from runner.sim import Simulator

from .common import ROOT, Row, make_posts, postgres, schema, standalone
from .concurrency import RUNNER, job_file

WORKERS = (1, 2, 4)
LATENCY = 1.0
#: The run's concurrency: calls in flight across all its workers. Large, so that it is not what limits one worker
#: (6,400 items/s at L = 1 s, twice what ``bench.concurrency`` saw one process reach on this kind of machine).
CONCURRENCY = 256
#: Items of a run, in a full and a quick run (at least a few rounds of C calls).
ITEMS, QUICK_ITEMS = 19_200, 6_400


def workers(count: int, job: Path, db: str, folder: Path) -> tuple[float, float]:
    """``count`` ``runner run`` processes of ``job`` on the store ``db``, started together: wall and CPU seconds."""
    env = {**os.environ, "RUNNER_DB": db}
    logs = [folder / f"worker-{n}.log" for n in range(count)]
    start = time.perf_counter()
    processes = []
    for log in logs:
        with log.open("wb") as out:
            processes.append(subprocess.Popen([RUNNER, "run", str(job), "--no-wait"], cwd=ROOT, env=env,
                                              stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT))
    cpu, failed = 0.0, []
    for process, log in zip(processes, logs):
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        cpu += usage.ru_utime + usage.ru_stime
        if process.returncode != 0:
            failed.append(f"exit {process.returncode}: {log.read_text(errors='replace')[-1500:]}")
    seconds = time.perf_counter() - start
    if failed:
        raise RuntimeError(f"{len(failed)} of {count} workers failed: " + " | ".join(failed))
    return seconds, cpu


def billed_once(sim: Simulator, keys: set[str]) -> str:
    """What the ledger billed, checked: each of ``keys`` exactly once, nothing else, at most C calls in flight."""
    ledger = sim.ledger.snapshot()
    billed: dict[str, int] = ledger["billed"]
    twice = sorted(key for key, times in billed.items() if times > 1)
    missing, unknown = keys - billed.keys(), billed.keys() - keys
    said = (f"{len(billed):,} of {len(keys):,} items billed, {len(twice)} more than once, "
            f"at most {ledger['max_in_flight']} calls in flight of C = {CONCURRENCY}")
    if twice or missing or unknown or ledger["max_in_flight"] > CONCURRENCY:
        raise RuntimeError(f"the ledger is wrong: {said}; {len(missing)} never billed, {len(unknown)} unknown, "
                           f"billed twice: {twice[:10]}")
    return said


@contextmanager
def fresh_store(folder: Path, server: str | None, name: str) -> Iterator[str]:
    """A new store: the file ``name`` in ``folder`` (removed at the end), or a schema of the PostgreSQL ``server``."""
    if server is not None:
        with schema(server) as url:
            yield url
        return
    path = folder / name
    try:
        yield str(path)
    finally:
        for kept in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
            kept.unlink(missing_ok=True)


def measure(sim: Simulator, backend: str, job: Path, keys: set[str], folder: Path, server: str | None) -> list[float]:
    """The items/s of each number of workers on a fresh store of ``backend``, each run checked against the ledger."""
    rates: list[float] = []
    for count in WORKERS:
        with fresh_store(folder, server, f"runs-{count}.db") as db:
            sim.ledger.reset()
            sim_before = time.process_time()  # the simulator's threads are this process's only work meanwhile
            seconds, cpu = workers(count, job, db, folder)
            sim_cpu = time.process_time() - sim_before
        said = billed_once(sim, keys)
        rates.append(len(keys) / seconds)
        per = 1000 / len(keys)
        print(f"| {backend} | {count} | {len(keys):,} | {seconds:.1f} | {rates[-1]:,.0f} | "
              f"{rates[-1] / rates[0]:.2f} | {cpu * per:.3f} | {sim_cpu * per:.3f} | {said} | "
              f"{os.getloadavg()[0]:.1f} |", flush=True)
    return rates


def run(*, quick: bool) -> list[Row]:
    count = QUICK_ITEMS if quick else ITEMS
    rows: list[Row] = []
    print("\n| backend | workers | items | s | items/s | × 1 worker | workers' CPU s / 1,000 | simulator CPU s / 1,000 "
          "| ledger | load |\n|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="runner-bench-") as tmp, postgres() as server, \
            Simulator(latency=LATENCY).start() as sim:
        folder = Path(tmp)
        posts = make_posts(count, folder / f"posts-{count}.jsonl")
        keys = {json.loads(line)["id"] for line in posts.open(encoding="utf-8")}
        job = job_file(folder, posts, sim.base_url, CONCURRENCY)
        rates = {}
        for backend, at in (("SQLite file", None), ("PostgreSQL", server)):
            rates[backend] = measure(sim, backend, job, keys, folder, at)
            where = f"{backend}, L = {LATENCY:g} s, C = {CONCURRENCY}, {count:,} items"
            rows.extend(Row(f"{n} workers vs 1, {where}", rate, "items/s", rates[backend][0], "1 worker")
                        for n, rate in zip(WORKERS[1:], rates[backend][1:]))
        rows.extend(Row(f"PostgreSQL vs SQLite file, {n} worker{'s' if n > 1 else ''}, {count:,} items", pg, "items/s",
                        lite, "SQLite file") for n, pg, lite in zip(WORKERS, rates["PostgreSQL"], rates["SQLite file"]))
    return rows


if __name__ == "__main__":
    standalone("Several workers", run, __doc__)
