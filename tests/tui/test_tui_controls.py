"""The run screen's keys write a person's commands to the store, and a real engine obeys them.

The engine runs as a task in the test's event loop, against the simulator,
while the TUI reads the same store through its own connection.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import make_job, posts
from textual.notifications import Notify
from textual.pilot import Pilot
from textual.widgets._footer import FooterKey
from tui_support import settle

from runner import runs
from runner.clock import SystemClock
from runner.engine import Outcome
from runner.sim import Simulator
from runner.model import ItemState
from runner.store import Store, views
from runner.store.answers import RunState
from tui.__main__ import main
from tui.app import RunnerApp
from tui.screens.dialog import AskScreen
from tui.screens.run import RunScreen

WAIT = 10.0


class HeldUpstream:
    """Holds each request in the simulator until the test releases them, counting them."""

    def __init__(self) -> None:
        self.arrived = threading.Event()
        self.release = threading.Event()
        self.calls = 0

    def __call__(self, ids: list[str]) -> None:
        self.calls += 1
        self.arrived.set()
        self.release.wait(WAIT)


class IdleClock(SystemClock):
    """Real time; tells the test each time the engine, with nothing in flight, waits for its next turn."""

    def __init__(self) -> None:
        self._waiting: list[asyncio.Future[None]] = []

    async def sleep(self, seconds: float) -> None:
        for waiter in self._waiting:
            if not waiter.done():
                waiter.set_result(None)
        self._waiting.clear()
        await asyncio.sleep(seconds)

    async def next_idle(self) -> None:
        waiter = asyncio.get_running_loop().create_future()
        self._waiting.append(waiter)
        await asyncio.wait_for(waiter, WAIT)


@dataclass
class Live:
    """A run of 12 items in batches of 4, one at a time, whose engine is busy with its first batch."""

    store: Store
    sim: Simulator
    upstream: HeldUpstream
    clock: IdleClock
    engine: asyncio.Task[Outcome]
    app: RunnerApp
    pilot: Pilot[None]

    def control(self) -> tuple[bool, int]:
        (row,) = views.runs(self.store)
        return bool(row["paused"]), row["steps"]

    def started(self) -> int:
        return sum(batch["started_at"] is not None for batch in views.batches(self.store, self.store.run_id("test")))

    def completed(self) -> int:
        return views.status(self.store, "test", now=0.0)["counts"]["completed"]

    def view_state(self) -> RunState:
        screen = self.app.screen
        assert isinstance(screen, RunScreen) and screen.view is not None
        return screen.view.standing.state


@pytest.fixture
def upstream() -> Iterator[tuple[Simulator, HeldUpstream]]:
    held = HeldUpstream()
    with Simulator(on_request=held).start() as sim:
        yield sim, held
        held.release.set()


@pytest.fixture
async def live(
    tmp_path: Path, store: Store, upstream: tuple[Simulator, HeldUpstream]
) -> AsyncIterator[Live]:
    sim, held = upstream
    job = make_job(tmp_path, sim.base_url, posts(12), max_items=4, concurrency=1)
    runs.prepare(store, job, now=0.0)
    clock = IdleClock()
    app = RunnerApp(store.path, "test")
    async with app.run_test(size=(120, 40)) as pilot:
        engine = asyncio.create_task(runs.execute(store, job, clock=clock, wait_for_person=True, read_input=False))
        try:
            assert await asyncio.to_thread(held.arrived.wait, WAIT)
            await settle(pilot, read=True)
            yield Live(store, sim, held, clock, engine, app, pilot)
        finally:
            held.release.set()
            engine.cancel()
            await asyncio.gather(engine, return_exceptions=True)


async def test_the_run_screen_shows_a_live_engine(live: Live) -> None:
    assert live.view_state() is RunState.RUNNING


async def test_p_pauses_the_run_and_the_engine_starts_no_new_batch(live: Live) -> None:
    await live.pilot.press("p")
    await settle(live.pilot)
    assert live.control() == (True, 0)
    live.upstream.release.set()
    await live.clock.next_idle()
    assert (live.upstream.calls, live.started(), live.completed()) == (1, 1, 4)
    await settle(live.pilot, read=True)
    assert live.view_state() is RunState.PAUSED


async def test_s_lets_exactly_one_more_batch_run_and_the_run_stays_paused(live: Live) -> None:
    await live.pilot.press("p")
    await settle(live.pilot)
    live.upstream.release.set()
    await live.clock.next_idle()
    await live.pilot.press("s")
    await settle(live.pilot)
    await live.clock.next_idle()
    assert (live.upstream.calls, live.started(), live.completed()) == (2, 2, 8)
    assert live.control() == (True, 0)


async def test_r_resumes_a_paused_run_and_the_engine_finishes_it(live: Live) -> None:
    await live.pilot.press("p")
    await settle(live.pilot)
    live.upstream.release.set()
    await live.clock.next_idle()
    await live.pilot.press("r")
    await settle(live.pilot)
    outcome = await asyncio.wait_for(live.engine, WAIT)
    assert outcome.status["counts"][ItemState.COMPLETED] == 12
    assert (outcome.exit_code, live.upstream.calls, live.control()) == (0, 3, (False, 0))


async def test_a_step_the_core_refuses_is_a_notification_not_a_crash(tmp_path: Path, store: Store) -> None:
    job = make_job(tmp_path, "http://127.0.0.1:9/v1", posts(3))
    runs.prepare(store, job, now=0.0)
    told: list[str] = []
    app = RunnerApp(store.path, "test")
    async with app.run_test(message_hook=lambda m: told.append(m.notification.message) if isinstance(m, Notify)
                            else None) as pilot:
        await settle(pilot)
        await pilot.press("s")
        await settle(pilot)
        assert app.is_running and isinstance(app.screen, RunScreen)
    assert told == ["run 'test' is not paused and its breaker is not open: nothing to step"]


async def test_the_command_palette_offers_the_keys_by_name(tmp_path: Path, store: Store) -> None:
    runs.prepare(store, make_job(tmp_path, "http://127.0.0.1:9/v1", posts(3)), now=0.0)
    app = RunnerApp(store.path, "test")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+p", *"pause", "enter")
        await settle(pilot)
    assert store.control(store.run_id("test")).paused


async def test_a_click_on_a_footer_key_is_the_key(tmp_path: Path, store: Store) -> None:
    runs.prepare(store, make_job(tmp_path, "http://127.0.0.1:9/v1", posts(3)), now=0.0)
    app = RunnerApp(store.path, "test")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        pause = next(key for key in app.screen.query(FooterKey) if key.action == "pause")
        await pilot.click(pause)
        await settle(pilot)
    assert store.control(store.run_id("test")).paused


def test_python_m_tui_takes_a_store_and_a_run(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    assert "usage: python -m tui [-h] [--db DB] [run]" in capsys.readouterr().out


async def test_x_asks_how_many_items_and_that_batches_in_flight_finish_then_cancels_the_run(live: Live) -> None:
    await live.pilot.press("x")
    await settle(live.pilot)
    asked = live.app.screen
    assert isinstance(asked, AskScreen)
    said = str(asked.body)
    assert "12 unfinished items will fail as cancelled" in said and "1 batch in flight (4 items) finish first" in said
    await live.pilot.press("y")
    await settle(live.pilot)
    live.upstream.release.set()
    outcome = await asyncio.wait_for(live.engine, WAIT)
    assert (outcome.exit_code, live.upstream.calls) == (3, 1)
    assert outcome.status["counts"][ItemState.COMPLETED] == 4 and outcome.status["cancelled"] == 8
    await settle(live.pilot, read=True)
    assert live.view_state() is RunState.CANCELLED


async def test_x_answered_no_cancels_nothing(tmp_path: Path, store: Store) -> None:
    runs.prepare(store, make_job(tmp_path, "http://127.0.0.1:9/v1", posts(3)), now=0.0)
    app = RunnerApp(store.path, "test")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, read=True)
        await pilot.press("x")
        await settle(pilot)
        await pilot.press("n")
        await settle(pilot)
    assert views.status(store, "test", now=0.0)["counts"]["pending"] == 3
