"""``runner demo --pipeline``: the sample pipeline on the built-in simulator, end to end, as a user meets it: it stops
at the review with the commands that decide, and once decided goes on to the end."""

from __future__ import annotations

import json
from pathlib import Path

from support import runner_cli

from runner.store import Store, views


def tallies(tmp_path: Path) -> dict[str, tuple[int, int]]:
    """Each stage's results saved and items that skipped it, as the store has them."""
    with Store(tmp_path / "runs.db", read_only=True) as store:
        return {s.stage: (s.passed, s.skipped) for s in views.stage_tallies(store, "pipeline")}


def test_the_pipeline_demo_stops_at_the_review_saying_what_each_stage_did_and_how_to_decide(tmp_path: Path) -> None:
    demo = runner_cli("demo", "--pipeline", "--latency", "0", cwd=tmp_path)
    assert demo.returncode == 4, demo.stderr
    extracted, skipped = tallies(tmp_path)["extract"]
    assert 0 < extracted < 2400 and extracted + skipped == 2400
    lines = demo.stdout.splitlines()
    said = lines.index("Per stage:")
    assert lines[said:said + 9] == [
        "Per stage:",
        "  classify: 2,400 results saved",
        f"  extract: {extracted:,} results saved, {skipped:,} items skipped it (its when)",
        "  review: 0 results saved, 2,400 waiting there",
        "  summarize: 0 results saved",
        "Once decided, the demo goes on from there:",
        "runner demo --pipeline",
        "Run 'pipeline' is in runs.db; see it with:",
        "runner status pipeline",
    ]
    assert "Its first results:" not in lines and "All results:" not in lines  # none completed yet
    assert "runner decide pipeline --all-waiting --approve" in demo.stderr.splitlines()
    status = json.loads(runner_cli("status", "pipeline", "--json", cwd=tmp_path).stdout)
    assert status["needs_decision"] == 2400 and status["stages"]["review"]["waiting"] == 2400
    assert [(status["stages"][s]["passed"], status["stages"][s]["skipped"]) for s in ("classify", "extract")] == [
        (2400, 0), (extracted, skipped)]  # every item passed classify: its row is no longer blank


def test_once_approved_the_pipeline_demo_summarizes_every_post_and_a_third_calls_nothing(tmp_path: Path) -> None:
    assert runner_cli("demo", "--pipeline", "--latency", "0", cwd=tmp_path).returncode == 4
    assert runner_cli("decide", "pipeline", "--all-waiting", "--approve", cwd=tmp_path).returncode == 0
    demo = runner_cli("demo", "--pipeline", "--latency", "0", cwd=tmp_path)
    assert demo.returncode == 0, demo.stderr
    assert tallies(tmp_path)["summarize"] == (2400, 0)
    lines = demo.stdout.splitlines()
    assert "  summarize: 2,400 results saved" in lines
    first = lines[lines.index("Its first results:") + 1:-3]
    assert [line.split(": ")[0] for line in first] == ["  post-00001", "  post-00002", "  post-00003"]
    assert all(" · " in line for line in first)  # the first stage's label, then the last stage's summary
    assert lines[-3:-1] == ["All results:", "runner export pipeline --format csv --out pipeline.csv"]
    assert lines[-1].startswith("At gpt-4o-mini's price (2025-10), this run would have cost $")
    paid = json.loads(runner_cli("status", "pipeline", "--json", cwd=tmp_path).stdout)["paid_calls"]
    again = runner_cli("demo", "--pipeline", "--latency", "0", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "Every item of run 'pipeline' was already done: no call was made." in again.stdout.splitlines()
    assert json.loads(runner_cli("status", "pipeline", "--json", cwd=tmp_path).stdout)["paid_calls"] == paid
    status = runner_cli("status", "pipeline", cwd=tmp_path).stdout.splitlines()
    costs = [line for line in status if "cost: " in line]  # the run's cost line, then each calling stage's
    assert [line.split(":")[0].strip() for line in costs] == ["cost", "classify", "extract", "summarize"]
    assert all(" spent · tokens " in line for line in costs)


def test_the_demo_s_run_goes_on_by_runner_demo_its_simulator_having_stopped_with_it(tmp_path: Path) -> None:
    assert runner_cli("demo", "--pipeline", "--latency", "0", cwd=tmp_path).returncode == 4
    decided = runner_cli("decide", "pipeline", "post-00001", "--approve", cwd=tmp_path)
    assert decided.returncode == 0 and decided.stdout.splitlines()[-1] == "runner demo --pipeline"
    by_name = runner_cli("run", "pipeline", cwd=tmp_path)
    assert by_name.returncode == 1 and by_name.stderr.strip().endswith("go on with: runner demo --pipeline")
    assert tallies(tmp_path)["summarize"] == (0, 0)  # nothing was sent to the simulator gone
