"""The budget guard against the simulator: a run stops before the batch that would pass its budget (counting what is
in flight and every unknown charge), never stops a batch in flight, and goes on once a person raises it.

The price is 0 for input and $1 an output token, so that an estimate before any answer is exact: a batch of four
items at the job's ``expected_output_tokens`` (200) is $800.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from support import StepClock, make_job, posts, runner_cli, write_jsonl

from runner import control, runs
from runner.errors import RunError
from runner.jobs import Job
from runner.model import BreakerState, FailureKind
from runner.notebook import Run
from runner.pricing import money
from runner.rules.budget import Budget
from runner.sim import Simulator
from runner.store import Store

PRICE = {"input": 0.0, "output": 1.0, "per": 1}


def budgeted(job: Job, **limits: float) -> Job:
    return dataclasses.replace(job.with_provider(price=dict(PRICE)), budget=Budget(**limits))  # type: ignore[arg-type]


async def test_a_batch_that_would_pass_the_budget_with_the_one_in_flight_does_not_start_and_the_one_in_flight_ends(
    tmp_path: Path, sim: Simulator, store: Store, clock: StepClock
) -> None:
    job = budgeted(make_job(tmp_path, sim.base_url, posts(8), max_items=4, concurrency=2), max_cost=1000)
    outcome = await runs.execute(store, job, clock=clock)
    assert outcome.exit_code == 4
    assert outcome.stopped_for == (  # written afresh once the batch in flight at the stop was saved
        "budget: the batches in flight at the stop cost less than estimated: $81.0000 spent + $0.0000 in flight + "
        "$0.0000 unknown + $81.0000 for the next batch are within $1,000.00 now; runner resume goes on")
    status = outcome.status
    assert status["counts"]["completed"] == 4 and status["counts"]["pending"] == 4  # the one in flight ended
    assert status["breaker"]["state"] == BreakerState.OPEN and status["breaker"]["reason"] == outcome.stopped_for
    assert sum(sim.ledger.snapshot()["billed"].values()) == 4


async def test_a_budget_stop_s_reason_is_written_afresh_at_each_stop_after_a_step_too(
    tmp_path: Path, sim: Simulator, store: Store, clock: StepClock
) -> None:
    job = budgeted(make_job(tmp_path, sim.base_url, posts(16), max_items=4, concurrency=1), max_cost=100)
    first = await runs.execute(store, job, clock=clock)
    assert first.stopped_for is not None and first.stopped_for.startswith("budget: $0.0000 spent + ")
    control.step(store, "test", now=clock.now())
    stepped = await runs.execute(store, job, clock=clock, read_input=False)
    assert stepped.exit_code == 4 and stepped.status["counts"]["completed"] == 4
    reason = stepped.status["breaker"]["reason"]
    assert reason.startswith(f"budget: {money(stepped.status['cost']['spent'])} spent + $0.0000 in flight")
    assert stepped.stopped_for == f"breaker open ({reason})" and reason.endswith("would pass the budget of $100.00; runner budget raises it")


async def test_an_unknown_charge_counts_at_its_estimate_against_the_budget(
    tmp_path: Path, sim: Simulator, store: Store, clock: StepClock
) -> None:
    sim.set_faults({"rules": [{"fault": "billed_then_dropped", "times": 1}]})
    job = budgeted(make_job(tmp_path, sim.base_url, posts(4), max_items=4, concurrency=1, request_retries=0),
                   max_cost=1000)
    outcome = await runs.execute(store, job, clock=clock)
    assert outcome.exit_code == 4
    assert outcome.stopped_for is not None
    assert "$0.0000 spent + $0.0000 in flight + $800.00 unknown + $800.00 for the next batch" in outcome.stopped_for
    assert outcome.status["cost"]["charges"]["unknown"] == 4


async def test_raising_the_budget_lets_a_run_stopped_at_it_go_on_to_completion(
    tmp_path: Path, sim: Simulator, store: Store, clock: StepClock
) -> None:
    job = budgeted(make_job(tmp_path, sim.base_url, posts(8), max_items=4, concurrency=2), max_cost=1000)
    assert (await runs.execute(store, job, clock=clock)).exit_code == 4
    given, now = control.budget(store, "test", max_cost=5000, now=clock.now())
    assert given == Budget(5000.0, None) and now.breaker is BreakerState.CLOSED
    outcome = await runs.execute(store, job, clock=clock, read_input=False)
    assert outcome.exit_code == 0 and outcome.status["counts"]["completed"] == 8
    budget = outcome.status["budget"]
    assert budget["max_cost"] == 5000 and budget["max_tokens"] is None
    assert budget["left"]["cost"] == pytest.approx(5000 - outcome.status["cost"]["spent"])


class RaisingClock(StepClock):
    """A person who, seeing the run wait at its budget, gives it a larger one (as the TUI's ``b`` would)."""

    def __init__(self, store: Store) -> None:
        super().__init__()
        self.store, self.raised = store, 0

    async def sleep(self, seconds: float) -> None:
        names = self.store.run_names()
        if names and self.store.control(self.store.run_id("test")).kind is FailureKind.BUDGET:
            control.budget(self.store, "test", max_cost=5000, now=self.now())
            self.raised += 1
        await super().sleep(seconds)


async def test_an_engine_waiting_for_a_person_goes_on_by_itself_once_the_budget_is_raised(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    clock = RaisingClock(store)
    job = budgeted(make_job(tmp_path, sim.base_url, posts(8), max_items=4, concurrency=2), max_cost=1000)
    outcome = await runs.execute(store, job, clock=clock, wait_for_person=True)
    assert clock.raised == 1
    assert outcome.exit_code == 0 and outcome.status["counts"]["completed"] == 8


async def test_a_budget_given_by_a_person_holds_until_the_job_s_budget_changes(
    tmp_path: Path, sim: Simulator, store: Store, clock: StepClock
) -> None:
    job = budgeted(make_job(tmp_path, sim.base_url, posts(8), max_items=4, concurrency=2), max_cost=1000)
    await runs.execute(store, job, clock=clock)
    control.budget(store, "test", max_tokens=1_000_000, now=clock.now())
    await runs.execute(store, job, clock=clock)  # the same job given again: the person's budget holds
    assert store.budget(store.run_id("test")) == Budget(1000.0, 1_000_000)
    await runs.execute(store, dataclasses.replace(job, budget=Budget(max_cost=7000)), clock=clock)
    assert store.budget(store.run_id("test")) == Budget(7000.0, None)


async def test_a_budget_of_tokens_stops_the_run_as_a_budget_of_cost_does(
    tmp_path: Path, sim: Simulator, store: Store, clock: StepClock
) -> None:
    job = budgeted(make_job(tmp_path, sim.base_url, posts(8), max_items=4, concurrency=2), max_tokens=1000)
    outcome = await runs.execute(store, job, clock=clock)
    assert outcome.exit_code == 4 and outcome.stopped_for is not None
    assert "tokens spent + " in outcome.stopped_for and " 1,000 tokens" in outcome.stopped_for


async def label_each(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A user's python stage: its calls are its own, never priced by the runner."""
    return [{"id": item["id"], "tag": "x"} for item in items]


async def test_a_python_stage_s_calls_are_not_counted_against_a_cost_budget_nor_held_to_it(
    tmp_path: Path, sim: Simulator
) -> None:
    write_jsonl(tmp_path / "posts.jsonl", posts(8))
    (tmp_path / "job.toml").write_text(
        f'name = "test"\ninput = "posts.jsonl"\n[batch]\nmax_items = 4\n[provider]\nbase_url = "{sim.base_url}"\n'
        'model = "sim-model"\nprice = { input = 0, output = 1, per = 1 }\n[budget]\nmax_cost = 5000\n'
        '[[stage]]\nname = "classify"\n[[stage]]\nname = "tag"\nkind = "python"\nhandler = "tag-v1"\n', encoding="utf-8")
    run = Run.from_job_file(tmp_path / "job.toml", db=tmp_path / "runs.db", handlers={"tag": label_each},
                            clock=StepClock())
    outcome = await run.go()
    assert outcome.exit_code == 0 and outcome.status["counts"]["completed"] == 8
    assert outcome.status["cost"]["spent"] is None  # the handler's calls have no price: the run's cost is unknown
    assert outcome.status["budget"]["left"]["cost"] is not None  # but the budget counts the calls it can price


@pytest.mark.parametrize("limits, said", [
    ({}, "give a budget: --max USD, --max-tokens N, or both"),
    ({"max_cost": -1}, "'max_cost' must be more than 0, not -1"),
    ({"max_tokens": 0}, "'max_tokens' must be more than 0, not 0"),
])
async def test_a_bad_budget_from_a_person_is_refused_and_nothing_changes(
    tmp_path: Path, sim: Simulator, store: Store, clock: StepClock, limits: dict[str, float], said: str
) -> None:
    job = budgeted(make_job(tmp_path, sim.base_url, posts(8), max_items=4, concurrency=2), max_cost=1000)
    await runs.execute(store, job, clock=clock)
    with pytest.raises(RunError, match=said):
        control.budget(store, "test", now=clock.now(), **limits)  # type: ignore[arg-type]
    assert store.budget(store.run_id("test")) == Budget(1000.0, None)
    assert store.control(store.run_id("test")).breaker is BreakerState.OPEN


def job_file(folder: Path, base_url: str, budget: str) -> Path:
    write_jsonl(folder / "posts.jsonl", posts(8))
    text = (f'name = "posts"\ninput = "posts.jsonl"\n[batch]\nmax_items = 4\nconcurrency = 2\n'
            f'[provider]\nbase_url = "{base_url}"\nmodel = "sim-model"\nprice = {{ input = 0, output = 1, per = 1 }}\n'
            f"[budget]\n{budget}\n")
    (folder / "job.toml").write_text(text, encoding="utf-8")
    return folder / "job.toml"


def test_runner_run_stops_at_the_budget_with_the_figures_and_runner_budget_lets_it_go_on(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    job_file(tmp_path, sim.base_url, "max_cost = 1000")
    stopped = runner_cli("run", "job.toml", cwd=tmp_path, columns=300)
    assert stopped.returncode == 4, stopped.stderr
    assert ("stopped: budget: the batches in flight at the stop cost less than estimated: $81.0000 spent + "
            "$0.0000 in flight + $0.0000 unknown + $81.0000 for the next batch are within $1,000.00 now; "
            "runner resume goes on\n") in stopped.stderr
    assert "\nrunner budget posts --max USD\nrunner run posts\n" in stopped.stderr
    raised = runner_cli("budget", "posts", "--max", "5000", cwd=tmp_path)
    assert raised.returncode == 0, raised.stderr
    assert raised.stdout.startswith("run 'posts': budget $")
    assert " of $5,000.00; to go on:\nrunner run posts\n" in raised.stdout
    done = runner_cli("run", "posts", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    status = json.loads(runner_cli("status", "posts", "--json", cwd=tmp_path).stdout)
    assert status["counts"]["completed"] == 8 and status["budget"]["max_cost"] == 5000


def test_a_budget_below_what_the_run_committed_is_kept_and_said_to_stop_the_run_before_its_next_batch(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    job_file(tmp_path, sim.base_url, "max_cost = 1000")
    runner_cli("run", "job.toml", cwd=tmp_path, columns=300)
    lowered = runner_cli("budget", "posts", "--max-tokens", "1", cwd=tmp_path)
    assert lowered.returncode == 0, lowered.stderr
    assert lowered.stdout.endswith(" of 1 tokens; the run has committed to that much already: it stops before its "
                                   "next batch\n")
    assert "to go on" not in lowered.stdout
    status = json.loads(runner_cli("status", "posts", "--json", cwd=tmp_path).stdout)
    assert status["budget"]["max_tokens"] == 1 and status["budget"]["left"]["tokens"] < 0


def test_runner_budget_none_removes_the_budget_the_job_file_s_too_and_the_run_goes_on(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    job_file(tmp_path, sim.base_url, "max_cost = 1000")
    runner_cli("run", "job.toml", cwd=tmp_path, columns=300)
    removed = runner_cli("budget", "posts", "--none", cwd=tmp_path)
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout == "run 'posts': no budget; to go on:\nrunner run posts\n"
    assert runner_cli("run", "posts", cwd=tmp_path).returncode == 0
    status = json.loads(runner_cli("status", "posts", "--json", cwd=tmp_path).stdout)
    assert status["counts"]["completed"] == 8 and status["budget"] is None
    both = runner_cli("budget", "posts", "--none", "--max", "5", cwd=tmp_path)
    assert both.returncode == 1 and both.stderr == (
        "error: --none removes the budget: give it alone, or give --max USD or --max-tokens N\n")


@pytest.mark.parametrize("given", ["nan", "inf"])
def test_runner_budget_refuses_a_limit_that_is_not_a_finite_number_as_the_job_file_does(
    tmp_path: Path, sim: Simulator, store: Store, given: str
) -> None:
    job_file(tmp_path, sim.base_url, "max_cost = 1000")
    runner_cli("run", "job.toml", cwd=tmp_path, columns=300)
    refused = runner_cli("budget", "posts", "--max", given, cwd=tmp_path)
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr == f"error: run 'posts': 'max_cost' must be a finite number, not {given}\n"
    status = json.loads(runner_cli("status", "posts", "--json", cwd=tmp_path).stdout)
    assert status["budget"]["max_cost"] == 1000


@pytest.mark.parametrize("budget, said", [
    ("max_cost = -1", "[budget]: 'max_cost' must be more than 0, not -1"),
    ('max_cost = "5"', "[budget]: 'max_cost' must be a finite number, not '5'"),
])
def test_a_bad_budget_in_the_job_file_is_one_line_and_exit_1(tmp_path: Path, budget: str, said: str) -> None:
    job_file(tmp_path, "http://127.0.0.1:9/v1", budget)
    refused = runner_cli("run", "job.toml", cwd=tmp_path)
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.count("\n") == 1 and said in refused.stderr and not (tmp_path / "runs.db").exists()


def test_a_cost_budget_for_a_model_with_no_price_is_refused_at_load(tmp_path: Path) -> None:
    path = job_file(tmp_path, "http://127.0.0.1:9/v1", "max_cost = 5")
    path.write_text(path.read_text(encoding="utf-8").replace("price = { input = 0, output = 1, per = 1 }\n", ""),
                    encoding="utf-8")
    refused = runner_cli("run", "job.toml", cwd=tmp_path)
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1
    assert "max_cost needs a price, and sim-model has none" in refused.stderr


def test_runner_budget_on_an_unknown_run_is_one_line_and_exit_1(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    job_file(tmp_path, sim.base_url, "max_cost = 1000")
    assert runner_cli("run", "job.toml", cwd=tmp_path).returncode == 4
    refused = runner_cli("budget", "nope", "--max", "5", cwd=tmp_path)
    assert refused.returncode == 1 and refused.stdout == "" and refused.stderr.count("\n") == 1
    assert refused.stderr.startswith("error: no run named 'nope'")
