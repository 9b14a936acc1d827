"""The archive over the simulator and the CLI (issue 19): nothing archived is sent again, pipelines and fan-outs
move whole, the commands' words, the file shrinks after a vacuum, and a job's [retention] at a run's end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from fanouts import fan_job
from pipelines import pipeline
from scenes import an_archived_sub_item, dump, every_row, location_of
from support import StepClock, make_job, posts, runner_cli, write_jsonl

from runner import archiving, runs
from runner.cli import main
from runner.sim import Simulator
from runner.store import Store, views

START = 1_800_000_000.0
LATER = START + 86_400
EVERY = {"completed": "0m", "failed": "0m"}


async def test_an_archived_item_is_not_sent_again_by_a_run(tmp_path: Path, sim: Simulator, store: Store) -> None:
    job = make_job(tmp_path, sim.base_url, posts(6), max_items=3)
    await runs.execute(store, job, clock=StepClock(START))
    archiving.archive(store, "test", ages=EVERY, now=LATER)
    calls = sim.ledger.snapshot()["calls"]
    outcome = await runs.execute(store, make_job(tmp_path, sim.base_url, posts(7), max_items=3),
                                 clock=StepClock(LATER))
    assert [call["ids"] for call in sim.ledger.snapshot()["calls"][len(calls):]] == [["p006"]]
    assert (outcome.status["counts"]["completed"], outcome.status["archived"]) == (7, 6)


async def test_a_pipelines_items_move_whole_with_their_stages_results_and_skips(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    await runs.execute(store, pipeline(tmp_path, sim.base_url, count=8), clock=StepClock(START))
    before, tallies = every_row(store), views.stage_tallies(store, "triage")
    assert archiving.archive(store, "triage", ages=EVERY, now=LATER) == {"completed": 8}
    assert views.stage_tallies(store, "triage") == tallies
    archiving.restore(store, "triage", keys=None, now=LATER)
    assert every_row(store) == before


async def test_a_fan_out_moves_as_one_unit_its_sub_items_with_their_parent(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    await runs.execute(store, fan_job(tmp_path, sim.base_url, count=2, chunks=3), clock=StepClock(START))
    before = every_row(store)
    assert sum(archiving.archive(store, "fan", ages={"completed": "0m"}, now=LATER).values()) == 8
    assert archiving.restore(store, "fan", keys=[an_archived_sub_item(store)], now=LATER) == 4
    assert archiving.restore(store, "fan", keys=None, now=LATER) == 4
    assert every_row(store) == before


def job_file(folder: Path, base_url: str, *, count: int, retention: str = "", body: str = "short") -> Path:
    """``folder/job.toml``, run ``mine``, over ``count`` posts of ``body``, with ``retention`` (TOML lines)."""
    write_jsonl(folder / "posts.jsonl", posts(count, body=body))
    text = f'name = "mine"\ninput = "posts.jsonl"\n[provider]\nbase_url = "{base_url}"\n'
    (folder / "job.toml").write_text(text + (f"[retention]\n{retention}" if retention else ""), encoding="utf-8")
    return folder / "job.toml"


def test_a_jobs_retention_archives_at_the_end_of_a_run_and_says_what(
    tmp_path: Path, sim: Simulator, store: Store
) -> None:
    job_file(tmp_path, sim.base_url, count=5, retention='completed = "0m"\nfailed = "90d"\n')
    ran = runner_cli("run", "job.toml", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ("archived 5 completed items of run 'mine' ([retention]: completed of any age, failed older than 90d)"
            in ran.stdout.splitlines())
    status = json.loads(runner_cli("status", "mine", "--json", cwd=tmp_path).stdout)
    assert (status["counts"]["completed"], status["archived"]) == (5, 5)
    shown = runner_cli("status", "mine", cwd=tmp_path).stdout.splitlines()
    assert shown[-2:] == ["5 items archived (counted above); bring them back:", "runner restore mine --all"]


def test_archive_with_no_flags_applies_the_jobs_retention(tmp_path: Path, sim: Simulator, store: Store) -> None:
    job_file(tmp_path, sim.base_url, count=2, retention='completed = "30d"\n')
    assert runner_cli("run", "job.toml", cwd=tmp_path).returncode == 0
    said = CliRunner().invoke(main, ["archive", "mine", "--db", location_of(store)])
    assert (said.exit_code, said.stdout) == (0, "nothing to archive in run 'mine' ([retention]: completed older "
                                                "than 30d)\n")


def test_archive_says_how_to_shrink_the_file_and_vacuum_shrinks_it(tmp_path: Path, sim: Simulator) -> None:
    job_file(tmp_path, sim.base_url, count=300, body="A long post about the product. " * 40)
    assert runner_cli("run", "job.toml", cwd=tmp_path).returncode == 0
    db = tmp_path / "runs.db"
    archived = CliRunner().invoke(main, ["archive", "mine", "--state", "completed", "--db", str(db)])
    assert archived.exit_code == 0, archived.output
    assert archived.stdout.splitlines()[1:] == [
        "the file keeps its size until a vacuum (it rewrites the file, holding the store meanwhile):",
        f"runner archive mine --state completed --vacuum --db {db}"]
    restored = CliRunner().invoke(main, ["restore", "mine", "--all", "--db", str(db)])
    assert restored.stdout == "300 items of run 'mine' restored from its archive\n"
    size = db.stat().st_size
    vacuumed = CliRunner().invoke(main, ["archive", "mine", "--older", "0m", "--vacuum", "--db", str(db)])
    assert vacuumed.exit_code == 0, vacuumed.output
    assert db.stat().st_size < size * 0.7  # the batches' raw answers stay with the run (its calls' record)
    assert vacuumed.stdout.splitlines()[1].startswith("store file ")


def test_the_vacuum_hint_is_a_command_that_works_on_a_job_without_retention(tmp_path: Path, sim: Simulator) -> None:
    job_file(tmp_path, sim.base_url, count=3)
    assert runner_cli("run", "job.toml", cwd=tmp_path).returncode == 0
    archived = runner_cli("archive", "mine", "--state", "completed", cwd=tmp_path)
    assert archived.stdout.splitlines()[0] == "archived 3 completed items of run 'mine' (--state: completed of any age)"
    hinted = archived.stdout.splitlines()[-1].split()
    assert hinted[:2] == ["runner", "archive"]
    vacuumed = runner_cli(*hinted[1:], cwd=tmp_path)
    assert vacuumed.returncode == 0, vacuumed.stderr
    assert vacuumed.stdout.splitlines()[-1].startswith("store file ")


def test_export_of_the_archive_has_the_rows_an_export_had(tmp_path: Path, sim: Simulator, store: Store) -> None:
    job_file(tmp_path, sim.base_url, count=4)
    assert runner_cli("run", "job.toml", cwd=tmp_path).returncode == 0
    db = location_of(store)
    exported = CliRunner().invoke(main, ["export", "mine", "--format", "csv", "--db", db]).stdout
    CliRunner().invoke(main, ["archive", "mine", "--older", "0m", "--db", db])
    assert CliRunner().invoke(main, ["export", "mine", "--format", "csv", "--db", db]).stdout.count("\n") == 1
    assert CliRunner().invoke(main, ["export", "mine", "--archived", "--format", "csv", "--db", db]).stdout == exported


@pytest.mark.parametrize("args, message", [
    (["archive", "nope", "--older", "1d"], "error: no run named 'nope' in "),
    (["archive", "mine", "--older", "3x"],
     "error: --older: '3x' is not a duration (a whole number and d, h or m: 30d, 12h, 90m)"),
    (["archive", "mine"], "error: run 'mine': its job has no [retention]; say which items: --older AGE or --state"),
    (["retry", "mine", "p000"],
     "error: run 'mine' has no item 'p000' ('p000' is archived: runner restore brings it back): nothing was changed"),
    (["restore", "mine", "p999"], "error: run 'mine': 1 of the keys given is not in its archive ('p999': not in the "
                                  "run); nothing was restored"),
])
def test_bad_input_is_one_line_and_exit_1_the_store_untouched(
    tmp_path: Path, sim: Simulator, args: list[str], message: str
) -> None:
    job_file(tmp_path, sim.base_url, count=2)
    assert runner_cli("run", "job.toml", cwd=tmp_path).returncode == 0
    db = str(tmp_path / "runs.db")
    assert CliRunner().invoke(main, ["archive", "mine", "--older", "0m", "--db", db]).exit_code == 0
    before = dump(tmp_path / "runs.db")
    said = CliRunner().invoke(main, [*args, "--db", db])
    assert said.exit_code == 1
    assert said.stderr.startswith(message) and said.stderr.count("\n") == 1, said.stderr
    assert dump(tmp_path / "runs.db") == before


def test_a_retention_that_is_no_duration_is_refused_with_the_job_file(tmp_path: Path) -> None:
    job_file(tmp_path, "http://127.0.0.1:9/v1", count=1, retention='failed = "90 days"\n')
    said = runner_cli("run", "job.toml", cwd=tmp_path)
    assert said.returncode == 1
    assert said.stderr == ("error: job.toml [retention] 'failed': '90 days' is not a duration (a whole number and d, "
                           "h or m: 30d, 12h, 90m)\n")
