"""``runner copy`` (issue 20): a run copied whole between run stores, SQLite and PostgreSQL either way, continued on
the copy, and refused in one line, nothing written, where it must be."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from fanouts import fan_job
from postgres_server import fresh_schema
from scenes import (
    TABLES, charges_kept, charges_of_items, counts_kept, counts_of_items, dump, event_writes_fail, live_engine, paid_kept,
    paid_of_items,
    passes_kept, passes_of_results, run_rows, states_of_items, states_told_by_events, v4_store,
)
from support import PATIENCE, ROOT, make_job, posts, runner_cli, write_jsonl
from test_pipeline_crash import KillAt, run

from runner import archiving, copying, deciding, recovery, runs
from runner.errors import StoreError
from runner.location import shown
from runner.sim import Simulator
from runner.store import Store, views
from runner.store.copying import COPIED, LEFT

#: A time after every row the tests write.
LATER = 2e9


async def made(db: Path, folder: Path, sim: Simulator) -> None:
    """Two runs made by real runs over the simulator: ``fan`` (a fan-out, its join, a person's review: one post
    decided, two waiting) and ``test`` (one call billed and its answer lost, then its items archived)."""
    with Store(db) as store:
        assert (await runs.execute(store, fan_job(folder, sim.base_url, review=True, after=True))).exit_code == 4
        deciding.decide(store, "fan", ["p000"], approve=True, data={"ok": True}, now=time.time())
        sim.set_faults({"rules": [{"fault": "billed_then_dropped", "times": 1}]})
        job = make_job(folder, sim.base_url, posts(5), max_items=2, concurrency=1)
        assert (await runs.execute(store, job)).exit_code == 0
        sim.set_faults({"rules": []})
        archiving.archive(store, "test", ages={"completed": "1m"}, now=time.time() + 3600)


def seen(location: str | Path) -> dict[str, tuple[dict[str, list[str]], dict[str, object]]]:
    """Each run of the store: its rows (ids as places) and its status."""
    with Store(location, read_only=True) as store:
        return {name: (run_rows(store, name), views.status(store, name, now=LATER)) for name in store.run_names()}


def kept(location: str | Path) -> list[bool]:
    """Whether each invariant the store's contract suite checks holds: events, counts, passes, paid, charges."""
    with Store(location, read_only=True) as store:
        return [states_told_by_events(store) == states_of_items(store), counts_kept(store) == counts_of_items(store),
                passes_kept(store) == passes_of_results(store), paid_kept(store) == paid_of_items(store),
                charges_kept(store) == charges_of_items(store)]


def copied(source: str | Path, destination: str | Path, name: str | None = None) -> list[str]:
    """The runs copied, two rows at a time (so every table is read in several chunks)."""
    return [run.run for run in copying.copy_runs(source, destination, name=name, clock=time.time, chunk_rows=2)]


def test_every_table_of_a_store_is_copied_or_left_as_an_engines() -> None:
    assert sorted([*COPIED, *LEFT]) == sorted(TABLES)


async def test_a_run_copied_to_postgresql_and_back_keeps_every_row_and_its_status(
    tmp_path: Path, sim: Simulator, pg_server: str
) -> None:
    await made(tmp_path / "runs.db", tmp_path, sim)
    before = seen(tmp_path / "runs.db")
    with fresh_schema(pg_server) as url:  # "test" first: "fan" goes after its ids, each way
        assert copied(tmp_path / "runs.db", url, "test") + copied(tmp_path / "runs.db", url, "fan") == ["test", "fan"]
        on_server, kept_there = seen(url), kept(url)
        assert copied(url, tmp_path / "back.db", "test") + copied(url, tmp_path / "back.db", "fan") == ["test", "fan"]
    assert on_server == before
    assert seen(tmp_path / "back.db") == before
    assert seen(tmp_path / "runs.db") == before
    assert kept_there == kept(tmp_path / "back.db") == [True] * 5


async def test_a_run_copied_beside_other_runs_is_numbered_after_them_and_each_keeps_its_own_rows(
    tmp_path: Path, sim: Simulator
) -> None:
    await made(tmp_path / "runs.db", tmp_path, sim)
    with Store(tmp_path / "other.db") as other:
        await runs.execute(other, make_job(tmp_path, sim.base_url, posts(7), name="other", max_items=3))
    kept = seen(tmp_path / "other.db")
    assert copied(tmp_path / "runs.db", tmp_path / "other.db") == ["fan", "test"]
    assert seen(tmp_path / "other.db") == {**kept, **seen(tmp_path / "runs.db")}


