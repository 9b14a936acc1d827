"""The claim on PostgreSQL against SQLite: forming and starting a batch early, midway and late in a 1,000,000-item run.

For each backend (a SQLite file; a PostgreSQL schema of its own, the server
``RUNNER_BENCH_PG`` or one started by ``.ci/postgres``), a run of 1,000,000
items (100,000 with ``--quick``; ``bench.claim``'s short items over 12
groups) is added by the store's own ``add_items`` in chunks of 5,000, each
its own transaction, as ``runner run`` prepares an input. Then, at three
points of the run (none of its items done, half, 95 %), ``WARM`` + ``CLAIMS``
batches of 25 go through the four per-batch verbs (``bench.store.store_batch``:
claim, start, answer, settle, one commit each); the figures are the medians
over the last ``CLAIMS`` of the claim (``claim_batch``: forming a batch and
marking it queued) and of the start (``start_batch``: its items marked
running). Between the points the run is moved on by the same verbs, 250
items to a batch: its items completed, their events and answers kept.

Flat as the run grows: a late or midway claim against the early one of the
same backend, ratio near 1. The backends: PostgreSQL against SQLite at the
same point of the same run. Adding the items is timed too (items/s).

    python -m bench.claim_backends [--quick]
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from runner import lease
from runner.store import Store
from runner.store.additions import Preparing

from .claim import CLAIMS, WARM, rows
from .common import Row, postgres, sample_job, schema, standalone
from .store import NOW, TOKEN, Steps, store_batch

SIZE, QUICK_SIZE = 1_000_000, 100_000
#: Items added in one transaction (``runs.prepare``'s chunk).
CHUNK = 5_000
#: Items to a batch moving the run on between two points (larger batches settle slower per item: see the README).
FORWARD = 250
#: The points sampled: a name and the share of the run's items done before it.
POINTS = (("early", 0.0), ("midway", 0.5), ("late", 0.95))
BACKENDS = ("SQLite file", "PostgreSQL")


@contextmanager
def location(backend: str, folder: Path, server: str) -> Iterator[str | Path]:
    """A new store of ``backend``: a file in ``folder``, or a schema of the PostgreSQL ``server``."""
    if backend == "PostgreSQL":
        with schema(server) as url:
            yield url
    else:
        yield folder / "claims.db"


def sampled(where: str | Path, count: int) -> tuple[float, dict[str, tuple[float, float]]]:
    """A run of ``count`` items in the store at ``where``: the seconds to add them, and the median seconds of a claim
    and of a start at each point."""
    job = sample_job(Path("none.jsonl"))
    made = rows(count, "plain")
    points: dict[str, tuple[float, float]] = {}
    with Store(where) as store:
        lease.acquire(store, job.name, token=TOKEN, now=NOW)
        preparing = Preparing()
        started = time.perf_counter()
        for first in range(0, count, CHUNK):
            store.add_items(job, made[first:first + CHUNK], preparing, now=NOW, last=first + CHUNK >= count)
        added = time.perf_counter() - started
        del made
        held, done = (job.name, TOKEN), 0
        for name, share in POINTS:
            started = time.perf_counter()
            while done < int(share * count):
                moved = store_batch(store, preparing.run_id, held, Steps(), max_items=min(FORWARD, int(share * count) - done))
                if not moved:
                    raise RuntimeError(f"the run has no batch to claim with {done:,} of {count:,} items done")
                done += moved
            moving = time.perf_counter() - started
            claims, starts = [], []
            for n in range(WARM + CLAIMS):
                steps = Steps()
                moved = store_batch(store, preparing.run_id, held, steps)
                if not moved:
                    raise RuntimeError(f"the run ran out of items at its {name} point: make it larger")
                done += moved
                if n >= WARM:
                    claims.append(steps.seconds["queued"])
                    starts.append(steps.seconds["running"])
            points[name] = (statistics.median(claims), statistics.median(starts))
            print(f"  {name:<6} ({done:>9,} done, moved on in {moving:.0f} s): claim {points[name][0] * 1e3:.3f} ms, "
                  f"start {points[name][1] * 1e3:.3f} ms (load {os.getloadavg()[0]:.1f})", flush=True)
    return added, points


def run(*, quick: bool) -> list[Row]:
    count = QUICK_SIZE if quick else SIZE
    added: dict[str, float] = {}
    points: dict[str, dict[str, tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="runner-bench-", dir=os.environ.get("BENCH_TMP")) as tmp, \
            postgres() as server:
        for backend in BACKENDS:
            print(f"{backend}, {count:,} items:", flush=True)
            with location(backend, Path(tmp), server) as where:
                added[backend], points[backend] = sampled(where, count)
            print(f"  added in {added[backend]:.1f} s", flush=True)
    size = f"{count:,} items"
    result = [Row(f"adding {size} in chunks of {CHUNK:,}, PostgreSQL vs SQLite file", count / added["PostgreSQL"],
                  "items/s", count / added["SQLite file"], "SQLite file")]
    for step, index in (("claim", 0), ("start", 1)):
        for backend in BACKENDS:
            early = points[backend]["early"][index] * 1e3
            result.extend(Row(f"{step} of 25 on {backend}, {size}, {name} vs early", points[backend][name][index] * 1e3,
                              "ms", early, "early") for name, _ in POINTS[1:])
        result.extend(Row(f"{step} of 25, {size}, {name}, PostgreSQL vs SQLite file",
                          points["PostgreSQL"][name][index] * 1e3, "ms", points["SQLite file"][name][index] * 1e3,
                          "SQLite file") for name, _ in POINTS)
    return result


if __name__ == "__main__":
    standalone("The claim on both backends", run, __doc__)
