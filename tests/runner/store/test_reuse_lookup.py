"""The store's lookup of reused work (``[cache] reuse``): one read of a partial index per item, at any size."""

from __future__ import annotations

from pathlib import Path

from runner.store import Store
from runner.store.reusing import FOUND


def test_a_work_is_looked_up_by_a_read_of_its_indexes_not_a_scan(tmp_path: Path) -> None:  # SQLite's own plans
    with Store(tmp_path / "runs.db") as store:
        plan = " | ".join(row["detail"] for row in store.rows(f"EXPLAIN QUERY PLAN {FOUND}", {"work": "w"}))
    assert "USING INDEX items_by_work (work=?)" in plan
    assert "USING INDEX results_by_work (work=?)" in plan
    assert "SCAN" not in plan.replace("SCAN CONSTANT ROW", "")
