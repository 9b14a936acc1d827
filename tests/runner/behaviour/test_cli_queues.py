"""``runner queue`` and the queue in ``runner status``: a person sets a shared queue's limit and resumes its breaker;
on each backend."""

from __future__ import annotations

import json
from pathlib import Path

from support import make_job, posts, runner_cli, write_jsonl

from runner import jobs, runs
from runner.sim import Simulator
from runner.store import Store


def queued_job(folder: Path, name: str, base_url: str) -> None:
    """The job file ``<name>.toml`` of run ``name`` over 10 posts, in the queue ``openai-main``."""
    write_jsonl(folder / "posts.jsonl", posts(10))
    (folder / f"{name}.toml").write_text(
        f'name = "{name}"\ninput = "posts.jsonl"\n[batch]\nmax_items = 5\n[provider]\nbase_url = "{base_url}"\n'
        f'queue = "openai-main"\n[retry]\nrequest_retries = 0\n', encoding="utf-8")


def test_a_queue_breaker_one_run_opened_stops_the_other_until_a_person_resumes_the_queue(
    tmp_path: Path, store: Store
) -> None:
    with Simulator(faults={"rules": [{"fault": "http_503"}]}).start() as sim:
        for name in ("a", "b"):
            queued_job(tmp_path, name, sim.base_url)
        first = runner_cli("run", "a.toml", cwd=tmp_path)
        sim.set_faults(None)
        held = runner_cli("run", "b.toml", cwd=tmp_path)
        stopped = json.loads(runner_cli("status", "b", "--json", cwd=tmp_path).stdout)
        run_resume = runner_cli("resume", "b", cwd=tmp_path)
        resumed = runner_cli("queue", "resume", "openai-main", cwd=tmp_path)
        finished = runner_cli("run", "b", cwd=tmp_path)
    assert (first.returncode, held.returncode) == (4, 4), first.stderr + held.stderr
    assert "stopped: breaker open (queue 'openai-main': 2 consecutive transport failures" in held.stderr
    assert stopped["queue"]["breaker"]["state"] == stopped["breaker"]["state"] == "open"
    assert stopped["counts"]["pending"] == 10
    assert run_resume.returncode == 1
    assert run_resume.stderr == ("error: run 'b' is held by its queue 'openai-main', whose breaker is open; to go on: "
                                 "runner queue resume openai-main\n")
    assert resumed.stdout == ("queue openai-main: breaker probing (resumed by a person: one batch at a time until one "
                              "succeeds)\n")
    assert finished.returncode == 0, finished.stderr


def test_a_run_stopped_by_its_queues_open_breaker_is_told_to_resume_the_queue(tmp_path: Path, store: Store) -> None:
    with Simulator(faults={"rules": [{"fault": "http_503"}]}).start() as sim:
        queued_job(tmp_path, "a", sim.base_url)
        stopped = runner_cli("run", "a.toml", cwd=tmp_path)
        status = runner_cli("status", "a", cwd=tmp_path)
    assert stopped.returncode == 4, stopped.stderr
    assert stopped.stderr.endswith("to go on:\nrunner queue resume openai-main\nrunner run a\n"), stopped.stderr
    assert "runner resume a" not in stopped.stderr
    assert "breaker open (queue 'openai-main'" in status.stdout


def test_a_person_sets_a_queues_limit_and_the_list_shows_it_with_each_run_it_holds(
    tmp_path: Path, store: Store
) -> None:
    runs.prepare(store, make_job(tmp_path, "http://127.0.0.1:9/v1", posts(3)), now=1.0)
    queued_job(tmp_path, "a", "http://127.0.0.1:9/v1")
    runs.prepare(store, jobs.load(tmp_path / "a.toml"), now=1.0)
    made = runner_cli("queue", "set", "openai-main", "--concurrency", "8", cwd=tmp_path)
    listed = json.loads(runner_cli("queue", "list", "--json", cwd=tmp_path).stdout)
    alone = json.loads(runner_cli("status", "test", "--json", cwd=tmp_path).stdout)
    shared = json.loads(runner_cli("status", "a", "--json", cwd=tmp_path).stdout)
    assert made.stdout == "queue openai-main: at most 8 batches in flight, all its runs together\n"
    assert [(queue["name"], queue["concurrency"]) for queue in listed] == [("openai-main", 8)]
    assert alone["queue"] is None
    assert shared["queue"] == {"name": "openai-main", "concurrency": 8, "held": 0, "waiting": 0, "in_flight": 0,
                               "breaker": {"state": "closed", "reason": None}, "quiet_until": None}


def test_a_queue_command_on_a_queue_the_store_lacks_or_a_limit_below_one_is_refused_in_one_line(
    tmp_path: Path, store: Store
) -> None:
    store.set_queue("openai-main", concurrency=2)
    unknown = runner_cli("queue", "resume", "anthropic", cwd=tmp_path)
    zero = runner_cli("queue", "set", "openai-main", "--concurrency", "0", cwd=tmp_path)
    closed = runner_cli("queue", "resume", "openai-main", cwd=tmp_path)
    assert (unknown.returncode, unknown.stderr) == (1, "error: no queue 'anthropic' in this store; its queues: "
                                                       "openai-main\n")
    assert (zero.returncode, zero.stderr) == (1, "error: queue 'openai-main': the concurrency must be at least 1, "
                                                 "not 0\n")
    assert (closed.returncode, closed.stderr) == (1, "error: queue 'openai-main': its breaker is closed, not open: "
                                                     "nothing to resume\n")
