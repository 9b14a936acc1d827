"""The README's job reference and ``runner/jobs.py``'s docstring show the same keys, and the README's is a job file
runner reads (an unknown key would be refused)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from runner import jobs

README = Path(__file__).resolve().parents[2] / "README.md"


def key_paths(table: dict[str, Any], prefix: str = "") -> set[str]:
    """Every key of a TOML table, as dotted paths (a JSON Schema's keys are the schema's, not the job's)."""
    paths = set()
    for key, value in table.items():
        if isinstance(value, dict) and key != "schema":
            paths |= key_paths(value, f"{prefix}{key}.")
        else:
            paths.add(f"{prefix}{key}")
    return paths


def readme_reference() -> str:
    text = README.read_text(encoding="utf-8")
    found = re.search(r"```toml\n(.*?)```", text[text.index("## Running your own job"):], re.S)
    assert found is not None
    return found[1]


def test_every_key_the_job_docstring_shows_is_in_the_readme_and_every_readme_key_is_one_runner_reads(
    tmp_path: Path,
) -> None:
    assert jobs.__doc__ is not None
    docstring = "\n".join(line[4:] for line in jobs.__doc__.splitlines() if line.startswith("    "))
    shown = key_paths(tomllib.loads(docstring)) - {"stage"}  # a pipeline's stages: the README's own section
    (tmp_path / "job.toml").write_text(readme_reference(), encoding="utf-8")
    assert shown - key_paths(tomllib.loads(readme_reference())) == set()
    assert jobs.load(tmp_path / "job.toml").schedule.field == "send_at"
