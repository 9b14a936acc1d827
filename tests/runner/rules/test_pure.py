"""The rules are pure: neither they nor what they import reach a store, HTTP, an event loop or a clock."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import runner

ROOT = Path(runner.__file__).parent
IMPURE = {"runner.store", "runner.clock", "runner.busy", "httpx", "sqlite3", "sqlite_utils", "asyncio", "time",
          "datetime", "random"}


def module_file(name: str) -> Path | None:
    """The source of a ``runner`` module, None for any other."""
    parts = name.split(".")
    if parts[0] != "runner":
        return None
    base = ROOT.joinpath(*parts[1:])
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def imported(path: Path, name: str) -> set[str]:
    """What a module's own statements import (``TYPE_CHECKING`` blocks included), as absolute names.

    ``from m import x`` counts as both ``m`` and ``m.x``: ``x`` may be a module.
    """
    package = (name if path.name == "__init__.py" else name.rpartition(".")[0]).split(".")
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found |= {module} | {f"{module}.{alias.name}" for alias in node.names}
    return found


def reached(name: str) -> set[str]:
    """Every module ``name`` imports, and what those import in turn within runner."""
    seen, todo = set(), [name]
    while todo:
        current = todo.pop()
        path = module_file(current)
        if current in seen or path is None or not path.exists():
            seen.add(current)
            continue
        seen.add(current)
        todo += imported(path, current) - seen
    return seen - {name}


@pytest.mark.parametrize("rule", sorted(f"runner.rules.{p.stem}" for p in (ROOT / "rules").glob("*.py")))
def test_a_rule_reaches_no_store_http_event_loop_or_clock(rule: str) -> None:
    assert reached(rule) & IMPURE == set()


def test_the_engine_is_not_pure_so_the_check_can_fail() -> None:
    assert {"runner.store", "asyncio"} <= reached("runner.engine.loop")
