"""The layers of the code: SQL lives in the store, item state has one writer, the core imports no UI."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
SQL = re.compile(r"\b(SELECT\s.{0,200}?\sFROM|UPDATE\s+\w+\s+SET|INSERT\s+INTO|DELETE\s+FROM)\b", re.IGNORECASE | re.DOTALL)


def sources(*folders: str) -> dict[str, str]:
    return {str(path.relative_to(ROOT)): path.read_text() for folder in folders
            for path in sorted((ROOT / folder).rglob("*.py"))}


def test_no_sql_in_the_core_outside_the_store() -> None:
    outside = {path for path, text in sources("runner", "tui").items()
               if SQL.search(text) and not path.startswith("runner/store/")}
    assert outside == set()


def test_items_are_written_by_the_store_s_one_writer_alone() -> None:
    writing = {path for path, text in sources("runner", "tui").items() if re.search(r"UPDATE\s+items\b", text)}
    # The migrations rewrite old columns as new ones (PostgreSQL's baseline holds their triggers); they change no
    # item's state.
    migrating = {path for path in writing if path.startswith(("runner/store/migrations", "runner/store/schema_postgres"))}
    assert writing - migrating == {"runner/store/items.py"}
    for path in migrating:
        migrations = sources("runner/store")[path]
        assert not [clause for clause in re.findall(r"UPDATE items SET (.*?) WHERE", migrations) if "state =" in clause]


def test_no_module_of_the_core_is_over_400_lines() -> None:
    long = {path: text.count("\n") for path, text in sources("runner", "tui").items() if text.count("\n") > 400}
    assert long == {}


def test_no_test_writes_sql_outside_the_store_s_contract_suite() -> None:
    outside = {path for path, text in sources("tests").items()
               if SQL.search(text) and not path.startswith("tests/runner/store/")}
    outside.discard("tests/runner/test_layers.py")  # this file: it spells the SQL it looks for
    assert outside == set()
