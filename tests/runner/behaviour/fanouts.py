"""A job that fans each post out into chunks, works each chunk, and joins them, against the simulator.

``split`` answers ``chunks`` (the simulator makes ``minItems`` of them), ``note`` works each sub-item (told
its ``_chunk``), ``gather`` joins them; ``review`` (optional) is a person's decision after the join, ``after``
(optional) goes on past them; ``fan_with_recap`` puts a second stage (``recap``) between the fan-out and its join.
"""

from __future__ import annotations

from pathlib import Path

from pipelines import stage
from support import posts, write_jsonl

from runner import jobs
from runner.jobs import Job


def fan_job(
    tmp_path: Path, base_url: str, *, count: int = 3, chunks: int = 3, join: str = "", split: str = "",
    after: bool = False, review: bool = False, max_attempts: int = 3,
) -> Job:
    """A job over ``count`` posts, each fanned out into ``chunks`` sub-items (``split``, ``join``: more keys)."""
    write_jsonl(tmp_path / "posts.jsonl", posts(count))
    size = f"minItems = {chunks}" if chunks else "maxItems = 0"
    chunked = f'type = "array"\nproperties.chunks.{size}\nproperties.chunks.items.type = "string"\n'
    text = (
        'name = "fan"\ninput = "posts.jsonl"\nkey = "id"\n'
        f'[batch]\nmax_items = 4\nconcurrency = 2\n[retry]\nmax_attempts = {max_attempts}\nbackoff = 0.0\n'
        f'[provider]\nbase_url = "{base_url}"\nmodel = "sim"\ntimeout = 30.0\n'
        + stage("split", "Split each post.", "chunks", chunked, more=f'fan_out = "chunks"\n{split}')
        + stage("note", "Note each chunk.", "note", 'type = "string"').replace(
            "[stage.output", 'fields = ["_chunk"]\n[stage.output')
        + f'[[stage]]\nname = "gather"\nkind = "join"\n{join}'
        + ('[[stage]]\nname = "review"\nkind = "decide"\n' if review else "")
        + (stage("after", "Sum each post up.", "summary", 'type = "string"') if after else "")
    )
    (tmp_path / "fan.toml").write_text(text, encoding="utf-8")
    return jobs.load(tmp_path / "fan.toml")


DEAD = "http://127.0.0.1:9/v1"
RECAP = stage("recap", "Recap each chunk.", "recap", 'type = "string"')


def fan_with_recap(tmp_path: Path, base_url: str, *, dead: str = "", drop: str = "", split: str = "") -> Job:
    """split (fan-out), note, recap, gather (join): stage ``dead`` calls nowhere, stage ``drop`` is left out."""
    fan_job(tmp_path, base_url)
    path = tmp_path / "fan.toml"
    text = path.read_text().replace('[[stage]]\nname = "gather"', RECAP + '[[stage]]\nname = "gather"')
    if dead:
        text = text.replace(f'model = "m-{dead}"\n', f'model = "m-{dead}"\nbase_url = "{DEAD}"\n')
    if drop:
        start = text.index(f'[[stage]]\nname = "{drop}"')
        text = text[:start] + text[text.index("[[stage]]", start + 1):]
    if split:
        text = text.replace("Split each post.", split)
    path.write_text(text, encoding="utf-8")
    return jobs.load(path)
