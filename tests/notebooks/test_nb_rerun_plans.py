"""A notebook's retry, confirm and revalidate show their plan first: what may be billed again waits for yes=True."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from scenes import dead_engine
from support import commands_given, make_job, posts
from unwritable import SMALL_COUNTS, small_store

from runner import runs
from runner.errors import RunError
from runner.notebook import Run
from runner.recovery import Case
from runner.rules.rerun_plan import RerunPlan, Share
from runner.sim import Simulator
from runner.store import Store

NOW = 1_800_000_000.0


def held_after_a_crash(tmp_path: Path, count: int = 3) -> Run:
    """A run of ``count`` items whose engine died with them all in one sent call: held, each may be billed twice."""
    job = make_job(tmp_path, "http://127.0.0.1:9/v1", posts(count), name="crash", max_items=count)
    with Store(tmp_path / "runs.db") as store:
        run_id = runs.prepare(store, job, now=NOW)
        with dead_engine(store, "crash", "gone") as lease:
            batch = store.claim_batch(run_id, max_items=count, max_chars=10_000, now=NOW, owner="gone")
            assert batch is not None
            store.start_batch(batch.id, lease=lease, max_attempts=3, now=NOW)
        store.recover(run_id, now=NOW + 60)
    return Run.attach("crash", db=tmp_path / "runs.db")


def test_a_retry_plan_prints_as_the_cli_s_plan_line(tmp_path: Path) -> None:
    run = Run.attach("posts", db=small_store(tmp_path))
    shown = run.plan_retry(kind="item_invalid")
    assert shown == RerunPlan(Share(), Share(1, None))  # answered once: may be billed again; no price: unknown
    assert str(shown) == "plan: 1 item · 0 charge-safe · 1 may be billed again (cost unknown)"


def test_a_retry_that_may_bill_again_changes_nothing_without_yes_and_says_how(tmp_path: Path) -> None:
    run = Run.attach("posts", db=small_store(tmp_path))
    with pytest.raises(RunError) as refused:
        run.retry(kind="item_invalid")
    assert str(refused.value) == (
        "plan: 1 item · 0 charge-safe · 1 may be billed again (cost unknown): nothing was done; retry() asks before "
        "it sends items that may be billed again: to send them, retry(kind='item_invalid', yes=True)")
    assert run.status()["counts"] == SMALL_COUNTS
    assert run.retry(kind="item_invalid", yes=True) == 1
    assert run.status()["counts"]["pending"] == 2


async def test_a_charge_safe_retry_goes_on_without_yes(tmp_path: Path) -> None:
    with Simulator(faults={"rules": [{"fault": "http_400", "keys": ["p001"]}]}).start() as sim:
        run = Run("refused", posts(3), db=tmp_path / "runs.db", base_url=sim.base_url, batch={"max_items": 1})
        assert (await run.go()).exit_code == 3
        assert str(run.plan_retry()) == ("plan: 1 item · 1 charge-safe (est. $0.0000) · 0 may be billed again · 1 not "
                                         "retryable as it is (refused as sent: fix the cause first, or it fails the "
                                         "same way)")
        assert run.retry() == 1  # refused before running: not billed, so not asked


def test_a_confirm_that_resends_changes_nothing_without_yes(tmp_path: Path) -> None:
    run = held_after_a_crash(tmp_path)
    assert str(run.plan_confirm()) == "plan: 3 items · 0 charge-safe · 3 may be billed again (cost unknown)"
    with pytest.raises(RunError, match=r"^plan: 1 item .* to send them, confirm\(keys=\['p001'\], yes=True\)$"):
        run.confirm(["p001"])
    assert run.status()["needs_confirmation"] == 3
    assert run.confirm(["p001"], yes=True) == {Case.POLL: 0, Case.ADOPT: 0, Case.RESUBMIT: 1}
    assert run.status()["needs_confirmation"] == 2


def test_a_confirm_of_nothing_held_needs_no_yes(tmp_path: Path) -> None:
    run = Run.attach("posts", db=small_store(tmp_path))
    assert run.plan_confirm().items == 0
    assert run.confirm() == {Case.POLL: 0, Case.ADOPT: 0, Case.RESUBMIT: 0}


async def test_a_revalidate_plan_prices_the_items_a_fixed_schema_sends_again_before_anything_changes(
    tmp_path: Path
) -> None:
    async def label_all(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{"id": item["id"], "label": "question" if item["id"] != "p002" else "other"} for item in items]

    def defined(schema: dict[str, Any]) -> Run:
        return Run("nb", posts(4), db=tmp_path / "runs.db", provider=label_all, schema=schema)

    assert (await defined({"type": "object"}).go()).exit_code == 0
    stricter = defined({"type": "object", "properties": {"label": {"const": "question"}}})
    assert str(stricter.plan_revalidate()) == "plan: 4 items · 3 charge-safe (est. $0.0000) · 1 may be billed again (est. $0.0001)"
    assert not stricter.revalidate().applied
    assert stricter.status()["counts"]["completed"] == 4
    with Store(tmp_path / "runs.db", read_only=True) as store:
        assert commands_given(store, run="nb") == []
