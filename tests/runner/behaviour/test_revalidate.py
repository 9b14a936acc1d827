"""Revalidation: saved outputs checked again against the output schema now, with no call (issue 18).

Failed items whose kept answer passes now complete; results still valid are
re-stamped so a run does not send them again; results now invalid go back
only after a person agrees; a run whose only change is a stage's output
schema revalidates first and never sends an answered item again on its own:
the results now invalid fail as invalid, for a person's retry.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from pipelines import calls_by_stage, pipeline
from support import ROOT, make_job, posts, runner_cli
from test_cli_confirm import answered

from runner import export, jobs, revalidating, runs
from runner.jobs import Job
from runner.model import ItemState
from runner.rules.revalidating import StagePlan
from runner.sim import Simulator
from runner.store import Store, rerun_plans, views
from runner.store.revalidating import NOW_VALID

KEYS = [f"p{i:03d}" for i in range(12)]
WIDE = '["bug", "complaint", "praise"]'
NARROW = '["bug", "complaint"]'


def job(tmp_path: Path, base_url: str, labels: str, *, label_required: bool = True) -> Job:
    """classify then summarize over 12 posts, classify's labels limited to ``labels`` (and its ``label`` required,
    or not), one attempt each."""
    pipeline(tmp_path, base_url, stages="classify summarize")
    path = tmp_path / "pipeline.toml"
    text = path.read_text().replace(WIDE, labels).replace("[[stage]]", "[retry]\nmax_attempts = 1\n[[stage]]", 1)
    if not label_required:
        text = text.replace('required = ["id", "label"]', 'required = ["id"]')
    path.write_text(text)
    return jobs.load(path)


def labels(store: Store) -> dict[str, str]:
    return {row["key"]: row["classify"]["label"] for row in export.rows(store, "triage") if "classify" in row}


def states(store: Store) -> dict[str, tuple[str, str]]:
    return {key: (view.state, view.stage) for key in KEYS for view in [views.item_view(store, "triage", key, now=0.0)]}


def history(store: Store, key: str) -> list[str]:
    return [line.message or "" for line in views.item_view(store, "triage", key, now=0.0).history
            if line.kind == "revalidated"]


async def test_revalidate_completes_items_that_failed_as_invalid_with_no_call(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    failed = await failed_for_want_of_a_label(tmp_path, sim, store)
    sim.ledger.reset()
    relaxed = job(tmp_path, sim.base_url, WIDE, label_required=False)
    done = revalidating.revalidate(store, "triage", now=10.0, confirm=False, job=relaxed, stage="classify")
    assert sim.ledger.snapshot()["requests"] == 0
    assert done.applied and (done.stages[0].completed, done.stages[0].again) == (len(failed), 0)
    assert {key: states(store)[key] for key in failed} == {key: ("pending", "summarize") for key in failed}
    assert history(store, failed[0]) == [NOW_VALID]
    again = await runs.execute(store, relaxed)
    assert calls_by_stage(sim.ledger.snapshot()["calls"]) == {"summarize": failed}
    assert again.status["counts"][ItemState.COMPLETED] == 12


async def praised_after_a_wide_run(tmp_path: Path, sim: Simulator, store: Store) -> list[str]:
    """The run of :func:`job` with every label allowed: the keys labelled praise (a narrow schema refuses)."""
    await runs.execute(store, job(tmp_path, sim.base_url, WIDE))
    praised = sorted(key for key, label in labels(store).items() if label == "praise")
    assert praised
    return praised


async def failed_for_want_of_a_label(tmp_path: Path, sim: Simulator, store: Store) -> list[str]:
    """The run of :func:`job`, two items' classify results answered without their label: failed, their answer kept."""
    failed = ["p001", "p005"]
    sim.set_faults({"rules": [{"fault": "invalid_items", "keys": failed}]})
    first = await runs.execute(store, job(tmp_path, sim.base_url, WIDE))
    sim.set_faults(None)
    assert [key for key, (state, _) in states(store).items() if state == ItemState.FAILED] == failed
    assert first.status["counts"][ItemState.FAILED] == len(failed)
    return failed


