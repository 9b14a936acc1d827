"""Inputs: JSONL, CSV and a SQLite table all give the same items, streamed in order; a file's fingerprint."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest
import sqlite_utils

from runner import item_rows, jobs
from runner.errors import InputError
from runner.inputs import InputSpec, read_records
from runner.jobs import Job, Prompt

RECORDS = [
    {"id": "a1", "month": "2026-01", "body": 'line one\nline "two" \\ café 日本'},
    {"id": "a2", "month": "2026-02", "body": "Привет"},
]


def items_of(spec: InputSpec) -> list[tuple[str, str, str]]:
    job = Job(name="t", input=spec, group="month", prompt=Prompt(fields=("body",)))
    return [(row.key, row.group, row.input) for row in item_rows.items(job)]


def test_jsonl_csv_and_sqlite_inputs_give_the_same_items(tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in RECORDS), encoding="utf-8")
    with (tmp_path / "in.csv").open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["id", "month", "body"])
        writer.writeheader()
        writer.writerows(RECORDS)
    sqlite_utils.Database(tmp_path / "in.db")["posts"].insert_all(RECORDS)
    expected = [
        ("a1", "2026-01", json.dumps({"id": "a1", "body": RECORDS[0]["body"]}, ensure_ascii=False, separators=(",", ":"))),
        ("a2", "2026-02", '{"id":"a2","body":"Привет"}'),
    ]
    assert items_of(InputSpec(tmp_path / "in.jsonl", "jsonl")) == expected
    assert items_of(InputSpec(tmp_path / "in.csv", "csv")) == expected
    assert items_of(InputSpec(tmp_path / "in.db", "sqlite", "posts")) == expected


def test_a_job_file_names_a_sqlite_table_input(tmp_path: Path) -> None:
    sqlite_utils.Database(tmp_path / "in.db")["posts"].insert_all(RECORDS)
    (tmp_path / "job.toml").write_text('name = "t"\ninput = { path = "in.db", table = "posts" }\ngroup = "month"\n')
    job = jobs.load(tmp_path / "job.toml")
    assert job.input == InputSpec(tmp_path / "in.db", "sqlite", "posts")
    assert [row.key for row in item_rows.items(job)] == ["a1", "a2"]


def test_the_fingerprint_changes_with_content_model_prompt_and_version(tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    base = Job(name="t", input=InputSpec(tmp_path / "in.jsonl", "jsonl"))
    variants = [
        base,
        Job(name="t", input=base.input, version="2"),
        Job(name="t", input=base.input, prompt=Prompt(instructions="Something else.")),
        Job(name="t", input=base.input, provider=base.provider.__class__(model="other-model")),
    ]
    prints = [tuple(row.fingerprint for row in item_rows.items(job)) for job in variants]
    assert len(set(prints)) == 4


def test_a_byte_order_mark_and_numeric_keys_and_groups_are_read_as_text(tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_bytes(b"\xef\xbb\xbf" + b'{"id": 7, "month": 2026.0}\n{"id": 8, "month": 2026}\n')
    (tmp_path / "in.csv").write_bytes(b"\xef\xbb\xbfid,month\r\n7,2026\r\n")
    for spec in (InputSpec(tmp_path / "in.jsonl", "jsonl"), InputSpec(tmp_path / "in.csv", "csv")):
        rows = item_rows.items(Job(name="t", input=spec, group="month"))
        assert [(row.key, row.group) for row in rows][:1] == [("7", "2026")]


def read_csv(path: Path, text: str) -> list[tuple[str, dict[str, str]]]:
    path.write_text(text, encoding="utf-8", newline="")
    return [(where.removeprefix(f"{path} "), record) for where, record in read_records(InputSpec(path, "csv"))]


def test_quoted_csv_fields_that_close_may_span_lines_and_records_are_named_by_their_first_line(tmp_path: Path) -> None:
    text = 'id,body\r\n1,"one\r\n""two""\r\n, three"\r\n\r\n2,"x"\r\n'
    assert read_csv(tmp_path / "in.csv", text) == [
        ("line 2", {"id": "1", "body": 'one\r\n"two"\r\n, three'}),
        ("line 6", {"id": "2", "body": "x"}),
    ]


def test_an_unclosed_csv_quote_is_named_on_its_own_line_after_a_closed_multiline_field(tmp_path: Path) -> None:
    text = 'id,body,note\n1,"a\nb","never closed\n2,x,y\n'
    with pytest.raises(InputError) as caught:
        read_csv(tmp_path / "in.csv", text)
    assert str(caught.value) == f"{tmp_path / 'in.csv'} line 3: a quoted field opens here and is not closed (unexpected end of data)"


def test_a_stray_csv_quote_closed_on_a_later_line_names_both_lines(tmp_path: Path) -> None:
    text = 'id,body\n1,"no end\n2,"x"\n'
    with pytest.raises(InputError) as caught:
        read_csv(tmp_path / "in.csv", text)
    assert str(caught.value) == (
        f"{tmp_path / 'in.csv'} line 3: bad quoting (',' expected after '\"'), in a quoted field that opened on line 2"
    )


def test_a_csv_that_is_not_utf8_is_named_with_its_line(tmp_path: Path) -> None:
    (tmp_path / "in.csv").write_bytes(b"id,body\n1,ok\n2,caf\xe9\n")
    with pytest.raises(InputError) as caught:
        list(read_records(InputSpec(tmp_path / "in.csv", "csv")))
    assert str(caught.value) == f"{tmp_path / 'in.csv'} line 3: not UTF-8 (byte 6)"


def test_a_jsonl_integer_longer_than_python_reads_is_refused_with_its_line(tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_text('{"id": "a"}\n{"id": ' + "9" * 5000 + "}\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        list(read_records(InputSpec(tmp_path / "in.jsonl", "jsonl")))
    assert str(caught.value) == f"{tmp_path / 'in.jsonl'} line 2: a number longer than 4300 digits"


def edited_in_place(path: Path, at: int, new: bytes) -> None:
    """Bytes of ``path`` overwritten at offset ``at``: the same size, and the mtime as it was."""
    before = path.stat()
    with path.open("r+b") as file:
        file.seek(at)
        file.write(new)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


@pytest.fixture
def big_input(tmp_path: Path) -> InputSpec:
    """A JSONL input of 300 KiB: longer than its fingerprint's two hashed windows of 64 KiB."""
    line = json.dumps({"id": "x", "body": "a" * 1000}) + "\n"
    path = tmp_path / "big.jsonl"
    path.write_text(line * (300 * 1024 // len(line)), encoding="utf-8")
    return InputSpec(path, "jsonl")


@pytest.mark.parametrize("where", ["head", "tail"])
def test_an_edit_that_keeps_size_and_mtime_changes_the_fingerprint_inside_the_hashed_windows(
    big_input: InputSpec, where: str
) -> None:
    before = big_input.fingerprint()
    size = big_input.path.stat().st_size
    edited_in_place(big_input.path, 100 if where == "head" else size - 100, b"b")
    after = big_input.fingerprint()
    assert before is not None and after is not None
    assert (after.size, after.mtime_ns) == (before.size, before.mtime_ns) and after.digest != before.digest


def test_an_edit_in_the_middle_of_a_large_input_that_puts_its_mtime_back_is_seen_by_its_change_time(
    big_input: InputSpec,
) -> None:
    before = big_input.fingerprint()
    edited_in_place(big_input.path, 150 * 1024, b"b")
    assert big_input.fingerprint() != before


def test_a_sqlite_input_and_a_missing_file_have_no_fingerprint(tmp_path: Path) -> None:
    sqlite_utils.Database(tmp_path / "in.db")["posts"].insert({"id": "a1"})
    assert InputSpec(tmp_path / "in.db", "sqlite", "posts").fingerprint() is None
    assert InputSpec(tmp_path / "nowhere.jsonl", "jsonl").fingerprint() is None
