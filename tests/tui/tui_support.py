"""A run store built from fixed data at fixed times, for the TUI's snapshots and reads.

Everything goes through the store's own transitions, driven by hand as an
engine would, with ``now`` given. No engine is alive: one died holding
``posts`` (its lease left behind, its heartbeat long silent), the others
ended and gave their runs back.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from scenes import engine_elsewhere, engine_row, no_engine
from support import add_all, make_job, posts
from textual.message import Message
from textual.notifications import Notify
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import DataTable

from runner import breaker, control, item_rows
from runner.item_rows import ItemRow
from runner.jobs import Job
from runner.model import FailureKind
from runner.store import Settlement, StartedItem, Store
from tui.app import RunnerApp
from tui.screens.base import StoreScreen
from tui.screens.runs import RunsScreen

#: The time the TUI is shown at, in every snapshot.
NOW = 1_800_000_100.0
LEASE = "gone"
#: The runs :func:`build` makes, by name.
RUNS = ["archive", "drafts", "months", "posts", "summaries", "tags", "tickets"]


def build(folder: Path) -> Path:
    """Seven runs in ``folder/runs.db``: mid-way whose engine died, held, paused, stopped, done (one over twelve
    months, as the demo), done with failures."""
    db = folder / "runs.db"
    with Store(db) as store:
        _posts(store, folder)
        _tickets(store, folder)
        _summaries(store, folder)
        _archive(store, folder)
        _drafts(store, folder)
        _tags(store, folder)
        _months(store, folder)
    return db


def job(folder: Path, name: str, count: int, *, groups: int = 3, kind: str = "openai-chat", **limits: Any) -> Job:
    made = make_job(folder, "http://127.0.0.1:9/v1", posts(count, groups=groups), name=name, **limits)
    return replace(made, provider=replace(made.provider, kind=kind))


class Hand:
    """Drives one run's batches through the store's transitions at given times, as an engine would."""

    def __init__(self, store: Store, job: Job, at: float) -> None:
        self.store = store
        self.job = job
        self.began = at
        #: The engine's token: one per run, as engines' are.
        self.token = f"{LEASE} {job.name}"
        self.run_id = add_all(store, job, _rows(job), now=at)
        engine_elsewhere(store, job.name, self.token)

    def claim(self, at: float) -> int:
        limits = self.job.batch
        batch = self.store.claim_batch(self.run_id, max_items=limits.max_items, max_chars=limits.max_chars, now=at,
                                        owner=self.token)
        assert batch is not None
        return batch.id

    def start(self, at: float, *, intent: bool = True) -> tuple[int, list[StartedItem]]:
        batch = self.claim(at)
        items = self.store.start_batch(batch, lease=(self.job.name, self.token), max_attempts=3, now=at, intent=intent)
        return batch, items

    def complete(self, started: float, finished: float) -> None:
        batch, items = self.start(started)
        outputs = {item.id: json.dumps({"id": item.key, "label": "question"}) for item in items}
        self.store.record_answer(batch, outputs, raw="{}", answered=list(outputs), now=finished)
        self.settle(batch, Settlement(completed=list(outputs), breaker=breaker.after_success), finished)

    def settle(self, batch: int, settlement: Settlement, at: float) -> None:
        self.store.settle_batch(batch, settlement, now=at)

    def leave(self) -> None:
        """The engine ended and gave the run back: its lease row is gone."""
        no_engine(self.store, self.job.name)

    def die(self, *, heartbeat_at: float) -> None:
        """The engine died holding the run: its lease stays, last renewed at ``heartbeat_at``, on another host."""
        no_engine(self.store, self.job.name)
        engine_row(self.store, self.job.name, self.token, pid=999_999, host="elsewhere", started_at=self.began,
                   heartbeat_at=heartbeat_at)


def _rows(job: Job) -> Iterable[ItemRow]:
    return item_rows.items(job)


def _posts(store: Store, folder: Path) -> None:
    """Mid-way when its engine died: completed, waiting, failed of two kinds, two batches in flight, a person's commands."""
    hand = Hand(store, job(folder, "posts", 36, max_items=4, concurrency=2), NOW - 100)
    for t in (NOW - 85, NOW - 70, NOW - 55, NOW - 40, NOW - 25):
        hand.complete(t - 6, t)
    batch, items = hand.start(NOW - 20)
    store.count_request_retry(batch)
    store.count_request_retry(batch)
    message = "503 server_is_overloaded"
    waiting = Settlement(
        retry={i.id: (FailureKind.TRANSPORT, message) for i in items}, not_before=NOW + 30,
        breaker=lambda c: breaker.after_transport_failure(c, message),
    )
    hand.settle(batch, waiting, NOW - 15)
    batch, items = hand.start(NOW - 14)
    answer = {items[0].id: json.dumps({"id": items[0].key, "label": "question"})}
    store.record_answer(batch, answer, raw="{}", now=NOW - 10)
    refused = "400 the request is malformed: body too long"
    invalid = "'label' is a required property (gave up; attempts: 3, paid calls: 3)"
    failed = Settlement(completed=list(answer), failed={
        items[1].id: (FailureKind.BAD_REQUEST, refused, False),
        items[2].id: (FailureKind.BAD_REQUEST, refused, False),
        items[3].id: (FailureKind.ITEM_INVALID, invalid, True),
    })
    hand.settle(batch, failed, NOW - 10)
    control.pause(store, "posts", now=NOW - 9.5)
    control.step(store, "posts", now=NOW - 9.2)
    control.resume(store, "posts", now=NOW - 9)
    hand.start(NOW - 8)
    hand.claim(NOW - 3)
    hand.die(heartbeat_at=NOW - 20)


