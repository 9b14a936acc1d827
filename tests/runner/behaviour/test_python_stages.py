"""A pipeline's ``python`` stage: its calls made by the function the notebook API is given for it, judged as any
stage's; ``runner run`` goes through the other stages and stops where items reach it."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import pytest
from pipelines import CLASSIFY, calls_by_stage, stage
from scenes import location_of
from support import posts, runner_cli, write_jsonl

from runner import jobs, runs
from runner.engine import Engine
from runner.errors import JobError
from runner.model import ItemState
from runner.notebook import Run
from runner.providers.handler import PythonHandler
from runner.sim import Simulator
from runner.store import Store

KEYS = [f"p{i:03d}" for i in range(6)]
#: The python stage between the two calls: told the label classify gave.
EXTRACT = ('[[stage]]\nname = "extract"\nkind = "python"\nhandler = "{label}"\n[stage.prompt]\n'
           'fields = ["body", "classify.label"]\n[stage.output.schema]\ntype = "object"\nrequired = ["id", "version"]\n'
           'properties.version.type = "string"\n')
SUMMARIZE = stage("summarize", "Summarize each post.", "summary", 'type = "string"')


def job_file(folder: Path, base_url: str, *, label: str = "extract-v1", tables: str | None = None) -> Path:
    """Classify (a call), extract (python), summarize (a call) over six posts."""
    write_jsonl(folder / "posts.jsonl", posts(len(KEYS)))
    text = (f'name = "triage"\ninput = "posts.jsonl"\nkey = "id"\n[batch]\nmax_items = 4\n'
            f'[provider]\nbase_url = "{base_url}"\nmodel = "sim"\n'
            + (tables if tables is not None else CLASSIFY + EXTRACT.format(label=label) + SUMMARIZE))
    (folder / "pipeline.toml").write_text(text, encoding="utf-8")
    return folder / "pipeline.toml"


class Extract:
    """The python stage's handler: a version for each post, the payloads it was given kept."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    async def __call__(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        self.seen.extend(items)
        return [{"id": item["id"], "version": f"1.{item['id'][-1]}"} for item in items]


async def test_a_pipeline_of_a_call_a_python_stage_and_a_call_runs_end_to_end_from_the_notebook_api(
    tmp_path: Path, sim: Simulator
) -> None:
    extract = Extract()
    run = Run.from_job_file(job_file(tmp_path, sim.base_url), db=tmp_path / "runs.db", handlers={"extract": extract})
    outcome = await run.go()
    assert (outcome.exit_code, outcome.status["counts"][ItemState.COMPLETED]) == (0, len(KEYS))
    assert calls_by_stage(sim.ledger.snapshot()["calls"]) == {"classify": KEYS, "summarize": KEYS}
    labels = {row["key"]: row["classify.label"] for row in run.results()}
    assert {item["id"]: (item["classify.label"], sorted(item)) for item in extract.seen} == {
        key: (labels[key], ["body", "classify.label", "id"]) for key in KEYS}
    assert {row["key"]: row["extract.version"] for row in run.results()} == {key: f"1.{key[-1]}" for key in KEYS}


async def test_one_handler_given_for_a_pipeline_is_its_one_python_stages(tmp_path: Path, sim: Simulator) -> None:
    extract = Extract()
    outcome = await Run.from_job_file(job_file(tmp_path, sim.base_url), db=tmp_path / "runs.db", provider=extract).go()
    assert (outcome.exit_code, sorted(item["id"] for item in extract.seen)) == (0, KEYS)
    assert calls_by_stage(sim.ledger.snapshot()["calls"]) == {"classify": KEYS, "summarize": KEYS}


