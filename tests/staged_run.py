"""A pipeline's run store for the tests of the TUI and the panel: three stages over twelve posts on the simulator, one
item failed at a stage past the first (its first stage's answer valid, every later one invalid)."""

from __future__ import annotations

from pathlib import Path

from support import posts, write_jsonl

from runner import jobs, runs
from runner.sim import Simulator
from runner.store import Store

#: The item that fails past its first stage.
FAILS = "p001"
#: Its first request answers valid (fenced JSON is read), every later one leaves its result empty.
PLAN = {"rules": [{"fault": "fenced", "keys": [FAILS], "times": 1}, {"fault": "invalid_items", "keys": [FAILS]}]}


def stage(name: str, field: str, schema: str, more: str = "") -> str:
    return (f'[[stage]]\nname = "{name}"\n{more}[stage.prompt]\ninstructions = "{name} each post."\n'
            f'[stage.output.schema]\ntype = "object"\nrequired = ["id", "{field}"]\nproperties.id.type = "string"\n'
            f"properties.{field}.{schema}\n")


def job_text(base_url: str) -> str:
    return (
        f'name = "triage"\ninput = "posts.jsonl"\nkey = "id"\ngroup = "month"\n[batch]\nmax_items = 4\n'
        f'[provider]\nbase_url = "{base_url}"\nmodel = "sim"\n[retry]\nmax_attempts = 2\n'
        + stage("classify", "label", 'enum = ["bug", "praise"]')
        + stage("extract", "version", 'type = "string"', 'when = { field = "classify.label", in = ["bug"] }\n')
        + stage("summarize", "summary", 'type = "string"')
    )


async def build(folder: Path) -> Path:
    """The pipeline run ``triage`` in ``folder/runs.db``, ended: every item completed but :data:`FAILS`."""
    write_jsonl(folder / "posts.jsonl", posts(12, groups=2))
    with Simulator(faults=PLAN).start() as sim, Store(folder / "runs.db") as store:
        (folder / "pipeline.toml").write_text(job_text(sim.base_url), encoding="utf-8")
        await runs.execute(store, jobs.load(folder / "pipeline.toml"))
    return folder / "runs.db"
