"""What the benchmark scripts share: result rows and their table, the machine, inputs, a profile."""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import os
import platform
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import quote

from pyinstrument import Profiler

from runner import jobs
from runner.inputs import InputSpec
from runner.jobs import Job

ROOT = Path(__file__).resolve().parent.parent
#: Every random choice of the benchmarks starts from this seed.
SEED = 20261130
#: Where ``.ci/postgres`` keeps the state of the server the benches start (``RUNNER_PG_STATE``, when not set).
PG_STATE = "/tmp/pgstate-bench"

_schemas = itertools.count(1)


@dataclass(frozen=True)
class Target:
    """A bound on a row's ratio to its baseline, or on its value."""

    on: Literal["ratio", "value"]
    op: Literal[">=", "<", "<="]
    limit: float

    def holds(self, number: float) -> bool:
        if self.op == ">=":
            return number >= self.limit
        return number < self.limit if self.op == "<" else number <= self.limit

    def describe(self, unit: str) -> str:
        sign = {">=": "≥", "<": "<", "<=": "≤"}[self.op]
        return f"ratio {sign} {self.limit:g}" if self.on == "ratio" else f"{sign} {self.limit:g} {unit}"


@dataclass(frozen=True)
class Row:
    """One measure: its value, the baseline taken in the same run, and the target, if any."""

    measure: str
    value: float | None
    unit: str
    baseline: float | None = None
    #: What the baseline is ("raw sqlite3", "same at 10,000 items").
    against: str = ""
    target: Target | None = None
    #: Why there is no value (a peer that could not run here).
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if self.value is None or not self.baseline:
            return None
        return self.value / self.baseline

    @property
    def met(self) -> bool | None:
        """Whether the target holds; None when there is no target or nothing to judge."""
        number = self.ratio if self.target and self.target.on == "ratio" else self.value
        if self.target is None or number is None:
            return None
        return self.target.holds(number)


def fmt(value: float, unit: str) -> str:
    if unit == "items/s":
        return f"{value:,.0f} items/s"
    if unit == "ms":
        return f"{value:.2f} ms"
    if unit == "s":
        return f"{value:.2f} s"
    if unit == "CPU s":
        return f"{value:.3f} CPU s"
    if unit in ("D", "polls", "of bound"):  # multiples and shares: their decimals matter
        return f"{value:.2f} {unit}"
    return f"{value:,.0f} {unit}"


def table(rows: Sequence[Row]) -> str:
    """The rows as a Markdown table: measure, value, baseline, ratio, target, met or missed."""
    lines = ["| measure | value | baseline | ratio | target | met |", "|---|---|---|---|---|---|"]
    for row in rows:
        value = fmt(row.value, row.unit) if row.value is not None else f"not run: {row.note}"
        baseline = f"{fmt(row.baseline, row.unit)} ({row.against})" if row.baseline is not None else "—"
        ratio = f"{row.ratio:.2f}" if row.ratio is not None else "—"
        target = row.target.describe(row.unit) if row.target else "—"
        met = {True: "met", False: "**missed**", None: "—"}[row.met]
        if row.target and row.value is None:
            met = "**not measured**"
        lines.append(f"| {row.measure} | {value} | {baseline} | {ratio} | {target} | {met} |")
    return "\n".join(lines)


def report(title: str, rows: Sequence[Row]) -> None:
    print(f"\n## {title}\n\n{table(rows)}\n")
    missed = [row.measure for row in rows if row.target and row.met is not True]
    if missed:
        print("Targets missed or not measured: " + "; ".join(missed))


def machine() -> str:
    """The machine the figures were taken on: cores, CPU model, Python and SQLite versions, its load."""
    cpu = "unknown"
    with open("/proc/cpuinfo", encoding="utf-8") as info:
        for line in info:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    load = ", ".join(f"{n:.1f}" for n in os.getloadavg())  # other work on the machine skews the figures
    return (
        f"{os.cpu_count()} cores ({cpu}), {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}; load average {load}"
    )


def options(description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="a smaller, shorter run")
    return parser.parse_args()


def standalone(title: str, run: Callable[..., Sequence[Row]], doc: str | None) -> None:
    """One area's benchmark run as a script (``python -m bench.NAME [--quick]``): its table, under ``title``."""
    args = options(doc.splitlines()[0] if doc else "")
    print(f"Machine: {machine()}{' (--quick)' if args.quick else ''}")
    report(title, run(quick=args.quick))


def sample_job(source: Path, *, name: str = "bench", base_url: str = "http://127.0.0.1:8765/v1") -> Job:
    """The sample job (its prompt, batching and output schema) over ``source``."""
    job = jobs.load(ROOT / "sample_data" / "job.toml")
    provider = dataclasses.replace(job.provider, base_url=base_url)
    return dataclasses.replace(job, name=name, input=InputSpec(source, "jsonl"), provider=provider)


def make_posts(count: int, path: Path) -> Path:
    """``count`` deterministic posts (``sample_data/make_posts.py``, its fixed seed) as JSONL."""
    script = ROOT / "sample_data" / "make_posts.py"
    subprocess.run([sys.executable, str(script), "--count", str(count), "--out", str(path)], check=True)
    return path


def profile(run: Callable[[], object], *, threshold: float = 0.02) -> str:
    """A wall-clock profile of ``run`` on this thread: the call tree's entries of at least ``threshold``."""
    profiler = Profiler(interval=0.0005, async_mode="disabled")
    with profiler:
        run()
    text = profiler.output_text(processor_options={"filter_threshold": threshold})
    return text.split("\n\n", 2)[-1]  # without pyinstrument's banner


def elapsed(run: Callable[[], object]) -> float:
    """Seconds ``run`` took."""
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """One raw sqlite3 write transaction, as the baselines make them."""
    conn.execute("BEGIN IMMEDIATE")
    yield
    conn.execute("COMMIT")


@contextmanager
def postgres() -> Iterator[str]:
    """A PostgreSQL database the benches may make schemas in: ``RUNNER_BENCH_PG``, else a server of their own.

    The server of their own is started by ``.ci/postgres start`` (its state in
    ``RUNNER_PG_STATE``, else ``PG_STATE``) and stopped at the end. One that
    cannot start raises, with what ``.ci/postgres`` said.
    """
    given = os.environ.get("RUNNER_BENCH_PG")
    if given:
        yield given
        return
    env = {**os.environ, "RUNNER_PG_STATE": os.environ.get("RUNNER_PG_STATE", PG_STATE)}
    script = str(ROOT / ".ci" / "postgres")
    started = subprocess.run([script, "start"], capture_output=True, text=True, env=env)
    if started.returncode != 0:
        raise RuntimeError(f".ci/postgres start failed: {started.stderr.strip()[-500:]}")
    try:
        yield started.stdout.strip()
    finally:
        subprocess.run([script, "stop"], capture_output=True, env=env, check=False)


@contextmanager
def schema(url: str) -> Iterator[str]:
    """A store URL in a new schema of the database ``url`` (its name this process's), dropped at the end."""
    import psycopg

    name = f"bench_{os.getpid()}_{next(_schemas)}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {name}")
        try:
            yield f"{url}{'&' if '?' in url else '?'}options={quote(f'-csearch_path={name}')}"
        finally:
            admin.execute(f"DROP SCHEMA {name} CASCADE")
