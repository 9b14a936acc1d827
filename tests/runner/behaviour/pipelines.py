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

def stage(name: str, instructions: str, field: str, value: str, *, more: str = "") -> str:
    """A ``[[stage]]`` table calling model ``m-NAME``, whose result has an ``id`` and ``field`` (its TOML ``value``)."""
    return (f'[[stage]]\nname = "{name}"\n{more}[stage.provider]\nmodel = "m-{name}"\n'
            f'[stage.prompt]\ninstructions = "{instructions}"\n'
            f'[stage.output.schema]\ntype = "object"\nrequired = ["id", "{field}"]\nproperties.id.type = "string"\n'
            f"properties.{field}.{value}\n")


CLASSIFY = stage("classify", "Classify each post.", "label", 'enum = ["bug", "complaint", "praise"]')
#: Bugs and complaints alone, told the label classify gave them.
EXTRACT = stage("extract", "Extract the app version.", "version", 'type = "string"', more=(
    'when = { field = "classify.label", in = ["bug", "complaint"] }\n'
)).replace("[stage.output", 'fields = ["body", "classify.label"]\n[stage.output')

#: A person's review: no call.
REVIEW = '[[stage]]\nname = "review"\nkind = "decide"\n'


def pipeline(
    tmp_path: Path, base_url: str, *, count: int = 12, stages: str = "classify extract summarize",
    summarize: str = "Summarize each post.", max_items: int = 4, summarize_kind: str = "openai-chat",
) -> Job:
    """A job of ``stages`` over ``count`` posts, each stage batched ``max_items`` at a time."""
    write_jsonl(tmp_path / "posts.jsonl", posts(count))
    tables = {"classify": CLASSIFY, "extract": EXTRACT, "review": REVIEW,
              "summarize": stage("summarize", summarize, "summary", 'type = "string"',
                                 more=f'kind = "{summarize_kind}"\n')}
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
