"""Crash trials over a two-stage job: engines really SIGKILLed at seeded random upstream requests, restarted, held
items confirmed as a person would.

The kills land before the first call, while stage 1's batches are in flight, between the stages (items whose
stage-1 result is committed, pending or formed at stage 2, not started there) and while stage 2's are in flight;
stage 2 calls (``openai-chat``) or submits a Batch API task (``openai-batch``). Checked against the simulator's
ledger and the store: no item is lost, every item ends completed with both stages' results, none is billed more
than once per stage unless a person confirmed a plan that said it might be, and no stage-1 call is made again for
an item whose stage-1 result was saved.
"""

from __future__ import annotations

import random
import signal
from collections import Counter
from pathlib import Path

import pytest
from pipelines import CLASSIFY, stage
from support import posts, write_jsonl
from test_crash_recovery import JOB, Killer, confirm_held, run_engine

from runner import export, recovery
from runner.model import ItemState
from runner.sim import Simulator
from runner.store import Store, views

TRIALS = 16
ITEMS = 20


def job(base_url: str, kind: str) -> str:
    """Classify (a call), then summarize with ``kind``."""
    return JOB.format(kind="openai-chat", base_url=base_url) + CLASSIFY + stage(
        "summarize", "Summarize each post.", "summary", 'type = "string"', more=f'kind = "{kind}"\n')


def at_kill(db: Path) -> tuple[set[tuple[str, str]], set[str]]:
    """What a kill left: the (stage, state) pairs with items, and the keys whose classify result is saved."""
    with Store(db) as store:
        run_id = store.run_id("crash")
        present = {(name, state) for name, counts in views.stage_counts(store, run_id).items()
                   for state, n in counts.items() if n}
        classified = {row["key"] for row in export.rows(store, "crash") if "classify" in row}
    return present, classified


def where(present: set[tuple[str, str]]) -> set[str]:
    """Where a kill landed, by what it left."""
    places = set()
    if ("classify", ItemState.RUNNING) in present:
        places.add("mid-batch at stage 1")
    if present & {("summarize", state) for state in (ItemState.PENDING, ItemState.QUEUED, ItemState.WAITING)}:
        places.add("between the stages")
    if present & {("summarize", ItemState.RUNNING), ("summarize", ItemState.RECEIVED)}:
        places.add("mid-batch at stage 2")
    if present <= {("classify", state) for state in (ItemState.PENDING, ItemState.QUEUED, ItemState.RUNNING)}:
        places.add("at the first calls, nothing answered")
    return places


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["openai-chat", "openai-batch"])
def test_killed_two_stage_engines_never_lose_an_item_nor_pay_twice_unannounced_nor_repeat_a_saved_stage(
    tmp_path: Path, kind: str
) -> None:
    rng = random.Random(20261202)
    landed: Counter[str] = Counter()
    totals: Counter[str] = Counter()
    for trial in range(TRIALS):
        folder = tmp_path / f"trial-{trial}"
        folder.mkdir()
        write_jsonl(folder / "posts.jsonl", posts(ITEMS, groups=4))
        first = trial == 0  # the first trial's first kill lands on the very first call, before its answer
        killer = Killer(rng, span=10 if kind == "openai-chat" else 30, target=1 if first else None,
                        mode="before answer" if first else None)
        confirmed: Counter[str] = Counter()
        #: After each kill: how many calls the ledger had, and the keys whose classify result was saved.
        saved_at: list[tuple[int, set[str]]] = []
        slow = {"seed": trial, "rules": [{"fault": "create_slow", "seconds": 0.3, "rate": 0.5}]}
        with Simulator(latency=0.005, jitter=0.01, seed=trial, batch_seconds=0.05, faults=slow,
                       on_call=killer.on_call).start() as sim:
            (folder / "job.toml").write_text(job(sim.base_url, kind))
            for attempt in range(8):
                code = run_engine(folder, killer, kill=attempt < 2)
                if code == -signal.SIGKILL:
                    present, classified = at_kill(folder / "runs.db")
                    landed.update(where(present))
                    saved_at.append((len(sim.ledger.snapshot()["calls"]), classified))
                    continue
                if code == 0:
                    break
                confirm_held(folder / "runs.db", totals, confirmed)
            ledger = sim.ledger.snapshot()
        billed = ledger["billed"]
        repeated = [key for index, classified in saved_at for call in ledger["calls"][index:]
                    if call["model"] == "m-classify" for key in call["ids"] if key in classified]
        assert code == 0, f"trial {trial} did not finish"
        with Store(folder / "runs.db") as store:
            assert views.status(store, "crash", now=0)["counts"][ItemState.COMPLETED] == ITEMS
            assert all({"classify", "summarize"} <= set(row) for row in export.rows(store, "crash"))
        assert repeated == [], (trial, repeated)
        assert set(billed) == {f"p{i:03d}" for i in range(ITEMS)}
        assert all(2 <= n <= 2 + confirmed[key] for key, n in billed.items()), (trial, billed, confirmed)
        totals["billed more than once a stage, as confirmed"] += sum(n > 2 for n in billed.values())
    print(f"\n{kind} at stage 2: {TRIALS} trials; kills landed: {dict(landed)}; {dict(totals)}")
    assert set(landed) == {"at the first calls, nothing answered", "mid-batch at stage 1", "between the stages",
                           "mid-batch at stage 2"}
