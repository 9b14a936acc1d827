"""A scheduled item keeps its time through a re-run whose stage or prompt changed, and one at a decide stage is
released to wait for a person at its time, not before."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from pipelines import pipeline, stage
from support import LedgerWatch, StepClock, add_all, make_job, posts, write_jsonl

from runner import jobs, runs
from runner.jobs import Job
from runner.model import ItemState
from runner.sim import Simulator
from runner.store import Store, views

START = 1_800_000_000.0
AN_HOUR = 3_600.0


def at(job: Job, when: float) -> Job:
    """The job as ``runner run JOB --at`` gives it."""
    return dataclasses.replace(job, schedule=dataclasses.replace(job.schedule, at=when))


def first_billed(clock: LedgerWatch) -> float:
    """The time of the first wait by which the simulator had billed a call (the end, if it never waited after)."""
    return min([t for t, billed in clock.seen if billed], default=clock.time)


async def test_a_changed_stage_keeps_an_items_scheduled_time(tmp_path: Path, sim: Simulator, store: Store) -> None:
    job = pipeline(tmp_path, sim.base_url, count=3, stages="classify summarize")
    add_all(store, at(job, START + AN_HOUR), now=START)
    changed = pipeline(tmp_path, sim.base_url, count=3, stages="classify summarize", summarize="Say it shorter.")
    assert changed.stages[-1].fingerprint(changed.version) != job.stages[-1].fingerprint(job.version)
    clock = LedgerWatch(sim, START)
    outcome = await runs.execute(store, changed, clock=clock)
    assert outcome.status["counts"][ItemState.COMPLETED] == 3
    assert first_billed(clock) >= START + AN_HOUR


async def test_a_changed_prompt_keeps_the_time_run_at_gave_an_item(tmp_path: Path, sim: Simulator, store: Store) -> None:
    job = make_job(tmp_path, sim.base_url, posts(3))
    add_all(store, at(job, START + AN_HOUR), now=START)
    changed = dataclasses.replace(job, prompt=dataclasses.replace(job.prompt, instructions="Label it again."))
    clock = LedgerWatch(sim, START)
    outcome = await runs.execute(store, changed, clock=clock)
    assert outcome.status["counts"][ItemState.COMPLETED] == 3
    assert first_billed(clock) >= START + AN_HOUR


async def test_items_scheduled_at_a_decide_stage_wait_for_a_person_from_their_time(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    job = pipeline(tmp_path, sim.base_url, count=3, stages="review classify")
    watched: list[tuple[float, int, int]] = []

    class Watch(StepClock):
        async def sleep(self, seconds: float) -> None:
            standing = views.standing(store, "triage", now=self.time)
            watched.append((self.time, standing.scheduled, standing.needs_decision))
            await super().sleep(seconds)

    outcome = await runs.execute(store, at(job, START + 60), clock=Watch(START))
    assert (outcome.status["scheduled"], outcome.status["needs_decision"]) == (0, 3)
    assert all((scheduled, deciding) == (3, 0) for t, scheduled, deciding in watched if t < START + 60)
    assert watched and not sim.ledger.snapshot()["calls"]


async def test_items_scheduled_at_a_python_stage_given_no_handler_stop_the_run_at_once(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    write_jsonl(tmp_path / "posts.jsonl", posts(3))
    (tmp_path / "job.toml").write_text(
        f'name = "triage"\ninput = "posts.jsonl"\nkey = "id"\n[provider]\nbase_url = "{sim.base_url}"\nmodel = "sim"\n'
        '[[stage]]\nname = "extract"\nkind = "python"\nhandler = "extract-v1"\n[stage.output.schema]\ntype = "object"\n'
        + stage("summarize", "Summarize each post.", "summary", 'type = "string"'), encoding="utf-8")
    clock = StepClock(START)
    outcome = await runs.execute(store, at(jobs.load(tmp_path / "job.toml"), START + AN_HOUR), clock=clock)
    assert (outcome.needs_handler, clock.time < START + AN_HOUR) == (("extract",), True)
    assert outcome.status["scheduled"] == 3
