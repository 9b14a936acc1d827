"""A notebook run's items in and out: add (records or a file, at a time), archive, restore, archived results."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from support import StepClock, posts, write_jsonl

from runner.errors import InputError, RunError
from runner.notebook import Run
from runner.sim import Simulator

START = 1_800_000_000.0


def run_of(tmp_path: Path, sim: Simulator, count: int = 2) -> Run:
    return Run("nb", posts(count), db=tmp_path / "runs.db", base_url=sim.base_url, clock=StepClock(START))


async def test_records_added_from_python_are_new_items_and_the_same_records_again_add_nothing(
    tmp_path: Path, sim: Simulator
) -> None:
    run = run_of(tmp_path, sim)
    assert (await run.go()).exit_code == 0
    done = run.add(posts(4)[1:])
    assert (done.added, done.skipped, done.first_skipped) == (2, 1, ("p001",))
    assert run.add(posts(4)[1:]).added == 0
    assert (tmp_path / "runs.db.inputs" / "nb.jsonl").read_text().count("\n") == 2  # the run's own input as it was
    assert (await run.go()).status["counts"]["completed"] == 4


async def test_records_added_from_a_file_at_a_time_wait_for_it(tmp_path: Path, sim: Simulator) -> None:
    run = run_of(tmp_path, sim)
    assert (await run.go()).exit_code == 0
    later = write_jsonl(tmp_path / "later.jsonl", posts(3)[2:])
    assert run.add(later, at=datetime.datetime.fromtimestamp(START + 3_600, datetime.UTC)).added == 1
    assert run.status()["scheduled"] == 1
    assert run.add(posts(4)[3:], at="in 1h").added == 1
    assert run.status()["scheduled"] == 2


async def test_an_add_at_what_is_not_a_time_names_the_argument_and_adds_nothing(
    tmp_path: Path, sim: Simulator
) -> None:
    run = run_of(tmp_path, sim)
    assert (await run.go()).exit_code == 0
    with pytest.raises(InputError, match=r"^add\(at=\.\.\.\): 'tomorrow' is not a time \(accepted: "):
        run.add(posts(3), at="tomorrow")
    assert run.status()["counts"]["completed"] == 2 and sum(run.status()["counts"].values()) == 2


async def test_archive_moves_finished_items_restore_brings_them_back_and_results_read_the_archive(
    tmp_path: Path, sim: Simulator
) -> None:
    run = run_of(tmp_path, sim, 3)
    assert (await run.go()).exit_code == 0
    assert run.archive(older="0m", state="completed") == {"completed": 3}
    assert run.status()["archived"] == 3 and run.results() == []
    assert [row["key"] for row in run.results(state="all", archived=True)] == ["p000", "p001", "p002"]
    assert run.restore(["p001"]) == 1 and run.restore([]) == 0
    assert [row["key"] for row in run.results()] == ["p001"]
    assert run.restore() == 2 and run.status()["archived"] == 0


async def test_archive_refuses_a_bad_age_a_bad_state_and_a_job_without_retention(
    tmp_path: Path, sim: Simulator
) -> None:
    run = run_of(tmp_path, sim)
    assert (await run.go()).exit_code == 0
    with pytest.raises(InputError, match=r"^archive\(older=\.\.\.\): '30 days' is not a duration"):
        run.archive(older="30 days")
    with pytest.raises(InputError, match=r"^archive\(state=\.\.\.\): 'pending' is not a finished state"):
        run.archive(state="pending")
    with pytest.raises(RunError, match="its job has no \\[retention\\]; say which items: older= or state="):
        run.archive()
    with pytest.raises(RunError, match="p009"):
        run.restore(["p009"])
    assert run.status()["archived"] == 0


async def test_archive_with_vacuum_shrinks_the_store_file(tmp_path: Path, sim: Simulator) -> None:
    posts_ = posts(300, body="A long post about the product. " * 40)
    run = Run("nb", posts_, db=tmp_path / "runs.db", base_url=sim.base_url, clock=StepClock(START),
              batch={"max_items": 100})
    assert (await run.go()).exit_code == 0
    assert run.archive(state="completed") == {"completed": 300} and run.restore() == 300
    size = (tmp_path / "runs.db").stat().st_size
    assert run.archive(state="completed", vacuum=True) == {"completed": 300}
    assert (tmp_path / "runs.db").stat().st_size < size * 0.7
