"""Helpers for the tests: a controllable clock, small inputs, jobs against the simulator."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from runner import item_rows, runs
from runner.engine import Outcome
from runner.inputs import InputSpec
from runner.item_rows import ItemRow
from runner.jobs import BatchLimits, Job, ProviderConfig, RetryLimits
from runner.providers.handler import PythonHandler
from runner.sim import Simulator
from runner.store import Store, views
from runner.store.additions import Preparing
from runner.store.answers import Standing
from runner.store.protocol import RunStore

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_data"
#: Seconds a test waits for what it expects (a process, a state in the store) before it fails.
PATIENCE = 60.0


def add_all(store: RunStore, job: Job, rows: Iterable[ItemRow] | None = None, *, now: float) -> int:
    """The run ``job.name`` made or continued with ``rows`` (the job's own, by default) in one transaction, as the
    last chunk of a prepare adds them (``Store.add_items``, with no lease), its input file as it is now; its id."""
    preparing = Preparing()
    store.add_items(job, item_rows.items(job) if rows is None else rows, preparing, now=now, last=True,
                    source=job.input.fingerprint())
    return preparing.run_id


class StepClock:
    """A clock that tests control: sleeping moves time forward at once."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.time = start

    def now(self) -> float:
        return self.time

    async def sleep(self, seconds: float) -> None:
        self.time += seconds
        await asyncio.sleep(0)


class Paced(StepClock):
    """A clock engines in one loop share, twice as fast as the wall's: a sleep moves it on at once and gives the
    others' calls half of it in real time, so that none runs far ahead of the others' heartbeats while one call
    is in flight (the others would take it for dead after ``LEASE_SECONDS``)."""

    async def sleep(self, seconds: float) -> None:
        self.time += seconds
        await asyncio.sleep(seconds / 2)


class Requests:
    """The simulator's hook that notes when (by ``clock``) each request arrived, and the items it held."""

    def __init__(self, clock: StepClock) -> None:
        self.clock, self.seen = clock, list[tuple[float, list[str]]]()

    def __call__(self, ids: list[str]) -> None:
        self.seen.append((self.clock.now(), list(ids)))


class LedgerWatch(StepClock):
    """A test clock that notes, each time the engine waits, the time and which keys the simulator has billed."""

    def __init__(self, sim: Simulator, start: float) -> None:
        super().__init__(start)
        self.sim = sim
        self.seen: list[tuple[float, set[str]]] = []

    async def sleep(self, seconds: float) -> None:
        self.seen.append((self.time, set(self.sim.ledger.snapshot()["billed"])))
        await super().sleep(seconds)


class SharedClock(StepClock):
    """The engine's waits move the simulator's clock too, so a 24 h batch window passes at once."""

    def __init__(self, sim: Simulator) -> None:
        super().__init__()
        self.sim = sim

    async def sleep(self, seconds: float) -> None:
        self.sim.advance(seconds)
        await super().sleep(seconds)


def runner_cli(
    *args: str, cwd: Path, stdin: int = subprocess.DEVNULL, columns: int | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """The ``runner`` command as a script runs it (no terminal unless ``stdin`` is one), in a process of its own.

    ``columns`` is the width of the terminal it prints for (COLUMNS), as rich and click read it; ``env``, more
    variables of its environment (PYTHONPATH: folders before the checkout's).
    """
    more = dict(env or {})
    path = os.pathsep.join([*filter(None, [more.pop("PYTHONPATH", "")]), str(ROOT)])
    env = {**os.environ, **more, "PYTHONPATH": path, **({"COLUMNS": str(columns)} if columns else {})}
    return subprocess.run([sys.executable, "-m", "runner", *args], cwd=cwd, env=env, stdin=stdin,
                          capture_output=True, text=True)


def posts(count: int, *, groups: int = 1, body: str = "Something about the product") -> list[dict[str, Any]]:
    """Small deterministic posts: ``p000``, ``p001``... spread over ``groups`` months."""
    return [
        {"id": f"p{i:03d}", "month": f"2026-{i % groups + 1:02d}", "body": f"{body} #{i}"}
        for i in range(count)
    ]


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


#: The stage tables :func:`reviewed` puts together: a classify call, a person's review, a summarize call.
REVIEW_STAGES = {
    "classify": '[[stage]]\nname = "classify"\n[stage.output.schema]\nrequired = ["id", "label"]\n'
                'properties.label.enum = ["bug", "praise"]\n',
    "review": '[[stage]]\nname = "review"\nkind = "decide"\n',
    "summarize": '[[stage]]\nname = "summarize"\n',
}


def reviewed(folder: Path, *, stages: str, base_url: str = "http://127.0.0.1:9/v1", count: int = 3) -> Path:
    """A job file ``folder/job.toml`` (run ``reviewed``) of ``stages`` (of :data:`REVIEW_STAGES`) over ``count`` posts."""
    write_jsonl(folder / "posts.jsonl", posts(count))
    text = (f'name = "reviewed"\ninput = "posts.jsonl"\nkey = "id"\n[provider]\nbase_url = "{base_url}"\n'
            + "".join(REVIEW_STAGES[name] for name in stages.split()))
    (folder / "job.toml").write_text(text, encoding="utf-8")
    return folder / "job.toml"


def batch_job(tmp_path: Path, sim: Simulator, records: list[dict[str, Any]], **limits: Any) -> Job:
    """A job of kind ``openai-batch`` over ``records`` against the simulator (as :func:`make_job`)."""
    job = make_job(tmp_path, sim.base_url, records, **limits)
    return dataclasses.replace(job, provider=dataclasses.replace(job.provider, kind="openai-batch"))


def anthropic_job(tmp_path: Path, sim: Simulator, records: list[dict[str, Any]], *, kind: str = "anthropic-messages",
                  **limits: Any) -> Job:
    """A job of an Anthropic ``kind`` over ``records`` against the simulator, its base URL the host (as the SDK's)."""
    job = make_job(tmp_path, sim.base_url.removesuffix("/v1"), records, **limits)
    return dataclasses.replace(job, provider=dataclasses.replace(job.provider, kind=kind))


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


def commands_given(store: Store, *, run: str = "test") -> list[str]:
    """The commands people gave ``run`` (pause, resume, step, retry, confirm), oldest first."""
    return [row["command"] for row in reversed(views.command_tail(store, store.run_id(run), limit=1_000))]


def events_into(store: Store, state: str, *, run: str = "test") -> list[dict[str, Any]]:
    """The events of ``run`` that moved items into ``state``, oldest first."""
    return [event for event in views.history(store, store.run_id(run)) if event["to_state"] == state]


async def run_under_fault(
    sim: Simulator, store: Store, tmp_path: Path, clock: StepClock, rule: dict[str, Any], count: int, **limits: Any
) -> Outcome:
    """Run ``count`` posts, the job's ``limits`` as given, against ``sim`` misbehaving by the one fault ``rule``."""
    sim.set_faults({"rules": [rule]})
    return await runs.execute(store, make_job(tmp_path, sim.base_url, posts(count), **limits), clock=clock)


class KillAtFirstCall:
    """The simulator's hook that crashes an engine: ``runner ARGS`` (:meth:`run`) is SIGKILLed while the
    upstream holds its first call, whose ids are then ``ids``.

    Every call waits until the process's pid is known, so that a call that
    comes before it (the process is quick, the test slow) cannot slip through
    unkilled; calls after the kill pass.
    """

    def __init__(self) -> None:
        self.ids: list[str] = []
        self._pid = 0
        self._known = threading.Event()
        self._first = threading.Lock()

    def __call__(self, ids: list[str]) -> None:
        assert self._known.wait(timeout=PATIENCE), "a call came, and no process to kill was started"
        with self._first:
            if self.ids:
                return
            self.ids = list(ids)
        os.kill(self._pid, signal.SIGKILL)

    def run(self, *args: str, cwd: Path) -> None:
        """``runner ARGS`` in a process of its own, once it has been killed at its first call."""
        process = subprocess.Popen([sys.executable, "-m", "runner", *args], cwd=cwd,
                                   env={**os.environ, "PYTHONPATH": str(ROOT)}, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self._pid = process.pid
        self._known.set()
        _, stderr = process.communicate(timeout=PATIENCE)
        assert process.returncode == -signal.SIGKILL and self.ids, stderr


def until(db: Path | str, name: str, wanted: Callable[[Standing], bool]) -> Standing:
    """Read run ``name`` from the store ``db`` until it stands as ``wanted``; fail after :data:`PATIENCE` seconds."""
    deadline = time.monotonic() + PATIENCE
    while True:
        with Store(db, read_only=True) as store:
            now = views.standing(store, name, now=time.time())
        if wanted(now):
            return now
        assert time.monotonic() < deadline, f"the store never showed run {name!r} as wanted: {now}"
        threading.Event().wait(0.05)  # polling the store: another process moves it
