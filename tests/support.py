"""Helpers for the tests: a controllable clock, small inputs, jobs against the simulator."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from runner import runs
from runner.store import schema
from runner.engine import Outcome
from runner.inputs import InputSpec
from runner.jobs import BatchLimits, Job, ProviderConfig, RetryLimits
from runner.providers.handler import PythonHandler
from runner.sim import Simulator
from runner.store import Store

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_data"


class StepClock:
    """A clock that tests control: sleeping moves time forward at once."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.time = start

    def now(self) -> float:
        return self.time

    async def sleep(self, seconds: float) -> None:
        self.time += seconds
        await asyncio.sleep(0)


def runner_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The ``runner`` command as a user runs it, in a process of its own, from this checkout."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "runner", *args], cwd=cwd, env=env, capture_output=True, text=True)


def posts(count: int, *, groups: int = 1, body: str = "Something about the product") -> list[dict[str, Any]]:
    """Small deterministic posts: ``p000``, ``p001``... spread over ``groups`` months."""
    return [
        {"id": f"p{i:03d}", "month": f"2026-{i % groups + 1:02d}", "body": f"{body} #{i}"}
        for i in range(count)
    ]


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def make_job(
    tmp_path: Path,
    base_url: str,
    records: list[dict[str, Any]],
    *,
    name: str = "test",
    max_items: int = 25,
    max_chars: int = 20_000,
    concurrency: int = 2,
    max_attempts: int = 3,
    request_retries: int = 2,
    timeout: float = 30.0,
    schema: dict[str, Any] | None = None,
    **fields: Any,
) -> Job:
    """A job over ``records`` (written as JSONL) against the simulator."""
    source = write_jsonl(tmp_path / f"{name}.jsonl", records)
    return Job(
        name=name,
        input=InputSpec(source, "jsonl"),
        group="month",
        batch=BatchLimits(max_items=max_items, max_chars=max_chars, concurrency=concurrency),
        provider=ProviderConfig(base_url=base_url, model="sim-model", timeout=timeout),
        retry=RetryLimits(backoff=1.0, max_attempts=max_attempts, request_retries=request_retries),
        output_schema=schema,
        **fields,
    )


async def label_all_but_p001(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A user's Python handler: every item labelled but ``p001``, whose result has no label."""
    return [{"id": item["id"], **({} if item["id"] == "p001" else {"label": "question"})} for item in items]


async def python_run(store: Store, tmp_path: Path) -> Outcome:
    """The run ``test`` of four posts defined with the handler ``label_all_but_p001``: p001 failed, the rest completed."""
    job = make_job(tmp_path, "http://127.0.0.1:9/v1", posts(4), max_attempts=1, schema={"required": ["label"]})
    return await runs.execute(store, job, provider=PythonHandler(label_all_but_p001))


def states_told_by_events(store: Store) -> dict[tuple[int, str], int]:
    """Items per run and state as the events tell it: every move into a state, less every move out of it."""
    return {(r["run_id"], r["state"]): r["n"] for r in store.rows(
        "SELECT run_id, state, sum(n) AS n FROM ("
        "SELECT run_id, to_state AS state, items AS n FROM events "
        "UNION ALL SELECT run_id, from_state, -items FROM events WHERE from_state IS NOT NULL"
        ") GROUP BY run_id, state HAVING sum(n) != 0"
    )}


def states_of_items(store: Store) -> dict[tuple[int, str], int]:
    """Items per run and state as the items table holds them."""
    return {(r["run_id"], r["state"]): r["n"] for r in store.rows(
        "SELECT run_id, state, count(*) AS n FROM items GROUP BY run_id, state"
    )}


def counts_kept(store: Store) -> dict[tuple[int, str, str], int]:
    """Items per run, group and state as the ``counts`` table keeps them."""
    return {(r["run_id"], r["grp"], r["state"]): r["n"] for r in store.rows(
        "SELECT run_id, grp, state, n FROM counts WHERE n != 0"
    )}


def counts_of_items(store: Store) -> dict[tuple[int, str, str], int]:
    """Items per run, group and state, counted from the items table."""
    return {(r["run_id"], r["grp"], r["state"]): r["n"] for r in store.rows(
        "SELECT run_id, grp, state, count(*) AS n FROM items GROUP BY run_id, grp, state"
    )}


def v4_store(path: Path) -> None:
    """A store as runner wrote it at schema 4: one event per item and change, a batch left running."""
    conn = sqlite3.connect(path, isolation_level=None)
    for statements in schema.MIGRATIONS[:4]:
        for statement in statements:
            conn.execute(statement)
    conn.execute("PRAGMA user_version = 4")
    conn.execute("INSERT INTO runs (name, job, created_at, updated_at) VALUES ('old', '{}', 1, 1)")
    conn.executemany(
        "INSERT INTO items (run_id, key, grp, seq, input, chars, fingerprint, updated_at) VALUES (1, ?, 'g', ?, ?, 12, ?, 1)",
        [(f"k{i}", i, f'{{"id":"k{i}"}}', f"f{i}") for i in range(3)],
    )
    conn.execute("INSERT INTO batches (run_id, grp, state, size, chars, created_at, intent_at) VALUES (1, 'g', 'running', 3, 6, 2, 2)")
    for state, at in (("queued", 2), ("running", 3)):
        conn.execute("UPDATE items SET state = ?, batch_id = 1, updated_at = ?", (state, at))
    conn.execute("UPDATE items SET state = 'received', updated_at = 4 WHERE key != 'k2'")
    conn.execute("UPDATE items SET state = 'completed', updated_at = 5 WHERE key != 'k2'")
    conn.close()


async def run_under_fault(
    sim: Simulator, store: Store, tmp_path: Path, clock: StepClock, rule: dict[str, Any], count: int, **limits: Any
) -> Outcome:
    """Run ``count`` posts, the job's ``limits`` as given, against ``sim`` misbehaving by the one fault ``rule``."""
    sim.set_faults({"rules": [rule]})
    return await runs.execute(store, make_job(tmp_path, sim.base_url, posts(count), **limits), clock=clock)