async def test_a_copied_run_goes_on_from_where_it_stood_and_no_item_is_called_again(
    tmp_path: Path, sim: Simulator
) -> None:
    await made(tmp_path / "runs.db", tmp_path, sim)
    copied(tmp_path / "runs.db", tmp_path / "copy.db", "fan")
    sim.ledger.reset()
    with Store(tmp_path / "copy.db") as store:
        deciding.decide(store, "fan", approve=True, data={"ok": True}, now=time.time())
        outcome = await runs.execute(store, fan_job(tmp_path, sim.base_url, review=True, after=True))
    called = [key for call in sim.ledger.snapshot()["calls"] for key in call["ids"]]
    assert outcome.exit_code == 0 and outcome.status["counts"]["completed"] == 12
    assert sorted(called) == ["p000", "p001", "p002"]  # the last stage of each post: nothing before it again


async def test_a_copy_that_fails_midway_leaves_nothing_of_the_run_in_the_destination(
    tmp_path: Path, sim: Simulator
) -> None:
    await made(tmp_path / "runs.db", tmp_path, sim)
    copied(tmp_path / "runs.db", tmp_path / "copy.db", "test")
    event_writes_fail(tmp_path / "copy.db")  # the items and batches go in, then the first event fails
    before = dump(tmp_path / "copy.db")
    with pytest.raises(StoreError, match="disk I/O error"):
        copied(tmp_path / "runs.db", tmp_path / "copy.db", "fan")
    assert dump(tmp_path / "copy.db") == before


