"""A run store in a PostgreSQL database (issue 20): the commands as on a file, and what they say when it fails."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from postgres_server import fresh_schema
from scenes import every_row
from support import ROOT, posts, runner_cli, write_jsonl

from runner.location import shown
from runner.sim import Simulator
from runner.store import Store


def job_file(folder: Path, base_url: str) -> None:
    write_jsonl(folder / "posts.jsonl", posts(10))
    (folder / "job.toml").write_text(f'name = "mine"\ninput = "posts.jsonl"\n[batch]\nmax_items = 4\n'
                                     f'[provider]\nbase_url = "{base_url}"\n')


def test_run_status_failures_and_export_on_a_postgresql_store_and_its_password_is_shown_and_kept_nowhere(
    tmp_path: Path, pg_server: str
) -> None:
    password = urlsplit(pg_server).password
    assert password
    faults = {"rules": [{"fault": "context_length", "keys": ["p003"]}]}
    with fresh_schema(pg_server) as url, Simulator(faults=faults).start() as sim:
        job_file(tmp_path, sim.base_url)
        ran = runner_cli("run", "job.toml", "--db", url, cwd=tmp_path)
        status = runner_cli("status", "mine", "--json", cwd=tmp_path, env={"RUNNER_DB": url})
        failures = runner_cli("failures", "mine", "--db", url, cwd=tmp_path)
        exported = runner_cli("export", "mine", "--format", "csv", "--out", "out.csv", "--state", "completed",
                              "--db", url, cwd=tmp_path)
        with Store(url) as store:
            rows = every_row(store)
    assert ran.returncode == 3, ran.stderr
    counts = json.loads(status.stdout)["counts"]
    assert (counts["completed"], counts["failed"]) == (9, 1)
    assert failures.returncode == 0 and "p003" in failures.stdout
    assert exported.returncode == 0, exported.stderr
    assert len((tmp_path / "out.csv").read_text().splitlines()) == 1 + 9
    said = [result.stdout + result.stderr for result in (ran, status, failures, exported)]
    assert [password in text for text in said] == [False] * 4
    assert [table for table, kept in rows.items() if any(password in row for row in kept)] == []


def test_a_postgresql_store_with_no_run_is_named_without_its_password(tmp_path: Path, pg_server: str) -> None:
    with fresh_schema(pg_server) as url:
        Store(url).close()
        said = runner_cli("status", "--db", url, cwd=tmp_path)
    assert (said.returncode, said.stdout, said.stderr) == (0, f"no runs in {shown(url)}\n", "")
    assert urlsplit(pg_server).password not in said.stdout


def test_a_store_url_without_the_postgres_extra_is_refused_in_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "no_driver"
    (missing / "psycopg").mkdir(parents=True)
    (missing / "psycopg" / "__init__.py").write_text("raise ImportError('no module named psycopg')\n")
    refused = runner_cli("status", "--db", "postgresql://runner:secret@127.0.0.1:5432/runs", cwd=tmp_path,
                         env={"PYTHONPATH": str(missing)})
    assert (refused.returncode, refused.stdout, refused.stderr) == (
        1, "", "error: PostgreSQL needs the postgres extra (the psycopg driver): pip install -e '.[postgres]' in "
               "runner's folder\n")


def test_a_server_that_refuses_the_connection_is_named_without_the_password(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port no server listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    refused = runner_cli("status", "--db", f"postgresql://runner:secret@127.0.0.1:{port}/runs", cwd=tmp_path)
    assert (refused.returncode, refused.stdout, refused.stderr) == (
        1, "", f"error: cannot reach the run store at postgresql://runner@127.0.0.1:{port}/runs (connection refused)\n")


@pytest.mark.slow
def test_three_runner_runs_of_one_run_on_a_postgresql_store_finish_it_and_bill_each_item_once(
    tmp_path: Path, pg_server: str
) -> None:
    with fresh_schema(pg_server) as url, Simulator(latency=0.2).start() as sim:
        write_jsonl(tmp_path / "posts.jsonl", posts(60))
        (tmp_path / "job.toml").write_text(f'name = "mine"\ninput = "posts.jsonl"\n[batch]\nmax_items = 2\n'
                                           f'concurrency = 3\n[provider]\nbase_url = "{sim.base_url}"\n')
        workers = [subprocess.Popen([sys.executable, "-m", "runner", "run", "job.toml"], cwd=tmp_path,
                                    env={**os.environ, "PYTHONPATH": str(ROOT), "RUNNER_DB": url},
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                    text=True) for _ in range(3)]
        errors = [worker.communicate(timeout=120)[1] for worker in workers]
        ledger = sim.ledger.snapshot()
    assert [worker.returncode for worker in workers] == [0, 0, 0], errors
    assert ledger["billed"] == {f"p{i:03d}": 1 for i in range(60)}
    assert ledger["max_in_flight"] <= 3
