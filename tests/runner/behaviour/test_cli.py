"""The CLI as a user meets it: the demo end to end, the status contract, help everywhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from support import commands_given, make_job, posts, python_run, runner_cli, write_jsonl

from runner import runs
from runner.cli import main
from runner.errors import AuthError
from runner.providers.handler import PythonHandler
from runner.store import Store
from runner.sim import Simulator
from runner.model import ItemState


def test_the_demo_completes_every_sample_item_and_status_says_so(tmp_path: Path) -> None:
    demo = runner_cli("demo", "--latency", "0", cwd=tmp_path)
    assert demo.returncode == 0, demo.stderr
    status = json.loads(runner_cli("status", "demo", "--json", cwd=tmp_path).stdout)
    assert {"run", "total", "counts", "groups", "breaker", "needs_confirmation", "engine"} <= set(status)
    assert status["duplicate_tasks"] == 0
    assert status["counts"] == {s.value: 2400 if s == ItemState.COMPLETED else 0 for s in ItemState}
    assert sum(sum(g.values()) for g in status["groups"].values()) == status["total"] == 2400
    assert len(status["groups"]) == 12
    assert status["breaker"] == {"state": "closed", "reason": None}
    assert (status["needs_confirmation"], status["engine"]) == (0, {"alive": False})


def test_a_second_demo_on_a_finished_run_says_no_call_was_made_and_still_shows_the_results(tmp_path: Path) -> None:
    assert runner_cli("demo", "--latency", "0", cwd=tmp_path).returncode == 0
    paid = json.loads(runner_cli("status", "demo", "--json", cwd=tmp_path).stdout)["paid_calls"]
    again = runner_cli("demo", "--latency", "0", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    lines = again.stdout.splitlines()
    said = lines.index("Every item of run 'demo' was already done: no call was made.")
    assert lines[said + 3:] == ["Its first results:", "  post-00001: feature_request", "  post-00002: bug_report",
                                "  post-00003: praise", "All results:",
                                "runner export demo --format csv --out demo.csv",
                                "At gpt-4o-mini's price (2025-10), this run would have cost $0.1075 (USD) upstream: "
                                "427,627 input and 72,278 output tokens."]
    assert json.loads(runner_cli("status", "demo", "--json", cwd=tmp_path).stdout)["paid_calls"] == paid == 2400


def test_run_takes_a_job_file_then_continues_the_run_by_name(tmp_path: Path, store: Store) -> None:
    (tmp_path / "posts.jsonl").write_text(
        "".join(json.dumps({"id": f"p{i}", "body": "hello"}) + "\n" for i in range(30))
    )
    with Simulator().start() as sim:
        (tmp_path / "job.toml").write_text(f'name = "mine"\ninput = "posts.jsonl"\n[provider]\nbase_url = "{sim.base_url}"\n')
        first = runner_cli("run", "job.toml", cwd=tmp_path)
        again = runner_cli("run", "mine", cwd=tmp_path)
        requests = sim.ledger.snapshot()["requests"]
    assert (first.returncode, again.returncode) == (0, 0), first.stderr + again.stderr
    assert requests == 2
    assert "completed" in first.stdout and "30" in first.stdout


@pytest.mark.parametrize("command", sorted(main.commands))
def test_every_command_has_help_with_an_example(command: str) -> None:
    result = CliRunner().invoke(main, [command, "--help"])
    assert result.exit_code == 0
    assert f"Example: runner {command}" in result.output


def test_a_sick_upstream_stops_the_run_for_a_person_who_resumes_it(tmp_path: Path, store: Store) -> None:
    (tmp_path / "posts.jsonl").write_text(
        "".join(json.dumps({"id": f"p{i}", "month": f"m{i % 4}", "body": "hello"}) + "\n" for i in range(40))
    )
    with Simulator(faults={"rules": [{"fault": "http_503"}]}).start() as sim:
        (tmp_path / "job.toml").write_text(
            f'name = "sick"\ninput = "posts.jsonl"\ngroup = "month"\n'
            f'[batch]\nmax_items = 5\n[provider]\nbase_url = "{sim.base_url}"\n'
            f"[retry]\nrequest_retries = 1\nbackoff = 0.01\n"
        )
        first = runner_cli("run", "job.toml", cwd=tmp_path)
        stopped = json.loads(runner_cli("status", "sick", "--json", cwd=tmp_path).stdout)
        sim.set_faults(None)
        resumed = runner_cli("resume", "sick", cwd=tmp_path)
        finished = runner_cli("run", "sick", cwd=tmp_path)
        done = json.loads(runner_cli("status", "sick", "--json", cwd=tmp_path).stdout)
    assert first.returncode == 4, first.stderr
    assert "stopped: breaker open (2 consecutive transport failures, last: 503" in first.stderr
    assert stopped["breaker"]["state"] == "open" and stopped["counts"]["failed"] == 0
    assert stopped["breaker"]["reason"].startswith("2 consecutive transport failures")
    assert resumed.stdout == "run 'sick': breaker probing\n"
    assert finished.returncode == 0, finished.stderr
    assert done["counts"]["completed"] == 40 and done["breaker"] == {"state": "closed", "reason": None}


def test_resume_on_a_run_neither_paused_nor_open_changes_nothing_and_says_so(tmp_path: Path, store: Store) -> None:
    runs.prepare(store, make_job(tmp_path, "http://127.0.0.1:9/v1", posts(3)), now=1.0)
    resumed = runner_cli("resume", "test", cwd=tmp_path)
    status = json.loads(runner_cli("status", "test", "--json", cwd=tmp_path).stdout)
    assert (resumed.returncode, resumed.stdout) == (1, "")
    assert resumed.stderr == "error: run 'test' is neither paused nor open (breaker closed): nothing to resume\n"
    assert status["breaker"] == {"state": "closed", "reason": None}
    assert commands_given(store) == []


async def test_retry_names_the_keys_it_does_not_know_exits_1_and_changes_nothing(tmp_path: Path, store: Store) -> None:
    await python_run(store, tmp_path)
    retried = runner_cli("retry", "test", "p001", "p404", "p405", cwd=tmp_path)
    failed = json.loads(runner_cli("failures", "test", "--json", cwd=tmp_path).stdout)
    assert (retried.returncode, retried.stdout) == (1, "")
    assert retried.stderr == "error: run 'test' has no items 'p404', 'p405': nothing was changed\n"
    assert [item["key"] for item in failed] == ["p001"]
    assert commands_given(store) == []


def test_step_pause_and_failures_from_the_command_line(tmp_path: Path) -> None:
    (tmp_path / "posts.jsonl").write_text(
        "".join(json.dumps({"id": f"p{i}", "body": "hello"}) + "\n" for i in range(30))
    )
    with Simulator(faults={"rules": [{"fault": "invalid_items", "keys": ["p3"]}]}).start() as sim:
        (tmp_path / "job.toml").write_text(
            f'name = "steps"\ninput = "posts.jsonl"\n[batch]\nmax_items = 10\n[provider]\nbase_url = "{sim.base_url}"\n'
            '[output.schema]\nrequired = ["label"]\nproperties.label.type = "string"\n[retry]\nmax_attempts = 1\n'
        )
        assert runner_cli("run", "job.toml", "--db", "other.db", cwd=tmp_path).returncode == 3
        runner_cli("pause", "steps", "--db", "other.db", cwd=tmp_path)
        paused = runner_cli("step", "steps", "--db", "other.db", cwd=tmp_path)
        failures = json.loads(runner_cli("failures", "steps", "--db", "other.db", "--json", cwd=tmp_path).stdout)
        retried = runner_cli("retry", "steps", "--kind", "item_invalid", "--yes", "--db", "other.db",
                             cwd=tmp_path)
        step_run = runner_cli("run", "steps", "--db", "other.db", cwd=tmp_path)
        after = runner_cli("status", "steps", "--db", "other.db", cwd=tmp_path)
        calls = sim.ledger.snapshot()["calls"]
    assert paused.stdout == "run 'steps': breaker closed, paused, 1 step allowed\n"
    assert failures == [{"key": "p3", "group": "all", "kind": "item_invalid", "attempts": 1, "retryable": True,
                         "message": failures[0]["message"], "paid_calls": 1, "maybe_paid": 0, "not_billed": 0,
                         "cost": failures[0]["cost"], "stage": "openai-chat"}]
    assert failures[0]["cost"] > 0  # its model's price is known: gpt-4o-mini
    assert failures[0]["message"].endswith("(gave up; attempts: 1, paid calls: 1)")
    assert retried.stdout == ("plan: 1 item · 0 charge-safe · 1 may be billed again (est. $0.0000)\n"
                              "1 failed item of run 'steps' pending again; to go on:\nrunner run steps --db other.db\n")
    assert (step_run.returncode, calls[-1]["ids"]) == (3, ["p3"])
    assert len(calls) == 4
    assert "breaker closed · paused" in " ".join(after.stdout.split())


async def test_an_upstream_message_that_looks_like_markup_is_printed_as_it_is(tmp_path: Path, store: Store) -> None:
    said = "Bad key [/bold] see [link=x]docs[/link] [red]"

    async def refuse(payloads: list[dict[str, object]]) -> str:
        raise AuthError(said)

    await runs.execute(store, make_job(tmp_path, "http://127.0.0.1:9/v1", posts(3)), provider=PythonHandler(refuse))
    status = runner_cli("status", "test", cwd=tmp_path)
    failures = runner_cli("failures", "test", cwd=tmp_path)
    assert (status.returncode, failures.returncode) == (0, 0), status.stderr + failures.stderr
    assert said in " ".join(status.stdout.split()) and said in " ".join(failures.stdout.split())


def test_a_simulator_on_a_port_already_taken_says_so_on_one_line(tmp_path: Path) -> None:
    with Simulator().start() as taken:
        refused = runner_cli("sim", "--port", str(taken.port), cwd=tmp_path)
    assert refused.returncode == 1
    assert refused.stderr.startswith(f"error: cannot listen on 127.0.0.1:{taken.port}: ")
    assert len(refused.stderr.strip().splitlines()) == 1


async def test_a_run_stopped_by_a_refused_key_exits_1_again_when_new_items_come_before_the_fix(tmp_path: Path) -> None:
    async def refuse(payloads: list[dict[str, object]]) -> str:
        raise AuthError("401 invalid_api_key")

    with Store(tmp_path / "runs.db") as store:
        first = await runs.execute(store, make_job(tmp_path, "http://127.0.0.1:9/v1", posts(3)),
                                   provider=PythonHandler(refuse))
        again = await runs.execute(store, make_job(tmp_path, "http://127.0.0.1:9/v1", posts(5)),
                                   provider=PythonHandler(refuse))
    assert (first.exit_code, first.stop_kind) == (1, "auth")
    assert (again.exit_code, again.stop_kind, again.stopped_for) == (1, "auth", "breaker open (auth: 401 invalid_api_key)")


def test_the_readmes_status_cost_line_is_the_one_runner_status_prints_for_the_demo(tmp_path: Path) -> None:
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text(encoding="utf-8")
    quoted = [line for line in readme.splitlines() if line.startswith("cost: $")]
    assert runner_cli("demo", "--latency", "0", cwd=tmp_path).returncode == 0
    shown = runner_cli("status", "demo", cwd=tmp_path, columns=200).stdout.splitlines()
    assert quoted and all(line in shown for line in quoted), (quoted, shown[-3:])


def test_runner_run_ends_with_the_runs_cost_line_as_status_shows_it(tmp_path: Path, store: Store) -> None:
    with Simulator().start() as sim:
        write_jsonl(tmp_path / "posts.jsonl", posts(3))
        (tmp_path / "job.toml").write_text(f'name = "test"\ninput = "posts.jsonl"\n[provider]\nbase_url = '
                                           f'"{sim.base_url}"\n', encoding="utf-8")
        ran = runner_cli("run", "job.toml", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    shown = runner_cli("status", "test", cwd=tmp_path).stdout.splitlines()
    cost = next(line for line in shown if line.startswith("cost"))
    assert ran.stdout.splitlines()[-1] == cost
