"""A job file's fan-out and join: what reads well is taken, every misplaced key or stage is one JobError."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner import jobs
from runner.errors import JobError

SPLIT = '[[stage]]\nname = "split"\nfan_out = "chunks"\n'
NOTE = '[[stage]]\nname = "note"\n[stage.prompt]\nfields = ["_chunk", "_chunk.text"]\n'
GATHER = '[[stage]]\nname = "gather"\nkind = "join"\n'


def load(tmp_path: Path, stages: str) -> jobs.Job:
    (tmp_path / "job.toml").write_text('name = "f"\ninput = "in.jsonl"\n' + stages, encoding="utf-8")
    return jobs.load(tmp_path / "job.toml")


def test_a_fan_out_and_its_join_are_read_with_their_guards_defaults_and_saved_with_the_job(tmp_path: Path) -> None:
    job = load(tmp_path, SPLIT + "max_fan_out = 10\n" + NOTE + GATHER + "allow_failures = true\n")
    split, gather = job.stage("split"), job.stage("gather")
    assert (split.fan_out, split.max_fan_out, split.max_state_bytes) == ("chunks", 10, 1_000_000)
    assert (gather.kind, gather.allow_failures) == ("join", True)
    assert jobs.Job.from_json(job.to_json()) == job


def test_a_decide_stage_before_a_fan_out_or_after_its_join_is_read(tmp_path: Path) -> None:
    review = '[[stage]]\nname = "review"\nkind = "decide"\n'
    job = load(tmp_path, NOTE.replace('"note"', '"first"') + review + SPLIT + NOTE + GATHER
               + review.replace("review", "check"))
    assert [(stage.name, stage.kind) for stage in job.stages] == [
        ("first", "openai-chat"), ("review", "decide"), ("split", "openai-chat"), ("note", "openai-chat"),
        ("gather", "join"), ("check", "decide")]


def test_a_stage_without_fan_out_keeps_its_fingerprint(tmp_path: Path) -> None:
    plain, fanned = load(tmp_path, NOTE).stage("note"), load(tmp_path, SPLIT + NOTE + GATHER).stage("note")
    assert plain.fingerprint("1") == fanned.fingerprint("1")


@pytest.mark.parametrize("stages, message", [
    (SPLIT + NOTE, "stage 'split' fans out: a stage of kind 'join' must follow"),
    (SPLIT + GATHER, "a join needs at least one stage between it and its fan-out"),
    (NOTE + GATHER, "a join comes after a stage with 'fan_out'"),
    (SPLIT + NOTE + SPLIT.replace("split", "again") + GATHER, "fan-outs do not nest"),
    (SPLIT + NOTE.replace('name = "note"\n', 'name = "note"\nwhen = { field = "x", exists = true }\n') + GATHER,
     "the stage after a fan-out takes every sub-item: it has no 'when'"),
    (SPLIT + NOTE + GATHER + 'when = { field = "x", exists = true }\n', "a join has no 'when'"),
    (SPLIT + 'max_fan_out = 0\n' + NOTE + GATHER, "'max_fan_out' must be at least 1"),
    (SPLIT.replace('fan_out = "chunks"\n', 'max_fan_out = 5\n') + NOTE, "'max_fan_out' and 'max_state_bytes' go with"),
    (SPLIT + "allow_failures = true\n" + NOTE + GATHER, "'allow_failures' belongs on a join stage"),
    (SPLIT + NOTE + GATHER + "fan_out = \"x\"\n", "'fan_out' belongs on a fan-out stage"),
    (SPLIT.replace('"chunks"', '"a.b"') + NOTE + GATHER, "'fan_out' must name a field of the stage's result"),
    (SPLIT.replace('"chunks"', "3") + NOTE + GATHER, "'fan_out' must be a string"),
    (SPLIT + NOTE + '[[stage]]\nname = "review"\nkind = "decide"\n' + GATHER,
     "a person decides for an item, not for its sub-items"),
], ids=["no join", "nothing between", "join alone", "nested", "when after", "when on join", "guard 0",
        "guard alone", "allow_failures misplaced", "fan_out on a join", "dotted", "not a string", "decide inside"])
def test_a_misplaced_fan_out_or_join_is_one_job_error(tmp_path: Path, stages: str, message: str) -> None:
    with pytest.raises(JobError) as caught:
        load(tmp_path, stages)
    assert message in str(caught.value)
