"""High concurrency: the runner against a plain ``AsyncOpenAI`` loop, at real latency and C calls at a time.

The simulator runs in a process of its own with latency L (``runner sim
--latency L --jitter 0``), for L in 1.0 s and 0.25 s. For each concurrency
C in 8, 32 and 64, on the same posts (``sample_data/make_posts.py``) and the
sample job's prompt, 25 items to a call:

- the runner: ``runner run JOB --no-wait`` of the job with ``concurrency = C``
  on a fresh store, the real console script in a process of its own (its
  imports, the input read into the store, every transition committed,
  every answer validated);
- a plain loop: ``python -m bench.concurrency --loop JOB OUT`` in a process of
  its own, what a person would write instead: the same requests (the same
  items in the same batches of 25 by group, the same bodies) through one
  ``openai.AsyncOpenAI`` client, ``asyncio.Semaphore(C)`` calls at a time,
  each answer's results appended to a JSONL file.

Each side's items/s is its items over its process's wall time, start to
exit; its CPU is the process's user and system time (``wait4``), the
simulator's left out (printed apart). The two take turns, and each keeps its
best run. Items per point are sized so that a point runs about 12 s
(``--quick``: 4 s).

Targets: the runner's items/s at least 0.9 times the loop's, its CPU per
1,000 items at most 1.3 times the loop's, and its items/s never lower at a
higher C (up to C = 64, within 5 %: two runs of the same code differ by that).

    python -m bench.concurrency [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .common import ROOT, Row, Target, machine, make_posts, options, report

#: The latencies (seconds a call) and concurrencies measured.
LATENCIES = (1.0, 0.25)
CONCURRENCIES = (8, 32, 64)
#: Items to a call.
BATCH = 25
#: About what the machine's CPU allows either side, items/s: the rate a point's item count assumes when
#: the upstream would allow more.
CPU_BOUND_RATE = 3_000
#: How long a point is meant to run, seconds, in a full and a quick run.
SECONDS, QUICK_SECONDS = 12, 4
#: Rate at a higher C may be this much below the rate at a lower one and still count as not slower (noise).
NOISE = 0.05
#: The runner's console script beside this Python.
RUNNER = str(Path(sys.executable).with_name("runner"))


def items_for(latency: float, concurrency: int, seconds: float) -> int:
    """Items for a point to run about ``seconds``: what the upstream or the CPU allows, a whole number of calls."""
    rate = min(concurrency * BATCH / latency, CPU_BOUND_RATE)
    return max(round(rate * seconds / BATCH), 2 * concurrency) * BATCH


def job_file(folder: Path, posts: Path, url: str, concurrency: int) -> Path:
    """The sample job over ``posts`` against ``url``, ``concurrency`` calls at a time, every batch full."""
    text = (ROOT / "sample_data" / "job.toml").read_text()
    for pattern, value in ((r"^input = .*$", f"input = {json.dumps(str(posts))}"),
                           (r"^max_chars = .*$", "max_chars = 1000000"),
                           (r"^concurrency = .*$", f"concurrency = {concurrency}"),
                           (r"^base_url = .*$", f"base_url = {json.dumps(url)}")):
        text, found = re.subn(pattern, value, text, count=1, flags=re.MULTILINE)
        if not found:
            raise RuntimeError(f"sample_data/job.toml has no line {pattern}")
    path = folder / f"job-{concurrency}-{posts.stem}.toml"
    path.write_text(text)
    return path


@dataclass(frozen=True)
class Timed:
    """A process's wall time, start to exit, and the CPU seconds it used (user and system)."""

    seconds: float
    cpu: float


def timed(command: list[str]) -> Timed:
    """Run ``command`` to its end; its wall and CPU time. A failure raises, with what it printed."""
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert process.stdout is not None
    said = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"{command} exited {process.returncode}: {said.decode(errors='replace')[-2000:]}")
    return Timed(seconds, usage.ru_utime + usage.ru_stime)


async def plain_loop(job_path: Path, out: Path) -> int:
    """The loop a person would write: the job's requests, C at a time, each result appended to ``out``."""
    import openai

    from runner import jobs

    from .end_to_end import bodies

    job = jobs.load(job_path)
    limit = asyncio.Semaphore(job.batch.concurrency)
    client = openai.AsyncOpenAI(base_url=job.provider.base_url, api_key="unused", max_retries=0)
    written = 0
    with out.open("a", encoding="utf-8") as results:

        async def send(body: dict[str, object]) -> None:
            nonlocal written
            async with limit:
                completion = await client.chat.completions.create(**body)  # type: ignore[call-overload]
            for result in json.loads(completion.choices[0].message.content)["results"]:
                results.write(json.dumps(result) + "\n")
                written += 1

        await asyncio.gather(*(send(body) for body in bodies(job)))
    await client.close()
    return written


