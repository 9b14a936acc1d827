"""Remote results expire: a saved task whose results were not fetched and that the upstream drops within a day
is warned about by ``runner status`` (and ``--json``'s ``expiring``); one fetched is not (issue 18).

The simulator's clock is fixed 29.5 days in the past when the task is created: its results (kept 30 days by
OpenAI's Batch API, 29 by Anthropic's) expire within a day of now.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from support import StepClock, anthropic_job, batch_job, posts, runner_cli

from runner import recovery, runs
from runner.jobs import Job
from runner.providers.anthropic_batch import RESULTS_KEPT_SECONDS
from runner.providers.openai_batch import OUTPUT_KEPT_SECONDS
from runner.sim import Simulator
from runner.sim.clock import Clock
from runner.store import Store, views

DAY = 24 * 3600


def upstream_at(created: float) -> Simulator:
    """A simulator whose clock stands at ``created`` (moved only by ``advance``), its batches ending at once."""
    return Simulator(batch_seconds=0.0, clock=Clock(lambda: created))


async def unpolled(store: Store, sim: Simulator, job: Job, clock: StepClock) -> None:
    """The job's task created, its id saved, and then no poll answered: the run stops with the task unfetched."""
    sim.set_faults({"rules": [{"fault": "poll_503"}]})
    stopped = await runs.execute(store, job, clock=clock)
    assert stopped.exit_code == 4


async def test_status_warns_about_a_saved_batch_api_task_whose_results_expire_within_a_day(
    tmp_path: Path, store: Store, clock: StepClock
) -> None:
    created = int(time.time() - OUTPUT_KEPT_SECONDS + DAY / 2)
    with upstream_at(created).start() as sim:
        job = batch_job(tmp_path, sim, posts(5))
        await unpolled(store, sim, job, clock)
        (task,) = views.status(store, "test", now=time.time())["expiring"]
        assert (task["items"], task["expires_at"]) == (5, created + OUTPUT_KEPT_SECONDS)
        assert views.status(store, "test", now=created + OUTPUT_KEPT_SECONDS - 2 * DAY)["expiring"] == []
        shown = runner_cli("status", "test", cwd=tmp_path)
        assert f"warning: the results of task {task['task']} (5 items" in shown.stdout
        assert "were not fetched and expire in 1" in shown.stdout
        assert json.loads(runner_cli("status", "test", "--json", cwd=tmp_path).stdout)["expiring"] == [task]
        sim.set_faults(None)
        sim.advance(60)  # the batch ends on the upstream's clock
        recovery.confirm(store, "test", now=clock.now())
        done = await runs.execute(store, job, clock=clock)
    assert done.exit_code == 0
    assert done.status["expiring"] == []


async def test_status_warns_about_a_saved_message_batch_whose_results_expire_within_a_day(
    tmp_path: Path, store: Store, clock: StepClock
) -> None:
    created = int(time.time() - RESULTS_KEPT_SECONDS + DAY / 2)
    with upstream_at(created).start() as sim:
        await unpolled(store, sim, anthropic_job(tmp_path, sim, posts(5), kind="anthropic-batch"), clock)
    (task,) = views.status(store, "test", now=time.time())["expiring"]
    assert task["expires_at"] == created + RESULTS_KEPT_SECONDS
