"""A two- or three-stage job against the simulator, for the tests of stages.

Each stage calls a model of its own (``m-classify``, ...), so that the simulator's ledger tells which stage
each call was for (``calls_by_stage``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support import posts, write_jsonl

from runner import jobs
from runner.jobs import Job

CLASSIFY = """
[[stage]]
name = "classify"
[stage.provider]
model = "m-classify"
[stage.prompt]
instructions = "Classify each post."
[stage.output.schema]
type = "object"
required = ["id", "label"]
properties.id.type = "string"
properties.label.enum = ["bug", "complaint", "praise"]
"""

EXTRACT = """
[[stage]]
name = "extract"
when = { field = "classify.label", in = ["bug", "complaint"] }
[stage.provider]
model = "m-extract"
[stage.prompt]
instructions = "Extract the app version."
fields = ["body", "classify.label"]
[stage.output.schema]
type = "object"
required = ["id", "version"]
properties.id.type = "string"
properties.version.type = "string"
"""

SUMMARIZE = """
[[stage]]
name = "summarize"
[stage.provider]
model = "m-summarize"
[stage.prompt]
instructions = "{instructions}"
[stage.output.schema]
type = "object"
required = ["id", "summary"]
properties.id.type = "string"
properties.summary.type = "string"
"""


def pipeline(
    tmp_path: Path, base_url: str, *, count: int = 12, stages: str = "classify extract summarize",
    summarize: str = "Summarize each post.", max_items: int = 4,
) -> Job:
    """A job of ``stages`` over ``count`` posts, each stage batched ``max_items`` at a time."""
    write_jsonl(tmp_path / "posts.jsonl", posts(count))
    tables = {"classify": CLASSIFY, "extract": EXTRACT, "summarize": SUMMARIZE.format(instructions=summarize)}
    text = (
        'name = "triage"\ninput = "posts.jsonl"\nkey = "id"\n'
        f'[batch]\nmax_items = {max_items}\nconcurrency = 2\n'
        f'[provider]\nbase_url = "{base_url}"\nmodel = "sim"\ntimeout = 30.0\n'
        + "".join(tables[name] for name in stages.split())
    )
    (tmp_path / "pipeline.toml").write_text(text, encoding="utf-8")
    return jobs.load(tmp_path / "pipeline.toml")


def calls_by_stage(calls: list[dict[str, Any]]) -> dict[str, list[str]]:
    """The keys sent per stage, in order, from the simulator's ledger of calls."""
    sent: dict[str, list[str]] = {}
    for call in calls:
        sent.setdefault(call["model"].removeprefix("m-"), []).extend(call["ids"])
    return {stage: sorted(keys) for stage, keys in sent.items()}
