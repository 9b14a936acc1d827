"""The Batch API: a job of kind ``openai-batch`` against the simulator's batch delay D.

The sample job (its prompt and schema, posts grouped by month) as kind
``openai-batch``, run by ``runs.execute`` on a fresh store against the
simulator in this process, each upstream batch taking D seconds:

- N items with the Batch API's own defaults (``runner.batch_api``: 50,000 items
  a batch, 16 in flight): wall time as a multiple of D, target under 2 D;
  the baseline, in the same run, is the chat's defaults (25 items a batch, 2
  in flight), which every ``openai-batch`` run had before;
- every batch in flight: 10,000 items (2,000 with ``--quick``), 25 a batch,
  ``concurrency`` = the number of batches (about 410, by month): items completed with exit 0
  (target: all of them), its wall in D for context;
- for each: polls per upstream batch, and the notice lag: for every batch, the
  first poll at or after its end less its end, set against its bound
  max(10 s, 10 % of the time waited) (``runner.rules.polls.lag_bound``); the
  worst share of its bound is the row (target under 1). The wait begins with
  a batch's first poll, made as soon as its id is saved and its reference
  looked up; how late that came (a busy runner) is the next row's, from the
  batch's end to the poll that saw it, no target.

    python -m bench.batch_api [--quick]
"""

from __future__ import annotations

import asyncio
import dataclasses
import tempfile
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from runner import batch_api, item_rows, runs
from runner.jobs import BatchLimits, Job
from runner.rules import polls
from runner.sim import Simulator
from runner.store import Store

from .common import SEED, Row, Target, make_posts, sample_job, standalone


@dataclass(frozen=True)
class Measured:
    """One run of the job: its wall time, how it ended, its upstream batches, their polls and notice lags."""

    seconds: float
    exit_code: int
    completed: int
    batches: int
    polls: int
    #: The worst (lag, its bound) over the run's batches, in seconds.
    worst: tuple[float, float]
    #: The most seconds from a batch's end to its notice, however late its wait began.
    latest: float

    @property
    def lag_share(self) -> float:
        lag, bound = self.worst
        return lag / bound


class Polls:
    """The times of the polls of each upstream batch (``GET /v1/batches/{id}``), as the simulator saw them."""

    def __init__(self) -> None:
        self.times: dict[str, list[float]] = defaultdict(list)
        self._lock = threading.Lock()

    def __call__(self, method: str, path: str) -> None:
        parts = path.split("/")
        if method == "GET" and len(parts) == 4 and parts[2] == "batches":
            with self._lock:
                self.times[parts[3]].append(time.time())

    def worst(self, timeline: dict[str, tuple[float, float]]) -> tuple[float, float]:
        """The batch noticed latest against its bound: (lag, bound) in seconds.

        The wait begins with a batch's first poll (the runner polls at once,
        its id saved); a batch that ended before is noticed by that poll, its
        lag 0. How long the runner took to begin waiting is :meth:`latest`'s.
        """
        lags = []
        for batch_id, (_, ends) in timeline.items():
            began = min(self.times[batch_id], default=float("inf"))
            noticed = min((t for t in self.times[batch_id] if t >= ends), default=float("inf"))
            lags.append((noticed - max(ends, began), polls.lag_bound(max(ends - began, 0.0))))
        return max(lags, key=lambda lag: lag[0] / lag[1])

    def latest(self, timeline: dict[str, tuple[float, float]]) -> float:
        """The most seconds from a batch's end to the poll that saw it, however late its wait began."""
        return max(min((t for t in self.times[b] if t >= ends), default=float("inf")) - ends
                   for b, (_, ends) in timeline.items())


