"""The store's runtime SQL keeps to a subset PostgreSQL takes too (issue 20, docs/plans/postgres.md §1).

Every SQL text in ``runner/store/`` but the schema and its migrations (string literals, and the literal
parts of f-strings, a formatted value read as ``{}``) is read for the SQLite idioms PostgreSQL refuses.
JSON functions, placeholders, PRAGMAs and planner hints are the dialect's to translate, so not checked here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import runner.store

STORE = Path(runner.store.__file__).parent

#: The schema's DDL and its migrations: rewritten for PostgreSQL as a whole, not read here.
NOT_RUNTIME = re.compile(r"schema\.py|migrations.*\.py")

#: A parameter: ``:name``, ``?`` or ``?N``.
PARAMETER = r"(?::\w+|\?\d*)"

#: Each idiom PostgreSQL refuses, what it is, and its portable form.
IDIOMS = {
    "IS or IS NOT comparing two values (write IS [NOT] DISTINCT FROM)":
        re.compile(r"\bIS\s+(?:NOT\s+)?(?!NULL\b|NOT\b|DISTINCT\b|TRUE\b|FALSE\b)[\w'.:?(]"),
    "a parameter tested for NULL without a type (write CAST(:p AS TEXT) IS NULL)":
        re.compile(rf"(?<!\w){PARAMETER}\s+IS\s+(?:NOT\s+)?NULL\b"),
    "a parameter standing alone as a condition (compare it to a value)":
        re.compile(rf"\b(?:ON|WHERE|AND|OR|NOT|WHEN)\s+{PARAMETER}\s*(?:\bAND\b|\bOR\b|\bTHEN\b|\)|$)"),
    "a condition summed as a number (write count(*) FILTER (WHERE ...))":
        re.compile(r"\b(?:sum|total|avg)\((?:(?!CASE\b)[^()])*(?:\bIS\b|\bIN\b|[=<>])"),
    "a condition added as a number (write CASE WHEN ... THEN 1 ELSE 0 END)":
        re.compile(r"[-+*/]\s*\((?!\s*SELECT\b)(?:(?!CASE\b)[^()])*(?:\bIS\b|\bIN\b|[=<>])"),
    "min or max of two values (compare them in the statement)":
        re.compile(r"\b(?:min|max)\([^()]*,"),
}


def texts(module: Path) -> list[tuple[int, str]]:
    """The string literals of ``module`` (an f-string's formatted values read as ``{}``), with their lines."""
    found = []
    for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
        if isinstance(node, ast.JoinedStr):
            parts = [part.value if isinstance(part, ast.Constant) else "{}" for part in node.values]
            found.append((node.lineno, "".join(str(part) for part in parts)))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.append((node.lineno, node.value))
    return found


def refused_idioms(text: str) -> list[str]:
    """What in SQL ``text`` PostgreSQL refuses: the idioms' descriptions."""
    return [idiom for idiom, pattern in IDIOMS.items() if pattern.search(text)]


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
])
def test_each_idiom_postgresql_refuses_is_caught_and_its_portable_form_is_not(refused: str, portable: str) -> None:
    assert refused_idioms(refused)
    assert refused_idioms(portable) == []