def _tickets(store: Store, folder: Path) -> None:
    """Held after a crash: one batch to poll, one to look for, one sent whose answer was lost."""
    hand = Hand(store, job(folder, "tickets", 12, groups=2, max_items=3, kind="openai-batch"), NOW - 600)
    hand.complete(NOW - 590, NOW - 560)
    polled, _ = hand.start(NOW - 550, intent=False)
    store.mark_intent(polled, now=NOW - 550)
    store.mark_create_sent(polled, lands_by=NOW - 370)
    store.save_task_id(polled, "batch_6f1c2e")
    adopted, _ = hand.start(NOW - 549, intent=False)
    store.mark_intent(adopted, now=NOW - 549)
    store.mark_create_sent(adopted, lands_by=NOW - 369)
    hand.start(NOW - 548, intent=True)
    hand.leave()
    store.recover(hand.run_id, now=NOW - 300)


def _summaries(store: Store, folder: Path) -> None:
    """Paused by a person after a little work."""
    hand = Hand(store, job(folder, "summaries", 20, groups=1, max_items=5), NOW - 3_000)
    hand.complete(NOW - 2_990, NOW - 2_980)
    hand.leave()
    control.pause(store, "summaries", now=NOW - 2_900)


def _archive(store: Store, folder: Path) -> None:
    """Long done."""
    hand = Hand(store, job(folder, "archive", 8, groups=2, max_items=4), NOW - 90_000)
    hand.complete(NOW - 89_990, NOW - 89_980)
    hand.complete(NOW - 89_970, NOW - 89_960)
    hand.leave()


def _drafts(store: Store, folder: Path) -> None:
    """Stopped by its engine (a Ctrl-C, say) with items to do and nothing for a person."""
    hand = Hand(store, job(folder, "drafts", 10, groups=1, max_items=5), NOW - 400)
    hand.complete(NOW - 390, NOW - 380)
    hand.leave()


def _tags(store: Store, folder: Path) -> None:
    """Done in 40 s, first start to last finish, with one item failed."""
    hand = Hand(store, job(folder, "tags", 6, groups=2, max_items=3), NOW - 1_000)
    hand.complete(NOW - 990, NOW - 975)
    batch, items = hand.start(NOW - 970)
    outputs = {item.id: json.dumps({"id": item.key, "label": "question"}) for item in items[1:]}
    store.record_answer(batch, outputs, raw="{}", answered=list(outputs), now=NOW - 950)
    invalid = "'label' is a required property (gave up; attempts: 3, paid calls: 3)"
    hand.settle(batch, Settlement(completed=list(outputs), failed={items[0].id: (FailureKind.ITEM_INVALID, invalid, True)}),
                NOW - 950)
    hand.leave()


def _months(store: Store, folder: Path) -> None:
    """Done over twelve months, as the demo's run: a batch per month."""
    hand = Hand(store, job(folder, "months", 36, groups=12, max_items=3), NOW - 200)
    for month in range(12):
        hand.complete(NOW - 190 + 10 * month, NOW - 185 + 10 * month)
    hand.leave()


async def settle(pilot: Pilot[None], *, read: bool = False) -> None:
    """Wait until the app's workers are done and what they posted is handled (a command's read included).

    ``read``: first ask the screen for a fresh read of the store, to see what changed since its last one.
    """
    app = pilot.app
    if read and isinstance(app.screen, StoreScreen):
        app.screen.reload()
    for _ in range(20):
        await app.workers.wait_for_complete()
        await pilot.pause()
        if not any(worker.is_running for worker in app.workers):
            return
    raise AssertionError("the app's workers kept running")


async def press(pilot: Pilot[Any], *keys: str) -> None:
    """Let the screen read the store, then press each key and let what it opens read the store too."""
    await settle(pilot)
    for key in keys:
        await pilot.press(key)
        await settle(pilot)


class Told:
    """The notifications an app showed."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    def __call__(self, message: Message) -> None:
        if isinstance(message, Notify):
            self.messages.append(message.notification.message)


def shown_runs(app: RunnerApp) -> list[str]:
    screen = app.screen
    assert isinstance(screen, RunsScreen) and screen.runs is not None
    return [run.name for run in screen.runs]


def whole_width(table: DataTable[Any]) -> bool:
    """Every column of the table in sight: nothing to scroll to sideways."""
    return table.max_scroll_x == 0


def shown(widget: Widget) -> list[str]:
    """The lines a widget shows on screen now, as text, trailing spaces dropped."""
    return ["".join(segment.text for segment in widget.render_line(y)).rstrip() for y in range(widget.size.height)]
