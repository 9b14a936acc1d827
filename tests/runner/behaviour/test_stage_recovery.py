"""Recovery is per stage: an engine killed while it called stage 2 leaves its items held at stage 2 with their
stage-1 results kept (confirming sends stage 2 alone); an input changed meanwhile starts its item over at stage 1;
a stage-2 answer saved before the kill is validated and completed locally, with no call again."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from pipelines import calls_by_stage, pipeline
from support import ROOT, posts, write_jsonl
from test_pipeline_crash import KillAt, run

from runner import control, export, recovery, runs
from runner.model import ItemState
from runner.sim import Simulator
from runner.store import Store, views

KEYS = [f"p{i:03d}" for i in range(4)]

#: An engine in a process of its own that kills itself as it validates its first stage-2 (summarize) result.
KILLED_VALIDATING_STAGE_TWO = f"""
import asyncio, dataclasses, os, signal, sys
sys.path[:0] = [{str(ROOT)!r}]
from runner import jobs, runs
from runner.store import Store

def kill_at_stage_two(result):
    if "summary" in result:
        os.kill(os.getpid(), signal.SIGKILL)
    return None

job = dataclasses.replace(jobs.load(sys.argv[1]), check=kill_at_stage_two)
asyncio.run(runs.execute(Store(sys.argv[2]), job))
"""


async def killed_at_stage_two(tmp_path: Path, sim: Simulator, killer: KillAt) -> dict[str, object]:
    """Classify 4 posts, then kill the engine as its first summarize call arrives; the classify results."""
    with Store(tmp_path / "runs.db") as store:
        await runs.execute(store, pipeline(tmp_path, sim.base_url, count=4, stages="classify", max_items=4))
        classified = {row["key"]: row["classify"] for row in export.rows(store, "triage")}
    pipeline(tmp_path, sim.base_url, count=4, stages="classify summarize", max_items=4)
    sim.ledger.reset()
    killer.seen = 0
    assert run(tmp_path, "run", "pipeline.toml", killer=killer) == -signal.SIGKILL
    return classified


async def test_an_item_held_at_stage_two_keeps_its_stage_one_result_and_confirming_sends_stage_two_alone(
    tmp_path: Path
) -> None:
    killer = KillAt(1, "before answer")
    with Simulator(latency=0.01, on_request=killer).start() as sim:
        classified = await killed_at_stage_two(tmp_path, sim, killer)
        assert run(tmp_path, "run", "triage") == 4
        with Store(tmp_path / "runs.db") as store:
            items = [views.item(store, store.run_id("triage"), key) for key in KEYS]
            held = [(item["key"], item["stage"]) for item in items if item["state"] == ItemState.RUNNING]
            kept = {row["key"]: row["classify"] for row in export.rows(store, "triage")}
            recovery.confirm(store, "triage", now=0)
        assert run(tmp_path, "run", "triage") == 0
        calls = sim.ledger.snapshot()["calls"]
    assert held == [(key, "summarize") for key in KEYS]
    assert kept == classified
    assert calls_by_stage(calls) == {"summarize": sorted(KEYS * 2)}  # the call the kill cut short, then confirmed


async def test_an_input_changed_while_its_item_was_held_at_stage_two_starts_it_over_at_stage_one(
    tmp_path: Path
) -> None:
    killer = KillAt(1, "before answer")
    with Simulator(latency=0.01, on_request=killer).start() as sim:
        await killed_at_stage_two(tmp_path, sim, killer)
        changed = posts(4)
        changed[2]["body"] = "edited while its engine was down"
        write_jsonl(tmp_path / "posts.jsonl", changed)
        assert run(tmp_path, "run", "pipeline.toml") == 4
        with Store(tmp_path / "runs.db") as store:
            item = views.item(store, store.run_id("triage"), "p002")
            results = {row["key"]: row for row in export.rows(store, "triage")}["p002"]
            recovery.confirm(store, "triage", now=0)
            sim.ledger.reset()
            failed = views.failures(store, "triage")
            control.retry(store, "triage", now=0)
        assert run(tmp_path, "run", "triage") == 0
        calls = sim.ledger.snapshot()["calls"]
    assert (item["state"], item["stage"]) == (ItemState.FAILED, "classify")
    assert [(f["key"], f["kind"]) for f in failed] == [("p002", "input_changed")]
    assert "classify" not in results and "summarize" not in results
    assert calls_by_stage(calls) == {"classify": ["p002"], "summarize": KEYS}


async def test_a_stage_two_answer_saved_before_a_kill_is_completed_locally_with_no_call_again(
    tmp_path: Path, sim: Simulator
) -> None:
    pipeline(tmp_path, sim.base_url, count=4, stages="classify summarize", max_items=4)
    engine = subprocess.run([sys.executable, "-c", KILLED_VALIDATING_STAGE_TWO, str(tmp_path / "pipeline.toml"),
                             str(tmp_path / "runs.db")], cwd=tmp_path, capture_output=True)
    with Store(tmp_path / "runs.db") as store:
        received = [(item["state"], item["stage"]) for item in
                    (views.item(store, store.run_id("triage"), key) for key in KEYS)]
    sent = calls_by_stage(sim.ledger.snapshot()["calls"])
    assert run(tmp_path, "run", "pipeline.toml") == 0  # the job file: the Python check that killed it is not its
    assert engine.returncode == -signal.SIGKILL
    assert received == [(ItemState.RECEIVED, "summarize")] * 4
    assert calls_by_stage(sim.ledger.snapshot()["calls"]) == sent == {"classify": KEYS, "summarize": KEYS}
    with Store(tmp_path / "runs.db") as store:
        assert all({"classify", "summarize"} <= set(row) for row in export.rows(store, "triage"))
