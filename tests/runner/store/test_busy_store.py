"""A store another process holds for a while (adding a large input, say): waited for, not a failed write."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from scenes import counts_kept, counts_of_items, states_of_items, states_told_by_events
from support import StepClock, make_job, posts

from runner import busy, control, runs
from runner.errors import GroupLost, StoreBusy
from runner.sim import Simulator
from runner.model import BreakerState, FailureKind, ItemState
from runner.store import Store
from runner.store.connection import SQLiteFile

#: How long the other process holds the store's write lock.
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
def held(tmp_path: Path) -> Iterator[tuple[Simulator, Holder]]:
    """A simulator whose first call has another connection take the store's write lock for ``HOLD_SECONDS``."""
    holder = Holder(tmp_path / "runs.db")
    with Simulator(on_request=holder).start() as sim:
        yield sim, holder
    assert holder.given_back.wait(timeout=10 * HOLD_SECONDS)


@pytest.fixture
def busy_seen(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often a write found the store busy (``SQLiteFile._begin`` raising StoreBusy)."""
    seen: Counter[str] = Counter()
    begin = SQLiteFile._begin

    def counted(database: SQLiteFile) -> None:
        try:
            begin(database)
        except StoreBusy:
            seen["busy"] += 1
            raise

    monkeypatch.setattr(SQLiteFile, "_begin", counted)
    return seen


def assert_consistent(store: Store) -> None:
    assert states_told_by_events(store) == states_of_items(store)
    assert counts_kept(store) == counts_of_items(store)


async def test_a_store_another_process_holds_for_a_while_is_waited_for_and_the_run_goes_on(
    tmp_path: Path, held: tuple[Simulator, Holder], busy_seen: Counter[str]
) -> None:
    sim, holder = held
    # One write of this store waits a third of the hold: alone, it would fail.
    with Store(tmp_path / "runs.db", busy_timeout=HOLD_SECONDS / 3) as store:
        job = make_job(tmp_path, sim.base_url, posts(40, groups=4), max_items=5)
        outcome = await runs.execute(store, job)
        assert_consistent(store)
    assert holder.taken.is_set() and busy_seen["busy"] > 0
    assert outcome.exit_code == 0 and outcome.stopped_for is None
    assert outcome.status["breaker"]["state"] == BreakerState.CLOSED
    assert outcome.status["counts"][ItemState.COMPLETED] == 40
    assert sim.ledger.snapshot()["billed"] == {f"p{i:03d}": 1 for i in range(40)}


async def test_a_store_held_past_the_engines_patience_is_a_failed_write_that_opens_the_breaker(
    tmp_path: Path, held: tuple[Simulator, Holder], busy_seen: Counter[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(busy, "PATIENCE_SECONDS", HOLD_SECONDS / 3)
    sim, holder = held
    # A write of this store outlasts the hold: the engine, stopping, saves its open breaker.
    with Store(tmp_path / "runs.db", busy_timeout=2 * HOLD_SECONDS) as store:
        job = make_job(tmp_path, sim.base_url, posts(40, groups=4), max_items=5, concurrency=1)
        outcome = await runs.execute(store, job)
        assert_consistent(store)
    assert holder.taken.is_set() and busy_seen["busy"] > 0
    assert outcome.exit_code == 4 and outcome.stop_kind == FailureKind.STORE
    reason = outcome.status["breaker"]["reason"]
    assert outcome.status["breaker"]["state"] == BreakerState.OPEN
    assert reason.startswith("store: ") and "the store is busy" in reason and outcome.stopped_for == reason
    assert sim.ledger.snapshot()["requests"] == 1


class ResumedWhileHeld(StepClock):
    """A clock whose third idle wait is when a person resumes the run, as another process takes the store."""

    def __init__(self, db: Path) -> None:
        super().__init__()
        self.db, self.waits = db, 0
        self.holder = Holder(db)

    async def sleep(self, seconds: float) -> None:
        self.waits += 1
        if self.waits == 3:
            with Store(self.db) as other:
                control.resume(other, "test", now=self.time)
            self.holder([])
        await super().sleep(seconds)


async def test_a_run_resumed_while_the_store_is_busy_waits_for_it_and_goes_on(
    tmp_path: Path, sim: Simulator, busy_seen: Counter[str]
) -> None:
    """Nothing in flight and no batch formed: the store, busy, is waited for, not taken for items left to a person."""
    job = make_job(tmp_path, sim.base_url, posts(20, groups=2), max_items=5)
    with Store(tmp_path / "runs.db") as store:  # a SQLite file's own lock
        runs.prepare(store, job, now=1.0)
        control.pause(store, "test", now=1.0)
        clock = ResumedWhileHeld(tmp_path / "runs.db")
        outcome = await runs.execute(store, job, clock=clock, wait_for_person=True)
    assert clock.holder.given_back.wait(timeout=10 * HOLD_SECONDS) and busy_seen["busy"] > 0
    assert outcome.exit_code == 0 and outcome.stopped_for is None
    assert outcome.status["counts"][ItemState.COMPLETED] == 20


class Line:
    """A store another connection holds, and a line of steps over it on a test clock; each step counts its tries."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.other = sqlite3.connect(store.path, isolation_level=None)
        self.other.execute("CREATE TABLE marks (name TEXT NOT NULL)")
        self.other.execute("BEGIN IMMEDIATE")
        self.clock = clock = StepClock()
        #: How often the line found the store busy and paused.
        self.slept = 0

        async def sleep(seconds: float) -> None:
            self.slept += 1
            await clock.sleep(seconds)

        self.steps = busy.StoreSteps(store, now=clock.now, sleep=sleep)
        self.tries: Counter[str] = Counter()
        self.written: list[str] = []

    def step(self, name: str, *, fails: bool = False) -> Callable[[], str]:
        """A step that writes a row of its own; ``fails``: then raises, a bug of that step."""

        def write() -> str:
            self.tries[name] += 1
            with self.store.write() as conn:
                conn.execute("INSERT INTO marks (name) VALUES (?)", (name,))
                self.written.append(name)
            if fails:
                raise ValueError(f"a bug in {name}")
            return name

        return write

    def marks(self) -> list[str]:
        """The rows the steps committed."""
        return [row["name"] for row in self.store.rows("SELECT name FROM marks ORDER BY rowid")]

    def let_go(self) -> None:
        self.other.execute("ROLLBACK")
        self.other.close()


@pytest.fixture
def line(tmp_path: Path) -> Iterator[Line]:
    with Store(tmp_path / "runs.db") as store, store.waiting_at_most(busy.WAIT_SECONDS):
        yield Line(store)


async def test_steps_wait_for_a_busy_store_in_line_and_a_start_asks_again_before_it_is_written(line: Line) -> None:
    may_start = True
    asked: list[bool] = []

    def still() -> bool:
        asked.append(may_start)
        return may_start

    tasks = [
        asyncio.create_task(line.steps.run(line.step("start"), still=still)),
        asyncio.create_task(line.steps.run(line.step("answer"))),
        asyncio.create_task(line.steps.run(line.step("settle"))),
    ]
    for _ in range(100):  # until the line has found the store busy once
        if line.slept:
            break
        await asyncio.sleep(0)
    assert line.slept and not line.tries and not asked
    may_start = False  # another slot stopped the run meanwhile
    line.let_go()
    assert await asyncio.gather(*tasks) == [None, "answer", "settle"]
    assert line.written == ["answer", "settle"] and asked == [False] and "start" not in line.tries


async def test_a_step_in_line_has_only_the_patience_left_from_when_it_was_asked_for(
    line: Line, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(busy, "PATIENCE_SECONDS", 30.0)
    first = asyncio.create_task(line.steps.run(line.step("first")))
    asked = line.clock.now()
    while line.clock.now() < asked + 5:  # the store found busy for a while, the first step's patience partly spent
        await asyncio.sleep(0)
    second = asyncio.create_task(line.steps.run(line.step("second")))
    with pytest.raises(StoreBusy):
        await first
    assert not second.done()
    line.let_go()
    assert await second == "second"
    assert line.written == ["second"]


async def test_steps_asked_together_are_written_in_one_commit_and_a_failed_one_undoes_only_its_own(
    line: Line,
) -> None:
    line.let_go()
    commits = []
    line.store.database.conn.set_trace_callback(lambda sql: commits.append(sql) if sql == "COMMIT" else None)

    outcomes = await asyncio.gather(line.steps.run(line.step("start")), line.steps.run(line.step("fails", fails=True)),
                                    line.steps.run(line.step("answer")), return_exceptions=True)
    assert outcomes[0] == "start" and isinstance(outcomes[1], ValueError) and outcomes[2] == "answer"
    assert commits == ["COMMIT"]
    assert line.marks() == ["start", "answer"]


@pytest.mark.parametrize("denied", ["ROLLBACK", "RELEASE"])
async def test_a_group_whose_savepoint_cannot_be_undone_or_released_is_lost_whole_and_every_step_hears_it(
    line: Line, denied: str
) -> None:
    """``ROLLBACK TO`` or ``RELEASE`` failing: what the group holds is unknown, so none of it is committed."""
    line.let_go()

    def authorize(action: int, operation: str | None, *_: str | None) -> int:
        refused = action == sqlite3.SQLITE_SAVEPOINT and operation == denied
        return sqlite3.SQLITE_DENY if refused else sqlite3.SQLITE_OK

    line.store.database.conn.set_authorizer(authorize)
    outcomes = await asyncio.gather(line.steps.run(line.step("start")), line.steps.run(line.step("fails", fails=True)),
                                    line.steps.run(line.step("answer")), return_exceptions=True)
    line.store.database.conn.set_authorizer(None)
    assert [type(outcome) for outcome in outcomes] == [GroupLost, GroupLost, GroupLost]
    assert line.marks() == []
    first, *others = outcomes
    assert [other.__cause__ for other in others] == [first, first], "each caller has an error of its own"
    assert all(str(other) == str(first) for other in others)
