"""The engine's writer: writes that wait together share one commit; each is answered once durable."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from runner.errors import StoreError
from runner.store import Store
from runner.writer import Writer


def add_run(store: Store, name: str) -> int:
    with store.write() as conn:
        (run_id,) = conn.execute(
            "INSERT INTO runs (name, job, created_at, updated_at) VALUES (?, '{}', 0, 0) RETURNING id", (name,)
        ).fetchone()
    return int(run_id)


def run_names(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {name for (name,) in conn.execute("SELECT name FROM runs")}


@asynccontextmanager
async def held_writer(path: Path) -> AsyncIterator[tuple[Writer, threading.Event]]:
    """A writer kept inside a first write until the event is set: what is handed over meanwhile waits together."""
    Store(path).close()
    writer = Writer(path)
    busy, release = threading.Event(), threading.Event()

    def hold(store: Store) -> None:
        busy.set()
        release.wait()

    try:
        held = writer(hold)
        await asyncio.to_thread(busy.wait)  # the writer's thread is inside its first commit
        yield writer, release
        release.set()
        await held
    finally:
        release.set()
        writer.close()


async def test_writes_that_wait_together_share_one_commit(tmp_path: Path) -> None:
    async with held_writer(tmp_path / "runs.db") as (writer, release):
        first = writer(add_run, "first")
        # Run by the writer after "first", in the same transaction: "first" is not yet visible outside.
        seen = writer(lambda store: run_names(store.path))
        release.set()
        await first
        assert await seen == set()
    assert run_names(tmp_path / "runs.db") == {"first"}


async def test_a_failing_write_undoes_itself_alone(tmp_path: Path) -> None:
    Store(tmp_path / "runs.db").close()
    writer = Writer(tmp_path / "runs.db")

    def add_then_fail(store: Store) -> None:
        add_run(store, "undone")
        raise ValueError("a bug in this write")

    try:
        failing = writer(add_then_fail)
        kept = writer(add_run, "kept")
        outcomes = await asyncio.gather(failing, kept, return_exceptions=True)
    finally:
        writer.close()
    assert isinstance(outcomes[0], ValueError)
    assert run_names(tmp_path / "runs.db") == {"kept"}


async def test_a_write_is_answered_only_once_committed(tmp_path: Path) -> None:
    later_busy, later_release = threading.Event(), threading.Event()

    def hold_the_commit(store: Store) -> None:
        later_busy.set()
        later_release.wait()

    async with held_writer(tmp_path / "runs.db") as (writer, release):
        durable = writer(add_run, "durable")
        later = writer(hold_the_commit)  # same group, after it: the commit waits for this one
        release.set()
        try:
            # Once this returns, an answer given before the commit would already have arrived.
            await asyncio.to_thread(later_busy.wait)
            assert not durable.done() and run_names(tmp_path / "runs.db") == set()
        finally:
            later_release.set()
        await asyncio.gather(durable, later)
    assert run_names(tmp_path / "runs.db") == {"durable"}


async def test_a_write_that_aborts_the_transaction_fails_its_whole_group(tmp_path: Path) -> None:
    def abort(store: Store) -> None:  # what SQLite does to a transaction on a full disk or an I/O error
        store.conn.execute("ROLLBACK")
        raise sqlite3.OperationalError("disk I/O error (simulated)")

    async with held_writer(tmp_path / "runs.db") as (writer, release):
        group = [writer(add_run, "lost"), writer(abort)]
        release.set()
        outcomes = await asyncio.gather(*group, return_exceptions=True)
    assert all(isinstance(outcome, StoreError) for outcome in outcomes)
    assert "disk I/O error (simulated)" in str(outcomes[1])
    assert run_names(tmp_path / "runs.db") == set()


async def test_after_a_failed_write_no_start_is_written_but_other_writes_are(tmp_path: Path) -> None:
    def fails(store: Store) -> None:
        with store.write() as conn:  # a write the store refuses, as a full disk or a bad row would
            conn.execute("INSERT INTO runs (name) VALUES ('incomplete')")

    async with held_writer(tmp_path / "runs.db") as (writer, release):
        failed = writer(fails)
        start = writer.start(add_run, "started")
        other = writer(add_run, "recorded")
        release.set()
        outcomes = await asyncio.gather(failed, start, other, return_exceptions=True)
    assert isinstance(outcomes[0], StoreError) and outcomes[1] is outcomes[0]
    assert run_names(tmp_path / "runs.db") == {"recorded"}


async def test_a_writer_thread_that_dies_fails_every_write_instead_of_leaving_it_unanswered(tmp_path: Path) -> None:
    Store(tmp_path / "runs.db").close()
    writer = Writer(tmp_path / "runs.db")

    def dies(store: Store) -> None:
        raise SystemExit("not an Exception: nothing in the writer catches it as a failed write")

    try:
        with pytest.raises(StoreError, match="the store's writer stopped"):
            await asyncio.wait_for(writer(dies), timeout=30)
        with pytest.raises(StoreError, match="the store's writer stopped"):
            await asyncio.wait_for(writer(add_run, "later"), timeout=30)
    finally:
        writer.close()
