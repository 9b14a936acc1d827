"""Cold start: the wall time of the light commands, each a fresh process, and the memory of an export.

Each command is the real ``runner`` console script (the one beside
``sys.executable``, else ``python -m runner``, with this checkout first on
``PYTHONPATH``), started afresh 15 times (7 with ``--quick``); the baseline,
``python -c pass``, is started in the same rounds, so both see the same load.
The value is the median; the target is under 150 ms wall.
The store is one that ``bench.scale`` builds: a run a dead engine left,
10,000 items, 2 % of them failed in five kinds; beside it a run with no
failed item, for ``runner failures`` with none to list.

Export's peak memory: ``runner export bench --format jsonl`` of 1,000,000
items (100,000 with ``--quick``) against the same of 10,000; bounded memory
reads as a ratio near 1. It is the ru_maxrss of the export's process, started
by a small launcher: Linux carries a parent's peak into a child it spawns, and
the bench's own would hide the export's.

    python -m bench.cold_start [--quick]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

if not __package__:  # run as a script: python bench/cold_start.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import ROOT, Row, Target, sample_job, standalone  # noqa: E402
from bench.scale import NAME, NOW, build  # noqa: E402

from runner.store import Store  # noqa: E402

#: Issue #15's target for each light command.
TARGET = Target("value", "<", 150)
#: Bounded memory: exporting 100 times the items takes about as much memory.
MEMORY_TARGET = Target("ratio", "<", 1.5)
BASELINE = "python -c pass"
#: A second run in the store, with no failed item: ``runner failures`` has nothing to list.
NONE_FAILED = "clean"

#: Starts ``argv[1:]``, waits for it and prints its peak memory (KiB) and its exit code.
LAUNCHER = (
    "import os, sys; pid = os.posix_spawn(sys.argv[1], sys.argv[1:], os.environ); "
    "_, status, usage = os.wait4(pid, 0); print(usage.ru_maxrss, os.waitstatus_to_exitcode(status))"
)


def add_a_clean_run(db: Path) -> None:
    """The run :data:`NONE_FAILED` beside the bench's: no item yet, none failed."""
    job = sample_job(db.with_suffix(".jsonl"), name=NONE_FAILED)
    with Store(db) as store, store.write() as conn:
        conn.execute("INSERT INTO runs (name, job, nonce, created_at, updated_at) VALUES (?, ?, 'bench', ?, ?)",
                     (NONE_FAILED, job.to_json(), NOW, NOW))


def runner_script() -> list[str]:
    """How a person starts ``runner``: the console script beside this Python, else ``python -m runner``."""
    script = Path(sys.executable).with_name("runner")
    return [str(script)] if script.exists() else [sys.executable, "-m", "runner"]


def environment() -> dict[str, str]:
    """This process's environment with this checkout first on PYTHONPATH, so that its runner is the one timed."""
    paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def commands(db: Path) -> dict[str, list[str]]:
    """Each light command, by the name its row shows, as a whole command line."""
    runner, store = runner_script(), ["--db", str(db)]
    return {
        BASELINE: [sys.executable, "-c", "pass"],
        "runner --help": [*runner, "--help"],
        f"runner status {NAME}": [*runner, "status", NAME, *store],
        f"runner status {NAME} --json": [*runner, "status", NAME, "--json", *store],
        "runner -h": [*runner, "-h"],
        f"runner failures {NAME}": [*runner, "failures", NAME, *store],
        f"runner failures {NAME} --json": [*runner, "failures", NAME, "--json", *store],
        f"runner failures {NONE_FAILED}": [*runner, "failures", NONE_FAILED, *store],
    }


def started(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one run of ``argv``, from its start to its exit; its output is thrown away."""
    start = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, env, file_actions=[(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)])
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {os.waitstatus_to_exitcode(status)}")
    return wall, usage.ru_utime + usage.ru_stime


def starts(db: Path, rounds: int) -> dict[str, list[tuple[float, float]]]:
    """Every command started once a round, in turn, for ``rounds`` rounds (after one round to warm the caches)."""
    env, lines = environment(), commands(db)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in lines}
    for round_ in range(rounds + 1):
        for name, argv in lines.items():
            measured = started(argv, env)
            if round_:
                times[name].append(measured)
    return times


def export_peak(db: Path) -> tuple[float, float]:
    """Peak memory (MB) and wall seconds of ``runner export`` of the whole run as JSONL, to /dev/null."""
    argv = [*runner_script(), "export", NAME, "--format", "jsonl", "--out", os.devnull, "--db", str(db)]
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", LAUNCHER, *argv], env=environment(), check=True,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - start
    peak, code = done.stdout.split()
    if code != "0":
        raise RuntimeError(f"{' '.join(argv)} exited {code}: {done.stderr.strip()}")
    return int(peak) / 1024, seconds


class Summary(NamedTuple):
    """One command's starts, summed up once: wall median and fastest, CPU median (seconds)."""

    wall: float
    fastest: float
    cpu: float


def summed(times: dict[str, list[tuple[float, float]]]) -> dict[str, Summary]:
    """Each command's starts as their medians and fastest, each computed once."""
    return {
        name: Summary(statistics.median(w for w, _ in measured), min(w for w, _ in measured),
                      statistics.median(c for _, c in measured))
        for name, measured in times.items()
    }


def breakdown(summaries: dict[str, Summary]) -> str:
    """Each command's wall median and fastest, its CPU median, and its wall median above the baseline's."""
    base = summaries[BASELINE].wall
    lines = ["| command | wall, median | wall, fastest | CPU, median | above `python -c pass` |", "|---" * 5 + "|"]
    for name, summary in summaries.items():
        lines.append(f"| `{name}` | {summary.wall * 1000:.0f} ms | {summary.fastest * 1000:.0f} ms | "
                     f"{summary.cpu * 1000:.0f} ms | {(summary.wall - base) * 1000:+.0f} ms |")
    return "\n".join(lines)


def run(*, quick: bool) -> list[Row]:
    rounds, sizes = (7, (10_000, 100_000)) if quick else (15, (10_000, 1_000_000))
    with tempfile.TemporaryDirectory(prefix="runner-bench-") as name:
        stores = {count: Path(name) / f"store-{count}.db" for count in sizes}
        for count, path in stores.items():
            build(path, count)
        add_a_clean_run(stores[sizes[0]])
        summaries = summed(starts(stores[sizes[0]], rounds))
        exports = {count: export_peak(path) for count, path in stores.items()}
    print(f"\nStarts, {rounds} of each:\n\n{breakdown(summaries)}")
    print("\nExports: " + "; ".join(f"{count:,} items in {seconds:.1f} s" for count, (_, seconds) in exports.items()))
    base = summaries[BASELINE].wall * 1000
    rows = [
        Row(f"`{line}`, wall", summary.wall * 1000, "ms", base, BASELINE, TARGET)
        for line, summary in summaries.items() if line != BASELINE
    ]
    small, large = sizes
    return [*rows, Row(f"`runner export {NAME} --format jsonl`, peak memory, {large:,} items", exports[large][0], "MB",
                       exports[small][0], f"at {small:,} items", MEMORY_TARGET)]


def main() -> None:
    standalone("Cold start", run, __doc__)


if __name__ == "__main__":
    main()