def measured(job: Job, store: Path, delay: float) -> Measured:
    """Run ``job`` to its end against a simulator whose batches take ``delay`` seconds."""
    seen = Polls()
    with Simulator(batch_seconds=delay, seed=SEED, on_call=seen).start() as sim:
        job = dataclasses.replace(job, provider=dataclasses.replace(job.provider, base_url=sim.base_url))
        with Store(store) as opened:
            start = time.perf_counter()
            outcome = asyncio.run(runs.execute(opened, job))
            seconds = time.perf_counter() - start
        timeline = sim.batches.timeline()
    return Measured(seconds, outcome.exit_code, outcome.status["counts"]["completed"], len(timeline),
                    sum(len(seen.times[b]) for b in timeline), seen.worst(timeline), seen.latest(timeline))


def batch_job(source: Path, limits: BatchLimits) -> Job:
    job = sample_job(source)
    return dataclasses.replace(job, batch=limits, provider=dataclasses.replace(job.provider, kind=batch_api.KIND))


def batches_of(job: Job) -> int:
    """How many batches of ``max_items`` the job's items make, a batch never mixing groups."""
    sizes = Counter(item.group for item in item_rows.items(job))
    return sum(-(-size // job.batch.max_items) for size in sizes.values())


def rows(label: str, run: Measured) -> list[Row]:
    """Polls per batch and the worst notice lag of one run."""
    return [
        Row(f"{label}: polls per upstream batch ({run.batches:,} batches)", run.polls / run.batches, "polls"),
        Row(f"{label}: worst notice lag ({run.worst[0]:.2f} s) as a share of its bound "
            f"max(10 s, 10 %) ({run.worst[1]:.0f} s)", run.lag_share, "of bound", target=Target("value", "<", 1.0)),
        Row(f"{label}: most seconds from a batch's end to its notice, its wait's late start included",
            run.latest, "s"),
    ]


def run(*, quick: bool) -> list[Row]:
    count, all_in_flight, delay = (1_000, 2_000, 2.0) if quick else (2_000, 10_000, 5.0)
    defaults = batch_api.limits_for(batch_api.KIND, BatchLimits(), given=(), where="bench")
    chat_defaults = BatchLimits()
    with tempfile.TemporaryDirectory(prefix="runner-bench-") as tmp:
        folder = Path(tmp)
        few = make_posts(count, folder / "posts.jsonl")
        many = make_posts(all_in_flight, folder / "many.jsonl")
        every = BatchLimits(max_items=25, max_chars=1_000_000, concurrency=batches_of(batch_job(many, chat_defaults)))
        new = measured(batch_job(few, defaults), folder / "new.db", delay)
        old = measured(batch_job(few, chat_defaults), folder / "old.db", delay)
        flight = measured(batch_job(many, every), folder / "every.db", delay)
    print(f"\nD = {delay:g} s; wall, exit code, items completed, upstream batches, polls:\n")
    print("| run | wall s | wall / D | exit | completed | batches | polls |\n|---|---|---|---|---|---|---|")
    for label, done in (("Batch API defaults", new), ("chat defaults", old), ("every batch in flight", flight)):
        print(f"| {label} | {done.seconds:.1f} | {done.seconds / delay:.2f} | {done.exit_code} | {done.completed:,} "
              f"| {done.batches:,} | {done.polls:,} |")
    return [
        Row(f"openai-batch, {count:,} posts by month, its defaults (50,000 a batch, 16 in flight): wall in D = {delay:g} s",
            new.seconds / delay, "D", baseline=old.seconds / delay,
            against="the chat's defaults: 25 a batch, 2 in flight", target=Target("value", "<", 2.0)),
        *rows("its defaults", new),
        Row(f"openai-batch, {all_in_flight:,} items, 25 a batch, all {every.concurrency} in flight: completed, exit "
            f"{flight.exit_code}, wall {flight.seconds / delay:.1f} D",
            float(flight.completed if flight.exit_code == 0 else 0), "items",
            target=Target("value", ">=", all_in_flight)),
        *rows("all in flight", flight),
    ]


def main() -> None:
    standalone("Batch API", run, __doc__)


if __name__ == "__main__":
    main()
