"""The notebook API's cancel, and ``on_cancel``: a person's compensation, once per cancelled item, with its state."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support import posts, write_jsonl

from runner import runs
from runner.notebook import Run
from runner.store import Store


def prepared(run: Run) -> None:
    """The run's items added, pending, with no engine: nothing is in flight when a cancel comes."""
    with Store(run.db) as store:
        runs.prepare(store, run.job, now=run.clock.now)


def test_on_cancel_is_called_once_per_cancelled_item_with_its_state_after_the_cancel(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []
    run = Run("nb", posts(3), db=tmp_path / "runs.db", base_url="http://127.0.0.1:9/v1", group="month",
              fields=["body"], on_cancel=lambda state: seen.append({**state, "failed": run.status()["counts"]["failed"]}))
    prepared(run)
    first = run.cancel(keys=["p001"])
    rest = run.cancel()
    again = run.cancel()
    assert (first.failed, first.called, rest.failed, rest.called) == (1, ("p001",), 2, ("p000", "p002"))
    assert (again.failed, again.called) == (0, ())
    assert seen[0] == {"id": "p001", "body": posts(3)[1]["body"], "failed": 1}
    assert [state["id"] for state in seen] == ["p001", "p000", "p002"]


def test_an_exception_in_on_cancel_is_reported_by_key_and_never_loses_the_cancel(tmp_path: Path) -> None:
    called: list[str] = []

    def compensate(state: dict[str, Any]) -> None:
        called.append(state["id"])
        if state["id"] == "p000":
            raise ValueError("the reservation is gone")

    run = Run("nb", posts(2), db=tmp_path / "runs.db", base_url="http://127.0.0.1:9/v1", on_cancel=compensate)
    prepared(run)
    report = run.cancel()
    assert report.errors == {"p000": "ValueError: the reservation is gone"} and called == ["p000", "p001"]
    assert {f["kind"] for f in run.failures()} == {"cancelled"} and run.cancel().called == ()


def test_an_empty_list_of_keys_cancels_nothing(tmp_path: Path) -> None:
    run = Run("nb", posts(2), db=tmp_path / "runs.db", base_url="http://127.0.0.1:9/v1")
    prepared(run)
    assert run.cancel(keys=[]) == (0, 0, (), {})
    assert run.status()["counts"]["pending"] == 2


async def test_items_cancelled_in_flight_are_compensated_when_the_run_ends(tmp_path: Path) -> None:
    seen: list[str] = []

    async def handler(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if not seen:  # the first batch's call: a person cancels the run while it is in flight
            report = run.cancel()
            seen.append(f"cancel: {report.failed} now, {report.finishing} in flight")
        return [{"id": item["id"]} for item in items]  # no label: each would be tried again

    run = Run("nb", posts(4), db=tmp_path / "runs.db", provider=handler, batch={"max_items": 2, "concurrency": 1},
              schema={"required": ["label"]}, on_cancel=lambda state: seen.append(state["id"]))
    outcome = await run.go()
    assert seen == ["p002", "p003", "cancel: 2 now, 2 in flight", "p000", "p001"]
    assert outcome.exit_code == 3 and outcome.status["cancelled"] == 4


def test_on_cancel_is_called_once_per_item_when_another_run_compensates_while_it_is_being_called(
    tmp_path: Path
) -> None:
    seen: list[str] = []

    def compensate(state: dict[str, Any]) -> None:
        seen.append(state["id"])
        if len(seen) == 1:  # meanwhile another kernel's run (or this run's engine ending) compensates too
            other.cancel()

    run = Run("nb", posts(3), db=tmp_path / "runs.db", base_url="http://127.0.0.1:9/v1", on_cancel=compensate)
    prepared(run)
    other = Run.attach("nb", db=tmp_path / "runs.db", on_cancel=compensate)
    assert run.cancel().called == ("p000", "p001", "p002")
    assert seen == ["p000", "p001", "p002"]


def test_a_run_of_a_job_file_takes_on_cancel(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "posts.jsonl", posts(2))
    (tmp_path / "job.toml").write_text(
        'name = "nb"\ninput = "posts.jsonl"\n[provider]\nbase_url = "http://127.0.0.1:9/v1"\n')
    seen: list[str] = []
    run = Run.from_job_file(tmp_path / "job.toml", db=tmp_path / "runs.db", on_cancel=lambda s: seen.append(s["id"]))
    prepared(run)
    assert run.cancel().called == ("p000", "p001") and seen == ["p000", "p001"]