def test_a_copy_into_a_new_file_leaves_that_file_alone_and_ends_with_the_command_that_goes_on_with_its_run(
    tmp_path: Path
) -> None:
    with Store(tmp_path / "runs.db") as store:
        runs.prepare(store, make_job(tmp_path, "http://127.0.0.1:9/v1", posts(3)), now=1.0)
    done = runner_cli("copy", "--from", "runs.db", "--to", "copy.db", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "runner run test --db copy.db"
    assert sorted(path.name for path in tmp_path.iterdir() if path.name.startswith("copy")) == ["copy.db"]


@pytest.mark.slow
def test_a_copy_stopped_by_ctrl_c_says_so_in_one_line_and_leaves_no_new_store_file(tmp_path: Path) -> None:
    with Store(tmp_path / "runs.db") as store:
        runs.prepare(store, make_job(tmp_path, "http://127.0.0.1:9/v1", posts(20_000)), now=1.0)
    cut = subprocess.Popen([sys.executable, "-m", "runner", "copy", "--from", "runs.db", "--to", "copy.db"],
                                cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + PATIENCE
    while not (tmp_path / "copy.db").exists():  # the copy has begun: its store is made
        assert time.monotonic() < deadline and cut.poll() is None, "the copy never made its store"
        threading.Event().wait(0.01)
    cut.send_signal(signal.SIGINT)
    out, err = cut.communicate(timeout=PATIENCE)
    assert (cut.returncode, out, err) == (1, "", "error: stopped by Ctrl-C: 0 runs copied; the one being copied "
                                               "was not (a run is copied whole or not at all)\n")
    assert sorted(path.name for path in tmp_path.iterdir() if path.name.startswith("copy")) == []


@pytest.mark.slow
def test_a_run_of_thousands_of_items_goes_to_postgresql_and_back_whole(tmp_path: Path, pg_server: str) -> None:
    assert runner_cli("demo", "--latency", "0", cwd=tmp_path).returncode == 0
    with fresh_schema(pg_server) as url:
        there = runner_cli("copy", "--from", "runs.db", "--to", url, cwd=tmp_path)
        back = runner_cli("copy", "--from", url, "--to", "back.db", "demo", cwd=tmp_path)
    assert there.stdout.startswith("run 'demo': 2,400 items, ") and back.stdout.startswith("run 'demo': 2,400 items, ")
    assert seen(tmp_path / "back.db") == seen(tmp_path / "runs.db")


def test_items_an_engine_killed_mid_call_left_in_the_source_are_held_in_the_copy_and_not_called_again(
    tmp_path: Path
) -> None:
    killer = KillAt(1, "before answer")
    with Simulator(latency=0.01, on_request=killer).start() as sim:
        write_jsonl(tmp_path / "posts.jsonl", posts(6))
        (tmp_path / "job.toml").write_text(f'name = "mine"\ninput = "posts.jsonl"\n[batch]\nmax_items = 2\n'
                                           f'concurrency = 1\n[provider]\nbase_url = "{sim.base_url}"\n')
        assert run(tmp_path, "run", "job.toml", killer=killer) == -signal.SIGKILL
        sent = [key for call in sim.ledger.snapshot()["calls"] for key in call["ids"]]
        copy = runner_cli("copy", "--from", "runs.db", "--to", "copy.db", cwd=tmp_path)
        sim.ledger.reset()
        assert run(tmp_path, "run", "mine", "--db", "copy.db") == 4
        called = [key for call in sim.ledger.snapshot()["calls"] for key in call["ids"]]
    with Store(tmp_path / "copy.db", read_only=True) as store:
        held = sorted(item.key for item in recovery.held(store, "mine"))
    assert copy.returncode == 0, copy.stderr
    assert held == sorted(sent) and len(held) == 2
    assert sorted(called) == sorted({f"p{i:03d}" for i in range(6)} - set(sent))


def refused(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    """``runner copy`` with ``args``: its exit code, output and error."""
    result = runner_cli("copy", *args, cwd=tmp_path)
    return result.returncode, result.stdout, result.stderr


async def test_a_run_a_live_engine_works_is_refused_and_nothing_is_written(tmp_path: Path, sim: Simulator) -> None:
    await made(tmp_path / "runs.db", tmp_path, sim)
    with Store(tmp_path / "runs.db") as store:
        live_engine(store, "fan", "alive", started_at=time.time(), heartbeat_at=time.time())
    source = dump(tmp_path / "runs.db")
    code, out, err = refused(tmp_path, "--from", "runs.db", "--to", "copy.db")
    assert (code, out, err.count("\n")) == (1, "", 1)
    assert err.startswith(f"error: run 'fan' is being run by an engine (pid {os.getpid()} on {socket.gethostname()}, ")
    assert err.endswith("ago); stop it first, or wait 15s if it died; nothing was copied\n")
    assert not (tmp_path / "copy.db").exists() and dump(tmp_path / "runs.db") == source


async def test_a_run_the_destination_holds_already_is_refused_and_nothing_is_written(
    tmp_path: Path, sim: Simulator
) -> None:
    await made(tmp_path / "runs.db", tmp_path, sim)
    copied(tmp_path / "runs.db", tmp_path / "copy.db", "test")
    before = dump(tmp_path / "copy.db")
    assert refused(tmp_path, "--from", "runs.db", "--to", "copy.db") == (
        1, "", "error: run 'test' is in copy.db already; nothing was copied\n")
    assert dump(tmp_path / "copy.db") == before


async def test_a_run_the_source_does_not_hold_is_refused_naming_those_it_holds(
    tmp_path: Path, sim: Simulator
) -> None:
    await made(tmp_path / "runs.db", tmp_path, sim)
    assert refused(tmp_path, "--from", "runs.db", "--to", "copy.db", "nope") == (
        1, "", "error: no run 'nope' in runs.db: it holds fan, test\n")
    assert not (tmp_path / "copy.db").exists()


def test_the_same_store_on_both_sides_is_refused_however_it_is_spelt(tmp_path: Path, pg_server: str) -> None:
    other_password = pg_server.replace(f":{urlsplit(pg_server).password}@", ":another@")
    assert refused(tmp_path, "--from", "runs.db", "--to", f"{tmp_path}/./runs.db") == (
        1, "", "error: --from and --to name the same store (runs.db); nothing was copied\n")
    assert refused(tmp_path, "--from", pg_server, "--to", other_password)[::2] == (
        1, f"error: --from and --to name the same store ({shown(pg_server)}); nothing was copied\n")


def test_a_missing_source_is_refused_and_no_destination_is_made(tmp_path: Path) -> None:
    assert refused(tmp_path, "--from", "none.db", "--to", "copy.db") == (
        1, "", "error: none.db: no run store here (runner run or runner demo makes one)\n")
    assert sorted(tmp_path.iterdir()) == []


def test_a_source_of_a_schema_this_runner_does_not_read_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    v4_store(tmp_path / "old.db")
    before = dump(tmp_path / "old.db")
    code, out, err = refused(tmp_path, "--from", "old.db", "--to", "copy.db")
    assert (code, out, err.count("\n")) == (1, "", 1) and "old.db is at schema 4" in err
    assert dump(tmp_path / "old.db") == before and not (tmp_path / "copy.db").exists()


async def test_the_password_of_either_store_is_never_printed(tmp_path: Path, sim: Simulator, pg_server: str) -> None:
    await made(tmp_path / "runs.db", tmp_path, sim)
    password = urlsplit(pg_server).password
    assert password
    with fresh_schema(pg_server) as url:
        there = runner_cli("copy", "--from", "runs.db", "--to", url, "fan", cwd=tmp_path)
        back = runner_cli("copy", "--from", url, "--to", "back.db", cwd=tmp_path)
    assert (there.returncode, back.returncode) == (0, 0), there.stderr + back.stderr
    assert there.stdout.startswith(f"run 'fan': 12 items, ") and f"copied from runs.db to {shown(url)}\n" in there.stdout
    assert [password in text for text in (there.stdout, there.stderr, back.stdout, back.stderr)] == [False] * 4
