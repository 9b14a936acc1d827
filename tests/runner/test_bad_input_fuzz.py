"""Malformed job files, JSONL and CSV made by seeded mutations of the samples.

Each one either loads or is refused with a JobError (InputError is one) on one
line; no other exception escapes. The mutations are random but seeded, so a
failure names a case that fails again the same way.
"""

from __future__ import annotations

import csv
import io
import json
import random
from collections.abc import Callable
from pathlib import Path

import pytest
from support import SAMPLE

from runner import item_rows, jobs
from runner.errors import JobError
from runner.validation import ResultCheck

SEED = 13
CASES = 300
JOB = (SAMPLE / "job.toml").read_bytes()
POSTS = (SAMPLE / "posts.jsonl").read_bytes().splitlines(keepends=True)[:12]

#: What mutations insert: the syntax of TOML, JSON and CSV, escapes, odd numbers and bytes.
PIECES = [
    b'"', b"'", b"[", b"]", b"{", b"}", b"=", b",", b":", b"\n", b"\r\n", b"\\", b"#", b".", b" ", b'"""',
    b"[[", b"]]", b"\\u", b"\\ud800", b"\\udfff", b"\\n", b"\x00", b"\xff", b"\xe9", b"\xed\xa0\x80",
    b"-1", b"0", b"1e999", b"nan", b"inf", b"true", b"null", b"9" * 25, b"\xc3\xa9", b"$ref", b"#/$defs/x",
]
#: Whole values a mutation may give a job file key, of every TOML type and none.
VALUES = [
    "{ a = 1 }", "[1, 2]", "[]", '["x", 1]', '"x"', '""', '"a\\nb"', '"\\u00e9"', "-1", "0", "1.5", "nan",
    "-inf", "true", "1979-05-27", "9223372036854775808", '{ "$ref" = "#/$defs/none" }', '"posts.csv"',
    '"OPENAI_KEY"', '"ftp://x"', "[" * 50 + "]" * 50,
]


def mutate(rng: random.Random, data: bytes) -> bytes:
    """One to three edits at random places: delete, insert, repeat, cut short."""
    for _ in range(rng.randint(1, 3)):
        at = rng.randrange(len(data) + 1)
        end = min(len(data), at + rng.randint(1, 12))
        edit = rng.choice(["delete", "insert", "insert", "repeat", "cut"])
        if edit == "delete":
            data = data[:at] + data[end:]
        elif edit == "insert":
            data = data[:at] + rng.choice(PIECES) + data[at:]
        elif edit == "repeat":
            data = data[:end] + data[at:end] * rng.randint(1, 3) + data[end:]
        else:
            data = data[:at]
    return data


def revalue(rng: random.Random, job: bytes) -> bytes:
    """The job file with one key's value replaced by a value of another type, or a new key of it."""
    lines = job.decode().splitlines(keepends=True)
    keyed = [i for i, line in enumerate(lines) if " = " in line and not line.startswith("#")]
    at = rng.choice(keyed)
    key = lines[at].split(" = ")[0] if rng.random() < 0.8 else rng.choice(["timeout", "colour", "table"])
    lines[at] = f"{key} = {rng.choice(VALUES)}\n"
    return "".join(lines).encode()


def deepen(rng: random.Random, line: bytes) -> bytes:
    """A JSONL line with one field nested some levels deep, around the limit and far beyond it."""
    depth = rng.choice([1, 50, 127, 128, 129, 900, 5000, 100_000])
    record = json.loads(line)
    return json.dumps({**record, "body": 0}).encode().replace(b"0}", b"[" * depth + b"]" * depth + b"}")


def refusal(action: Callable[[], object], case: Path) -> str | None:
    """The message of the JobError the action raised, None when it raised none; any other exception fails.

    ``case`` is the file the action reads: the test stops there, so it still holds the case.
    """
    try:
        action()
    except JobError as exc:
        assert "\n" not in str(exc), f"{case}: the message has more than one line: {exc}"
        return str(exc)
    except Exception as exc:
        pytest.fail(f"{case} raised {exc!r:.300}, not a JobError")
    return None


def load_and_read(path: Path) -> None:
    """What `runner run` does with a job file before it writes to the store."""
    job = jobs.load(path)
    for _ in item_rows.items(job):
        pass
    job.to_json()
    ResultCheck(job.output_schema)


def test_mutated_job_files_load_or_are_refused_with_a_job_error(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    (tmp_path / "posts.jsonl").write_bytes(b"".join(POSTS))
    (tmp_path / "posts.csv").write_text("id,month\np1,2026-01\n", encoding="utf-8")
    refused = 0
    for case in range(CASES):
        text = revalue(rng, JOB) if case % 2 else mutate(rng, JOB)
        (tmp_path / "job.toml").write_bytes(text)
        refused += refusal(lambda: load_and_read(tmp_path / "job.toml"), tmp_path / "job.toml") is not None
    assert 0 < refused < CASES  # the mutations reach both outcomes


def test_mutated_jsonl_lines_are_read_or_refused_with_an_input_error(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    job = jobs.Job(name="t", input=jobs.InputSpec(tmp_path / "in.jsonl", "jsonl"), group="month")
    refused = 0
    for case in range(CASES):
        line = rng.choice(POSTS)
        bad = deepen(rng, line) + b"\n" if case % 4 == 0 else mutate(rng, line)
        (tmp_path / "in.jsonl").write_bytes(b"".join(POSTS[:3]) + bad + POSTS[3])
        refused += refusal(lambda: list(item_rows.items(job)), job.input.path) is not None
    assert 0 < refused < CASES


def test_mutated_csv_is_read_or_refused_with_an_input_error(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    records = [json.loads(line) for line in POSTS]
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=["id", "month", "title", "body"], extrasaction="ignore")
    writer.writeheader()
    writer.writerows(records)
    sample = text.getvalue().encode()
    job = jobs.Job(name="t", input=jobs.InputSpec(tmp_path / "in.csv", "csv"), group="month")
    refused = 0
    for _ in range(CASES):
        bad = mutate(rng, sample)
        (tmp_path / "in.csv").write_bytes(bad)
        refused += refusal(lambda: list(item_rows.items(job)), job.input.path) is not None
    assert 0 < refused < CASES
