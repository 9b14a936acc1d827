"""The claim at scale: forming one batch from a run of 100,000 to 1,000,000 pending items.

The claim is the engine's query on every batch (``Store.claim_batch``): it
must stay one short read of the claim index however many items wait, with
priorities among them (issue 19: the index holds the priority) and with
scheduled items waiting for a time ahead (released by a range read of their
own index, however many wait for later). Each store is made by the store's
own ``add_items`` (one stage, 12 groups, short inputs), then ``WARM`` + ``CLAIMS``
batches of 25 are formed one after another; the figure is the median of the last ``CLAIMS``.

Cases: ``plain`` (every item priority 0, none scheduled: a run as before
issue 19), ``priorities`` (each item a seeded priority 0 to 9) and
``scheduled`` (a tenth of the items scheduled a day ahead). A code without
priorities or schedules runs ``plain`` alone, so that the same script
measures a baseline checkout (``PYTHONPATH=<checkout> python -m bench.claim``)
in the same session.

    python -m bench.claim [--sizes 100000,1000000]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

import runner
from runner.inputs import InputSpec
from runner.item_rows import ItemRow
from runner.jobs import Job
from runner.store import Store
from runner.store.additions import Preparing

SEED = 19
#: Claims timed, after ``WARM`` untimed ones (the pages of a store just written are read in).
CLAIMS = 100
WARM = 5
NOW = 1_800_000_000.0
QUEUE_FIELDS = "priority" in ItemRow._fields


def rows(count: int, case: str) -> list[ItemRow]:
    """``count`` items over 12 groups, with the case's priorities or times (seeded)."""
    rng = random.Random(SEED)
    made = []
    for seq in range(count):
        text = f'{{"id":"p{seq:07d}","body":"post {seq}"}}'
        row = ItemRow(f"p{seq:07d}", f"2026-{seq % 12 + 1:02d}", seq, text, len(text), f"{seq:064x}")
        if case == "priorities":
            row = row._replace(priority=rng.randint(0, 9))
        elif case == "scheduled" and rng.random() < 0.1:
            row = row._replace(at=NOW + 86_400)
        made.append(row)
    return made


def median_claim(folder: Path, count: int, case: str) -> float:
    """The median seconds of one claim of 25 in a fresh store of ``count`` items of ``case``."""
    path = folder / f"{case}-{count}.db"
    job = Job(name="bench", input=InputSpec(folder / "none.jsonl", "jsonl"), group="month")
    with Store(path) as store:
        preparing = Preparing()
        store.add_items(job, rows(count, case), preparing, now=NOW, last=True)
        times = []
        for n in range(WARM + CLAIMS):
            started = time.perf_counter()
            batch = store.claim_batch(preparing.run_id, max_items=25, max_chars=20_000, now=NOW)
            if n >= WARM:
                times.append(time.perf_counter() - started)
            assert batch is not None
    path.unlink()
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000")
    sizes = [int(size) for size in parser.parse_args().sizes.split(",")]
    cases = ["plain", "priorities", "scheduled"] if QUEUE_FIELDS else ["plain"]
    print(f"runner from {Path(runner.__file__).parent}; load {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as folder:
        for count in sizes:
            for case in cases:
                seconds = median_claim(Path(folder), count, case)
                print(f"claim of 25, {count:>9,} items, {case:<10}: {seconds * 1e3:8.3f} ms "
                      f"(load {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
