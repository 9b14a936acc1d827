"""A store another process holds for a while (adding a large input, say): waited for, not a failed write."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support import counts_kept, counts_of_items, make_job, posts, states_of_items, states_told_by_events

from runner import busy, runs
from runner.errors import StoreBusy
from runner.sim import Simulator
from runner.states import BreakerState, FailureKind, ItemState
from runner.store import Store

#: How long the other process holds the store's write lock: three times what one of the store's writes waits.
HOLD_SECONDS = 1.5


class Holder:
    """Another connection that takes the store's write lock at the first call and gives it back after a while."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.taken = threading.Event()
        self.given_back = threading.Event()

    def __call__(self, ids: list[str]) -> None:
        if self.taken.is_set():
            return
        conn = sqlite3.connect(self.db, isolation_level=None, check_same_thread=False)
        conn.execute("BEGIN IMMEDIATE")
        self.taken.set()

        def give_back() -> None:
            conn.execute("COMMIT")
            conn.close()
            self.given_back.set()

        threading.Timer(HOLD_SECONDS, give_back).start()


@pytest.fixture
def held(tmp_path: Path) -> Iterator[tuple[Store, Simulator, Holder]]:
    """A store whose writes wait a third of the hold, and a simulator whose first call starts the hold."""
    holder = Holder(tmp_path / "runs.db")
    with Store(tmp_path / "runs.db", busy_timeout=HOLD_SECONDS / 3) as store, Simulator(
        on_request=holder
    ).start() as sim:
        yield store, sim, holder
        assert holder.given_back.wait(timeout=10 * HOLD_SECONDS)
        assert states_told_by_events(store) == states_of_items(store)
        assert counts_kept(store) == counts_of_items(store)


async def test_a_store_another_process_holds_for_a_while_is_waited_for_and_the_run_goes_on(
    tmp_path: Path, held: tuple[Store, Simulator, Holder]
) -> None:
    store, sim, holder = held
    job = make_job(tmp_path, sim.base_url, posts(40, groups=4), max_items=5)
    outcome = await runs.execute(store, job)
    assert holder.taken.is_set()
    assert outcome.exit_code == 0 and outcome.stopped_for is None
    assert outcome.status["breaker"]["state"] == BreakerState.CLOSED
    assert outcome.status["counts"][ItemState.COMPLETED] == 40
    assert sim.ledger.snapshot()["billed"] == {f"p{i:03d}": 1 for i in range(40)}


async def test_a_store_held_past_the_engines_patience_is_a_failed_write(
    tmp_path: Path, held: tuple[Store, Simulator, Holder], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(busy, "PATIENCE_SECONDS", HOLD_SECONDS / 3)
    store, sim, holder = held
    job = make_job(tmp_path, sim.base_url, posts(40, groups=4), max_items=5, concurrency=1)
    outcome = await runs.execute(store, job)
    assert holder.taken.is_set()
    assert outcome.exit_code == 4 and outcome.stop_kind == FailureKind.STORE
    assert outcome.stopped_for is not None and "the store is busy" in outcome.stopped_for
    assert sim.ledger.snapshot()["requests"] == 1


async def test_steps_wait_for_a_busy_store_in_line_and_a_start_asks_again_after_its_wait(tmp_path: Path) -> None:
    written: list[str] = []
    may_start = True

    def step(name: str) -> Callable[[], str]:
        def write() -> str:
            with store.write():
                written.append(name)
            return name

        return write

    with Store(tmp_path / "runs.db") as store, store.waiting_at_most(busy.WAIT_SECONDS):
        other = sqlite3.connect(store.path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        with pytest.raises(StoreBusy):
            step("alone")()
        steps = busy.StoreSteps()
        line = [
            asyncio.create_task(steps.run(step("answer"))),
            asyncio.create_task(steps.run(step("start"), still=lambda: may_start)),
            asyncio.create_task(steps.run(step("settle"))),
        ]
        for _ in range(100):  # let the three get in line behind the busy store
            await asyncio.sleep(0)
        assert steps.waiting
        may_start = False  # another slot stopped the run meanwhile
        other.execute("COMMIT")
        other.close()
        assert await asyncio.gather(*line) == ["answer", None, "settle"]
    assert written == ["answer", "settle"]