async def test_a_python_stages_invalid_results_are_judged_and_retried_as_any_stages(
    tmp_path: Path, sim: Simulator
) -> None:
    tries: list[str] = []

    async def first_p002_invalid(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        tries.extend(item["id"] for item in items)
        return [{"id": item["id"], "version": 2 if item["id"] == "p002" and tries.count("p002") == 1 else "2.0"}
                for item in items]

    run = Run.from_job_file(job_file(tmp_path, sim.base_url), db=tmp_path / "runs.db",
                            handlers={"extract": first_p002_invalid})
    outcome = await run.go()
    # its attempts: classify's, extract's two, summarize's
    assert (outcome.exit_code, tries.count("p002"), run.item("p002")["attempts"]) == (0, 2, 4)


def test_runner_run_stops_at_the_python_stage_saying_which_stage_needs_its_handler_and_the_call_that_goes_on(
    tmp_path: Path, sim: Simulator
) -> None:
    job_file(tmp_path, sim.base_url)
    stopped = runner_cli("run", "pipeline.toml", cwd=tmp_path, columns=400)
    call = ("await runner.notebook.Run.attach('triage', db='runs.db', handlers={'extract': <its handler>}).go()")
    assert (stopped.returncode, "Traceback" in stopped.stderr) == (4, False)
    assert (f"stopped: items wait at python stage 'extract' for a handler, given from Python: {call}\n"
            in stopped.stderr)
    assert "runner resume" not in stopped.stderr
    status = json.loads(runner_cli("status", "triage", "--json", cwd=tmp_path).stdout)
    assert status["stages"]["extract"]["pending"] == len(KEYS)
    assert calls_by_stage(sim.ledger.snapshot()["calls"]) == {"classify": KEYS}
    again = runner_cli("run", "triage", "--wait", cwd=tmp_path)  # nobody can give it a handler from here: no wait
    assert (again.returncode, calls_by_stage(sim.ledger.snapshot()["calls"])) == (4, {"classify": KEYS})


async def test_the_call_runner_run_names_goes_on_from_the_python_stage_calling_nothing_again(
    tmp_path: Path, sim: Simulator
) -> None:
    job_file(tmp_path, sim.base_url)
    assert runner_cli("run", "pipeline.toml", cwd=tmp_path).returncode == 4
    outcome = await Run.attach("triage", db=tmp_path / "runs.db", handlers={"extract": Extract()}).go()
    assert (outcome.exit_code, outcome.status["counts"][ItemState.COMPLETED]) == (0, len(KEYS))
    assert calls_by_stage(sim.ledger.snapshot()["calls"]) == {"classify": KEYS, "summarize": KEYS}


@pytest.mark.parametrize("extra, handlers, message", [
    ("", {}, "run 'triage': python stage 'polish' given no handler: give one for each python stage, "
     "handlers={'extract': <its handler>, 'polish': <its handler>}"),
    ("", {"classify": 1}, "stage 'classify' of run 'triage' is of kind 'openai-chat': a handler is given for a "
     "stage of kind 'python' only (its python stages: extract, polish)"),
    ("", {"typo": 1}, "run 'triage' has no stage 'typo' to give a handler (its python stages: extract, polish)"),
], ids=["a python stage left without", "a stage that calls its provider", "no such stage"])
def test_a_handler_missing_for_a_python_stage_or_given_for_another_is_refused_before_anything_runs(
    tmp_path: Path, extra: str, handlers: dict[str, int], message: str
) -> None:
    polish = EXTRACT.format(label="polish").replace('"extract"', '"polish"').replace('"classify.label"', '"id"')
    path = job_file(tmp_path, "http://127.0.0.1:9/v1", tables=CLASSIFY + EXTRACT.format(label="x") + polish)
    given = {"extract": Extract(), **{name: Extract() for name in handlers}}
    with pytest.raises(JobError) as refused:
        Run.from_job_file(path, db=tmp_path / "runs.db", handlers=given)
    assert str(refused.value) == message
    assert not (tmp_path / "runs.db").exists()


def test_one_handler_for_a_pipeline_of_two_python_stages_or_none_is_refused(tmp_path: Path) -> None:
    polish = EXTRACT.format(label="polish").replace('"extract"', '"polish"')
    two = job_file(tmp_path, "http://127.0.0.1:9/v1", tables=CLASSIFY + EXTRACT.format(label="x") + polish)
    with pytest.raises(JobError, match=r"has 2 python stages \(extract, polish\): give a handler for each, "):
        Run.from_job_file(two, db=tmp_path / "runs.db", provider=Extract())
    none = job_file(tmp_path, "http://127.0.0.1:9/v1", tables=CLASSIFY + SUMMARIZE)
    with pytest.raises(JobError, match="has no stage of kind 'python' for a handler"):
        Run.from_job_file(none, db=tmp_path / "runs.db", provider=Extract())


async def test_a_new_handler_label_sends_only_the_python_stage_again_and_the_stages_after_it(
    tmp_path: Path, sim: Simulator
) -> None:
    await Run.from_job_file(job_file(tmp_path, sim.base_url), db=tmp_path / "runs.db",
                            handlers={"extract": Extract()}).go()
    sim.ledger.reset()
    extract = Extract()
    run = Run.from_job_file(job_file(tmp_path, sim.base_url, label="extract-v2"), db=tmp_path / "runs.db",
                            handlers={"extract": extract})
    outcome = await run.go()
    assert (outcome.rewound, sorted(item["id"] for item in extract.seen)) == ({"extract": len(KEYS)}, KEYS)
    assert calls_by_stage(sim.ledger.snapshot()["calls"]) == {"summarize": KEYS}


def test_a_python_stages_fingerprint_is_its_handler_label_prompt_and_schema_not_its_model(tmp_path: Path) -> None:
    def extract(label: str = "extract-v1") -> jobs.Stage:
        return jobs.load(job_file(tmp_path, "http://127.0.0.1:9/v1", label=label)).stage("extract")

    first = extract()
    other_model = dataclasses.replace(first, provider=dataclasses.replace(first.provider, model="other"))
    other_prompt = dataclasses.replace(first, prompt=dataclasses.replace(first.prompt, fields=("body",)))
    assert first.provider.describe() == "python · extract-v1"
    assert other_model.fingerprint("1") == first.fingerprint("1")
    assert extract(label="extract-v2").fingerprint("1") != first.fingerprint("1")
    assert other_prompt.fingerprint("1") != first.fingerprint("1")


def test_a_handler_label_belongs_on_a_python_stage_and_a_python_stage_is_named_when_none_is_given(
    tmp_path: Path
) -> None:
    labelled = CLASSIFY.replace('name = "classify"\n', 'name = "classify"\nhandler = "mine"\n')
    with pytest.raises(JobError, match="'handler' belongs on a stage of kind 'python'"):
        jobs.load(job_file(tmp_path, "http://127.0.0.1:9/v1", tables=labelled))
    unlabelled = EXTRACT.format(label="").replace('handler = ""\n', "")
    job = jobs.load(job_file(tmp_path, "http://127.0.0.1:9/v1", tables=CLASSIFY + unlabelled))
    assert (job.stage("extract").kind, job.stage("extract").provider.handler) == ("python", "extract")


async def test_status_of_a_run_stopped_at_its_python_stage_reads_as_any_other(tmp_path: Path, sim: Simulator) -> None:
    job_file(tmp_path, sim.base_url)
    assert runner_cli("run", "pipeline.toml", cwd=tmp_path).returncode == 4
    status = runner_cli("status", "triage", cwd=tmp_path)
    assert (status.returncode, status.stderr, "extract" in status.stdout) == (0, "", True)
    with Store(tmp_path / "runs.db", read_only=True) as store:
        assert store.job("triage").stage("extract").provider.describe() == "python · extract-v1"


async def test_items_waiting_to_be_tried_again_at_a_python_stage_given_no_handler_stop_the_run_not_keep_it(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    path = job_file(tmp_path, sim.base_url)
    path.write_text(path.read_text(encoding="utf-8").replace(
        "[batch]", "[retry]\nrequest_retries = 0\nbackoff = 3600.0\nmax_backoff = 3600.0\n[batch]"), encoding="utf-8")
    engines: list[Engine] = []

    async def cut_off(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        engines[0].request_stop("the test stops it")
        raise TimeoutError("no answer")

    await runs.execute(store, jobs.load(path), handlers={"extract": PythonHandler(cut_off)}, started=engines.append)
    extract = store.status("triage", now=time.time())["stages"]["extract"]
    assert (extract["waiting"] > 0, extract["waiting"] + extract["pending"]) == (True, len(KEYS))
    stopped = runner_cli("run", "triage", "--wait", cwd=tmp_path)
    assert (stopped.returncode, "items wait at python stage 'extract'" in stopped.stderr) == (4, True)


async def test_a_pipeline_made_with_one_handler_for_every_stage_goes_on_with_it_as_before(
    tmp_path: Path, store: Store
) -> None:
    job = jobs.load(job_file(tmp_path, "http://127.0.0.1:9/v1", tables=CLASSIFY + SUMMARIZE))

    async def everything(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{"id": item["id"], "label": "bug", "summary": "s"} for item in items]

    await runs.execute(store, job, provider=PythonHandler(everything), read_input=True)
    outcome = await Run.attach("triage", db=location_of(store), provider=everything).go()
    assert (outcome.exit_code, outcome.status["counts"][ItemState.COMPLETED]) == (0, len(KEYS))
