"""``runner demo --pipeline``: the sample pipeline on the built-in simulator, end to end, as a user meets it."""

from __future__ import annotations

import json
from pathlib import Path

from support import runner_cli

from runner.store import Store, views


def test_the_pipeline_demo_runs_every_stage_and_says_what_each_did(tmp_path: Path) -> None:
    demo = runner_cli("demo", "--pipeline", "--latency", "0", cwd=tmp_path)
    assert demo.returncode == 0, demo.stderr
    lines = demo.stdout.splitlines()
    with Store(tmp_path / "runs.db", read_only=True) as store:
        stages = views.stage_tallies(store, "pipeline")
    extract = stages[1]
    assert [(s.stage, s.results) for s in stages] == [("classify", 2400), ("extract", extract.results),
                                                       ("summarize", 2400)]
    assert 0 < extract.results < 2400 and extract.results + extract.skipped == 2400
    said = lines.index("Per stage:")
    assert lines[said:said + 6] == [
        "Per stage:",
        "  classify: 2,400 results saved",
        f"  extract: {extract.results:,} results saved, {extract.skipped:,} items skipped it (its when)",
        "  summarize: 2,400 results saved",
        "Run 'pipeline' is in runs.db; see it with:",
        "runner status pipeline",
    ]
    first = lines[lines.index("Its first results:") + 1:-2]
    assert [line.split(": ")[0] for line in first] == ["  post-00001", "  post-00002", "  post-00003"]
    assert all(" · " in line for line in first)  # the first stage's label, then the last stage's summary
    assert lines[-2:] == ["All results:", "runner export pipeline --format csv --out pipeline.csv"]
    status = json.loads(runner_cli("status", "pipeline", "--json", cwd=tmp_path).stdout)
    assert status["counts"]["completed"] == 2400 and list(status["stages"]) == ["classify", "extract", "summarize"]


def test_a_second_pipeline_demo_calls_nothing_and_says_so(tmp_path: Path) -> None:
    assert runner_cli("demo", "--pipeline", "--latency", "0", cwd=tmp_path).returncode == 0
    paid = json.loads(runner_cli("status", "pipeline", "--json", cwd=tmp_path).stdout)["paid_calls"]
    again = runner_cli("demo", "--pipeline", "--latency", "0", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "Every item of run 'pipeline' was already done: no call was made." in again.stdout.splitlines()
    assert json.loads(runner_cli("status", "pipeline", "--json", cwd=tmp_path).stdout)["paid_calls"] == paid
