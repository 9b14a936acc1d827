"""A fan-out's boundary and its count-down are transactions: an engine SIGKILLed anywhere in a fanned-out run
loses no item, makes no sub-item twice, and sends no call again that a person was not told might run twice."""

from __future__ import annotations

import signal
from collections import Counter
from pathlib import Path

import pytest
from fanouts import fan_job
from test_pipeline_crash import KillAt, run, until_done

from runner import export
from runner.sim import Simulator
from runner.store import Store

#: The kill lands at the first call (the fan-out stage's) or at one of the sub-items' two, before or after its answer.
KILLS = [(call, mode) for call in (1, 2, 3) for mode in ("before answer", "after answer")]
PARENTS = [f"p{i:03d}" for i in range(4)]


@pytest.mark.slow
@pytest.mark.parametrize("call, mode", KILLS, ids=[f"call {c} {m}" for c, m in KILLS])
def test_a_kill_in_a_fanned_out_run_loses_nothing_and_makes_no_sub_item_twice(
    tmp_path: Path, call: int, mode: str
) -> None:
    killer = KillAt(call, mode)
    confirmed: Counter[str] = Counter()
    with Simulator(latency=0.01, on_request=killer).start() as sim:
        fan_job(tmp_path, sim.base_url, count=4, chunks=2)
        assert run(tmp_path, "run", "fan.toml", killer=killer) == -signal.SIGKILL
        until_done(tmp_path, "fan", confirmed)
        calls = sim.ledger.snapshot()["calls"]
    with Store(tmp_path / "runs.db") as store:
        rows = {row["key"]: row for row in export.rows(store, "fan")}
    assert sorted(rows) == sorted([*PARENTS, *(f"{p}/{n}" for p in PARENTS for n in range(2))])
    assert {row["state"] for row in rows.values()} == {"completed"}
    assert all(len(rows[p]["gather"]["results"]) == 2 for p in PARENTS)
    sent = Counter(key for c in calls for key in c["ids"])
    assert all(n <= 1 + confirmed[key] for key, n in sent.items()), (sent, confirmed)