def point(
    folder: Path, url: str, latency: float, concurrency: int, *, seconds: float, turns: int
) -> tuple[int, Timed, Timed]:
    """One point: its items, and the runner's and the loop's best of ``turns`` runs (they take turns)."""
    count = items_for(latency, concurrency, seconds)
    posts = folder / f"posts-{count}.jsonl"
    if not posts.exists():
        make_posts(count, posts)
    job = job_file(folder, posts, url, concurrency)
    runner, loop = [], []
    for turn in range(turns):
        store, out = folder / f"runs-{concurrency}-{turn}.db", folder / f"out-{concurrency}-{turn}.jsonl"
        runner.append(timed([RUNNER, "run", str(job), "--db", str(store), "--no-wait"]))
        loop.append(timed([sys.executable, "-m", "bench.concurrency", "--loop", str(job), str(out)]))
        lines = sum(1 for _ in out.open(encoding="utf-8"))
        if lines != count:
            raise RuntimeError(f"the plain loop wrote {lines} results of {count}")
        for path in (store, Path(f"{store}-wal"), Path(f"{store}-shm"), out):
            path.unlink(missing_ok=True)
    return count, min(runner, key=lambda t: t.seconds), min(loop, key=lambda t: t.seconds)


def run(*, quick: bool) -> list[Row]:
    from .end_to_end import cpu_seconds, simulator

    seconds, turns = (QUICK_SECONDS, 1) if quick else (SECONDS, 2)
    rows: list[Row] = []
    print("\n| L s | C | items | runner items/s | loop items/s | ratio | runner CPU s / 1,000 | loop CPU s / 1,000 | "
          "ratio | simulator CPU s / 1,000 | load |\n|---|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="runner-bench-") as tmp:
        folder = Path(tmp)
        for latency in LATENCIES:
            rates: list[tuple[int, float]] = []
            with simulator(latency) as (url, sim_pid):
                for concurrency in CONCURRENCIES:
                    sim_before = cpu_seconds(sim_pid)
                    count, runner, loop = point(folder, url, latency, concurrency, seconds=seconds, turns=turns)
                    sim_cpu = (cpu_seconds(sim_pid) - sim_before) / (2 * turns)  # a run of either side
                    per = 1000 / count
                    rate, loop_rate = count / runner.seconds, count / loop.seconds
                    rates.append((concurrency, rate))
                    print(f"| {latency:g} | {concurrency} | {count:,} | {rate:,.0f} | {loop_rate:,.0f} | "
                          f"{rate / loop_rate:.2f} | {runner.cpu * per:.3f} | {loop.cpu * per:.3f} | "
                          f"{runner.cpu / loop.cpu:.2f} | {sim_cpu * per:.3f} | {os.getloadavg()[0]:.1f} |",
                          flush=True)
                    where = f"L = {latency:g} s, C = {concurrency}, {count:,} items"
                    rows.append(Row(f"runner vs a plain AsyncOpenAI loop, {where}", rate, "items/s", loop_rate,
                                    "the plain loop", Target("ratio", ">=", 0.9)))
                    rows.append(Row(f"runner CPU per 1,000 items vs the plain loop's, {where}", runner.cpu * per,
                                    "CPU s", loop.cpu * per, "the plain loop", Target("ratio", "<=", 1.3)))
            rows.extend(monotone(latency, rates))
    return rows


def monotone(latency: float, rates: list[tuple[int, float]]) -> list[Row]:
    """For each higher C, its items/s against the best at any lower C: never slower (within the noise)."""
    return [
        Row(f"runner at L = {latency:g} s, C = {concurrency} vs its best at a lower C", rate, "items/s",
            max(lower for c, lower in rates if c < concurrency), "the best at a lower C",
            Target("ratio", ">=", 1 - NOISE))
        for concurrency, rate in rates[1:]
    ]


def main() -> None:
    if sys.argv[1:2] == ["--loop"]:
        parser = argparse.ArgumentParser()
        parser.add_argument("--loop", type=Path)
        parser.add_argument("out", type=Path)
        args = parser.parse_args()
        asyncio.run(plain_loop(args.loop, args.out))
        return
    args = options(__doc__.splitlines()[0] if __doc__ else "")
    print(f"Machine: {machine()}")
    report("High concurrency", run(quick=args.quick))


if __name__ == "__main__":
    main()
