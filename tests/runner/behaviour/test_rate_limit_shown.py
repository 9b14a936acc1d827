"""A rate limit the engine waits out is in the store's read model, so every view shows it, not only the engine.

A real run against the simulator answering 429 with Retry-After; the test's
clock reads the store's standing each time the engine sleeps (what another
process, the TUI or ``runner status``, would read at that moment) before it
moves time on.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from support import StepClock, make_job, posts

from runner import progress_line, runs
from runner.engine import Engine
from runner.model import ItemState
from runner.sim import Simulator
from runner.store import Store, views
from runner.store.answers import Standing, time_left


class Seen(NamedTuple):
    """At one of the engine's sleeps: the engine's own quiet time, and where the store says the run stands."""

    now: float
    quiet_until: float
    standing: Standing


class Watching(StepClock):
    """A step clock that reads the run's standing from the store whenever the engine sleeps."""

    def __init__(self, store: Store) -> None:
        super().__init__()
        self.store, self.engines, self.seen = store, list[Engine](), list[Seen]()

    async def sleep(self, seconds: float) -> None:
        if self.engines and "test" in self.store.run_names():
            standing = views.standing(self.store, "test", now=self.time)
            self.seen.append(Seen(self.time, self.engines[0].quiet_until, standing))
        await super().sleep(seconds)


async def test_while_a_429_holds_batches_back_the_read_model_says_until_when_and_gives_no_time_left(
    tmp_path: Path, store: Store
) -> None:
    clock = Watching(store)
    with Simulator().start() as sim:
        sim.set_faults({"rules": [{"fault": "http_429", "times": 1, "retry_after": 30}]})
        job = make_job(tmp_path, sim.base_url, posts(20), max_items=5, concurrency=2)
        outcome = await runs.execute(store, job, clock=clock, started=clock.engines.append)
    held = [seen for seen in clock.seen if seen.now < seen.quiet_until]
    assert outcome.status["counts"][ItemState.COMPLETED] == 20
    assert held, "the engine waited out the rate limit"
    assert {seen.standing.rate_limited_until for seen in held} == {held[0].quiet_until}
    assert not [seen for seen in clock.seen if seen.now >= seen.quiet_until and seen.standing.rate_limited_until]
    still = held[-1].standing
    assert still.counts[ItemState.WAITING] == 5 and still.counts[ItemState.RUNNING] == 0
    assert time_left(still, per_minute=60.0) is None
    said = progress_line.line(still, waits=False, db=store.path)
    assert said.state.startswith("test: rate limited by the upstream: no batch starts before ")
    assert not said.moving
    assert views.standing(store, "test", now=clock.now()).rate_limited_until is None
