import json
from pathlib import Path
from fanouts import fan_job
from scenes import *
from runner import runs
from runner.sim import Simulator
from runner.store import Store


async def test_try(tmp_path: Path, sim: Simulator, store: Store) -> None:
    job = fan_job(tmp_path, sim.base_url, after=True)
    out = await runs.execute(store, job)
    print(out.exit_code, out.status)
    for r in store.rows("select id, key, state, stage, hold, parent_id, sub_items_left, output from items"): print(r)
    print(store.rows("select item_id, stage, result from results where stage='gather'"))
    print(store.rows("select * from events where item_id = 1"))
    assert 0
