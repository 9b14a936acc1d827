"""The store's runtime SQL keeps to a subset PostgreSQL takes too (issue 20, docs/plans/postgres.md §1).

Every SQL text in ``runner/store/`` but the schema and its migrations (string literals, and the literal
parts of f-strings, a formatted value read as ``{}``) is read for the SQLite idioms PostgreSQL refuses
(``portable.IDIOMS``). The ``store`` fixture reads every statement a contract test made the store execute too.
"""

from __future__ import annotations

import ast
import re
import sqlite3
from pathlib import Path

import pytest
from portable import refused_idioms

import runner.store
from runner.errors import StoreError
from runner.store import Store

STORE = Path(runner.store.__file__).parent

#: The schema's DDL and its migrations: rewritten for PostgreSQL as a whole, not read here.
NOT_RUNTIME = re.compile(r"schema.*\.py|migrations.*\.py")


def texts(module: Path) -> list[tuple[int, str]]:
    """The string literals of ``module`` (an f-string's formatted values read as ``{}``), with their lines."""
    found = []
    nodes = list(ast.walk(ast.parse(module.read_text(encoding="utf-8"))))
    parts_of_fstrings = {id(part) for node in nodes if isinstance(node, ast.JoinedStr) for part in node.values}
    for node in nodes:
        if isinstance(node, ast.JoinedStr):
            parts = [part.value if isinstance(part, ast.Constant) else "{}" for part in node.values]
            found.append((node.lineno, "".join(str(part) for part in parts)))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in parts_of_fstrings:
            found.append((node.lineno, node.value))
    return found


def test_the_stores_runtime_sql_keeps_to_the_portable_subset() -> None:
    modules = sorted(path for path in STORE.glob("*.py") if not NOT_RUNTIME.fullmatch(path.name))
    assert len(modules) > 20
    offences = sorted({f"{module.name}:{line}: {idiom}" for module in modules for line, text in texts(module)
                       for idiom in refused_idioms(text)})
    assert offences == []


@pytest.mark.parametrize(("refused", "portable"), [
    ("items.error_kind IS 'cancelled'", "items.error_kind IS NOT DISTINCT FROM 'cancelled'"),
    ("error_kind IS NOT 'cancelled'", "error_kind IS DISTINCT FROM 'cancelled'"),
    ("error_kind IS ? AND seq = ?", "error_kind IS NOT DISTINCT FROM ? AND seq = ?"),
    ("json_extract(job, '$.b') IS json_extract(excluded.job, '$.b')", "output IS NOT NULL"),
    ("(:stage IS NULL OR stage = :stage)", "(CAST(:stage AS TEXT) IS NULL OR stage = :stage)"),
    ("id = :id AND :stage IS NOT NULL", "id = :id AND CAST(:stage AS TEXT) IS NOT NULL"),
    ("(? IS NULL OR state = ?)", "(CAST(? AS TEXT) IS NULL OR state = ?)"),
    ("LEFT JOIN results ON :staged AND results.id = items.id", "ON CAST(:staged AS INTEGER) = 1 AND x = y"),
    ("CASE WHEN :staged THEN 1 END", "CASE WHEN :n > 0 THEN 1 END"),
    ("OR NOT :staged AND state = 'completed'", "OR NOT CAST(:staged AS INTEGER) = 1 AND x = y"),
    ("count(*) = sum(error_kind IS 'x')", "count(*) = count(*) FILTER (WHERE error_kind = 'x')"),
    ("sum(state = 'failed')", "sum(CASE WHEN state = 'failed' THEN n END)"),
    ("refused + (id IN (SELECT value FROM json_each(:r)))", "refused + CASE WHEN id IN (SELECT 1) THEN 1 ELSE 0 END"),
    ("quiet_until = max(quiet_until, ?)", "SELECT max(id) FROM items"),
    ("(NULL IS NULL OR stage = NULL)", "(CAST(NULL AS TEXT) IS NULL OR stage = NULL)"),
    ("AND ('failed' IS NULL OR state = 'failed')", "AND output IS NOT NULL)"),
    ("LEFT JOIN results ON 1 AND results.id = items.id", "ON (CAST(1 AS INTEGER) = 1) AND x = y"),
    ("CASE WHEN 0 THEN 'a' END", "CASE approve WHEN 1 THEN 'approval' ELSE 'rejection' END"),
    ("SELECT 'x' FROM t WHERE a IS 'y'", "SELECT 'a IS b, sum(a = b), max(a, b), ON 1 AND' FROM t"),
])
def test_each_idiom_postgresql_refuses_is_caught_and_its_portable_form_is_not(refused: str, portable: str) -> None:
    assert refused_idioms(refused)
    assert refused_idioms(portable) == []


def test_a_python_whose_sqlite_is_older_than_the_portable_sql_needs_is_refused_in_one_line_and_makes_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite3, "sqlite_version_info", (3, 37, 2))
    monkeypatch.setattr(sqlite3, "sqlite_version", "3.37.2")
    with pytest.raises(StoreError) as refused:
        Store(tmp_path / "runs.db")
    assert str(refused.value) == (f"{tmp_path / 'runs.db'}: this Python's SQLite is 3.37.2; the run store needs 3.39.0 "
                                  "or newer (a Python built with a newer SQLite)")
    assert not (tmp_path / "runs.db").exists()