async def test_results_now_invalid_go_back_only_after_a_person_agrees(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    praised = await praised_after_a_wide_run(tmp_path, sim, store)
    before = states(store)
    narrow = job(tmp_path, sim.base_url, NARROW)
    asked: list[int] = []
    shown = revalidating.revalidate(store, "triage", now=10.0, job=narrow,
                                    confirm=lambda plan: asked.append(plan.may_repeat) is not None)
    assert asked == [len(praised)] and not shown.applied
    assert states(store) == before
    done = revalidating.revalidate(store, "triage", now=11.0, job=narrow, confirm=True)
    assert done.applied and done.may_repeat == len(praised) and done.stages[0].restamped == 12 - len(praised)
    assert {key for key, state in states(store).items() if state == ("pending", "classify")} == set(praised)
    assert "may repeat a charge" in history(store, praised[0])[0]


async def test_results_restamped_are_not_sent_again_by_the_next_run(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    praised = await praised_after_a_wide_run(tmp_path, sim, store)
    narrow = job(tmp_path, sim.base_url, NARROW)
    revalidating.revalidate(store, "triage", now=10.0, job=narrow, confirm=True)
    sim.ledger.reset()
    await runs.execute(store, narrow)
    assert calls_by_stage(sim.ledger.snapshot()["calls"]) == {"classify": praised, "summarize": praised}


async def test_a_run_whose_only_change_is_an_output_schema_never_sends_an_answered_item_again_on_its_own(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    praised = await praised_after_a_wide_run(tmp_path, sim, store)
    sim.ledger.reset()
    narrowed = await runs.execute(store, job(tmp_path, sim.base_url, NARROW))
    assert sim.ledger.snapshot()["requests"] == 0
    assert narrowed.revalidated == {"classify": StagePlan("classify", restamped=12 - len(praised),
                                                          refused=len(praised))}
    assert narrowed.rewound == {} and narrowed.exit_code == 3
    assert {key for key, state in states(store).items() if state == ("failed", "classify")} == set(praised)
    refused = views.item_view(store, "triage", praised[0], now=0.0)
    assert refused.kind == "item_invalid" and "the output schema changed" in (refused.message or "")
    assert '"praise"' in (refused.output or "")  # its answer kept
    assert "not sent again" in history(store, praised[0])[0]
    assert str(rerun_plans.retry_plan(store, "triage", kind="item_invalid")).startswith(
        f"plan: {len(praised)} items · 0 charge-safe · {len(praised)} may be billed again")


async def test_an_item_a_run_failed_for_a_changed_schema_completes_with_no_call_once_the_schema_takes_it_again(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    praised = await praised_after_a_wide_run(tmp_path, sim, store)
    await runs.execute(store, job(tmp_path, sim.base_url, NARROW))
    sim.ledger.reset()
    widened = job(tmp_path, sim.base_url, WIDE)
    done = revalidating.revalidate(store, "triage", now=10.0, confirm=False, job=widened, stage="classify")
    assert sim.ledger.snapshot()["requests"] == 0
    assert done.applied and (done.stages[0].completed, done.may_repeat) == (len(praised), 0)
    assert {labels(store)[key] for key in praised} == {"praise"}  # the answer kept is the result


async def test_a_run_whose_only_change_is_an_output_schema_completes_the_items_it_failed_with_no_call(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    failed = await failed_for_want_of_a_label(tmp_path, sim, store)
    sim.ledger.reset()
    relaxed = await runs.execute(store, job(tmp_path, sim.base_url, WIDE, label_required=False))
    assert calls_by_stage(sim.ledger.snapshot()["calls"]) == {"summarize": failed}
    assert relaxed.revalidated == {"classify": StagePlan("classify", completed=len(failed), restamped=10)}
    assert relaxed.status["counts"][ItemState.COMPLETED] == 12


async def test_revalidate_in_a_script_shows_the_plan_and_changes_nothing_without_yes(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    praised = await praised_after_a_wide_run(tmp_path, sim, store)
    job(tmp_path, sim.base_url, NARROW)  # the file edited
    before = states(store)
    asked = runner_cli("revalidate", "pipeline.toml", cwd=tmp_path)
    assert asked.returncode == 1
    # counted by item over both stages; the results kept cost no call
    assert asked.stdout.startswith(f"plan: 12 items · {12 - len(praised)} charge-safe (est. $0.0000) · "
                                   f"{len(praised)} may be billed again (cost unknown)\n")
    assert f"{len(praised)} items would be sent again: may repeat a charge" in asked.stdout
    assert "runner revalidate pipeline.toml" in asked.stderr and "--yes" in asked.stderr
    assert states(store) == before
    agreed = runner_cli("revalidate", "pipeline.toml", "--stage", "classify", "--yes", cwd=tmp_path)
    assert agreed.returncode == 0, agreed.stderr
    assert {key for key, state in states(store).items() if state == ("pending", "classify")} == set(praised)


async def test_a_revalidation_not_asked_about_says_what_it_did_not_what_it_would_do(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    praised = await praised_after_a_wide_run(tmp_path, sim, store)
    job(tmp_path, sim.base_url, NARROW)
    agreed = runner_cli("revalidate", "pipeline.toml", "--stage", "classify", "--yes", cwd=tmp_path)
    assert agreed.returncode == 0, agreed.stderr
    assert (f"stage classify: {12 - len(praised)} results still valid kept (charge-safe); {len(praised)} items sent "
            "again: may repeat a charge, they were answered") in agreed.stdout.splitlines()
    assert "would" not in agreed.stdout


def test_revalidate_refuses_an_unknown_run_an_unknown_stage_and_a_decide_stage(tmp_path: Path) -> None:
    with Store(tmp_path / "runs.db") as store:
        runs.prepare(store, _reviewed(tmp_path), now=1.0)
    unknown_run = runner_cli("revalidate", "nope", cwd=tmp_path)
    assert (unknown_run.returncode, unknown_run.stderr.count("\n")) == (1, 1)
    unknown_stage = runner_cli("revalidate", "triage", "--stage", "nope", cwd=tmp_path)
    assert unknown_stage.returncode == 2 and "has no stage 'nope'" in unknown_stage.stderr
    decide = runner_cli("revalidate", "triage", "--stage", "review", cwd=tmp_path)
    assert decide.returncode == 2 and "is a decide stage" in decide.stderr


def _reviewed(tmp_path: Path) -> Job:
    return pipeline(tmp_path, "http://127.0.0.1:9/v1", stages="classify review summarize")


async def test_a_job_of_one_stage_whose_schema_was_fixed_completes_its_failed_items_with_no_call(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    sim.set_faults({"rules": [{"fault": "invalid_items", "keys": ["p001"]}]})
    strict = make_job(tmp_path, sim.base_url, posts(4), max_attempts=1, schema={"required": ["id", "label"]})
    first = await runs.execute(store, strict)
    assert first.status["counts"][ItemState.FAILED] == 1
    sim.set_faults(None)
    sim.ledger.reset()
    fixed = await runs.execute(store, dataclasses.replace(strict, output_schema={"required": ["id"]}))
    assert sim.ledger.snapshot()["requests"] == 0
    assert fixed.revalidated == {"openai-chat": StagePlan("openai-chat", completed=1, restamped=3)}
    assert fixed.status["counts"][ItemState.COMPLETED] == 4
    assert views.item_view(store, "test", "p001", now=0.0).output == '{"id":"p001"}'


async def test_runner_run_says_what_its_changed_schema_refuses_and_ends_with_the_retry_that_asks(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    praised = await praised_after_a_wide_run(tmp_path, sim, store)
    job(tmp_path, sim.base_url, NARROW)
    sim.ledger.reset()
    ran = runner_cli("run", "pipeline.toml", "--no-wait", cwd=tmp_path)
    assert ran.returncode == 3, ran.stderr
    assert sim.ledger.snapshot()["requests"] == 0
    said = " ".join(ran.stderr.split())
    assert ("stage classify: only its output schema changed; saved outputs checked again with no call: "
            f"{12 - len(praised)} results still valid kept (charge-safe); {len(praised)} items now invalid failed, "
            "not sent again: they were answered") in said
    assert said.endswith(f"{len(praised)} items at stage classify failed as invalid: the changed output schema "
                         "refuses their saved answer; not sent again, as they were answered (it may repeat a charge); "
                         "to see the priced plan and send them: runner retry triage --kind item_invalid --stage "
                         "classify")


def test_a_job_of_one_stage_says_its_output_schema_changed_naming_no_stage(tmp_path: Path, sim: Simulator) -> None:
    records = (ROOT / "sample_data" / "posts.jsonl").read_text().splitlines()[:40]
    (tmp_path / "posts.jsonl").write_text("\n".join(records) + "\n")
    sample = (ROOT / "sample_data" / "job.toml").read_text().replace("http://127.0.0.1:8765/v1", sim.base_url)
    (tmp_path / "job.toml").write_text(sample)
    assert runner_cli("run", "job.toml", "--no-wait", cwd=tmp_path).returncode == 0
    (tmp_path / "job.toml").write_text(sample.replace('"question", ', ""))  # a label the answers use, refused now
    said = " ".join(runner_cli("run", "job.toml", "--no-wait", cwd=tmp_path).stderr.split())
    assert "only the output schema changed; saved outputs checked again with no call: " in said
    assert "stage" not in said


async def test_revalidate_of_a_job_file_shows_the_plan_against_the_file_s_schema_before_anything_changes(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    praised = await praised_after_a_wide_run(tmp_path, sim, store)
    job(tmp_path, sim.base_url, NARROW)  # the file edited; the run not given it yet
    before = states(store)
    by_name = runner_cli("revalidate", "triage", cwd=tmp_path)
    assert by_name.returncode == 0 and "12 results still valid kept" in by_name.stdout  # as done: nothing to ask
    asked = runner_cli("revalidate", "pipeline.toml", cwd=tmp_path)
    assert asked.returncode == 1
    assert f"{len(praised)} items would be sent again: may repeat a charge" in asked.stdout
    assert "runner revalidate pipeline.toml --yes" in asked.stderr
    assert states(store) == before
    agreed = runner_cli("revalidate", "pipeline.toml", "--yes", cwd=tmp_path)
    assert agreed.returncode == 0, agreed.stderr
    assert agreed.stdout.endswith("to go on with the job file:\nrunner run pipeline.toml\n")
    assert {key for key, state in states(store).items() if state == ("pending", "classify")} == set(praised)


def test_revalidate_help_says_which_schema_it_checks_against(tmp_path: Path) -> None:
    said = " ".join(runner_cli("revalidate", "-h", cwd=tmp_path).stdout.split())
    assert "a job file's (JOB.toml, as you edited it" in said
    assert "given a run's NAME, the schema of the job the run was last given" in said


async def test_revalidate_on_a_terminal_asks_and_a_no_changes_nothing(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    praised = await praised_after_a_wide_run(tmp_path, sim, store)
    job(tmp_path, sim.base_url, NARROW)
    before = states(store)
    declined = answered("n", "revalidate", "pipeline.toml", cwd=tmp_path)
    assert (declined.returncode, declined.stderr) == (1, "error: nothing was changed\n")
    assert f"send {len(praised)} items of 'triage' again (may repeat a charge)?" in declined.stdout
    assert states(store) == before
    agreed = answered("y", "revalidate", "pipeline.toml", cwd=tmp_path)
    assert agreed.returncode == 0, agreed.stderr
    assert {key for key, state in states(store).items() if state == ("pending", "classify")} == set(praised)


async def test_a_run_stopped_after_reading_its_input_with_a_changed_schema_still_sends_no_answered_item_again(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    praised = await praised_after_a_wide_run(tmp_path, sim, store)
    narrow = job(tmp_path, sim.base_url, NARROW)
    # What a run killed once its input was read leaves, and what a notebook's start does before its engine runs.
    runs.prepare(store, narrow, now=10.0)
    sim.ledger.reset()
    narrowed = await runs.execute(store, narrow, read_input=False)
    assert sim.ledger.snapshot()["requests"] == 0
    assert narrowed.revalidated == {"classify": StagePlan("classify", restamped=12 - len(praised),
                                                          refused=len(praised))}
    assert {key for key, state in states(store).items() if state == ("failed", "classify")} == set(praised)
