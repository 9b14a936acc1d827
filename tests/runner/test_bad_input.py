"""Bad input gets one plain line saying what and where, exit code 1, and loses nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlite_utils
from scenes import dump
from support import make_job, posts, runner_cli, write_jsonl

from runner import runs
from runner.store import Store

GOOD_JOB = """
name = "test"
input = "posts.jsonl"
group = "month"
[provider]
base_url = "http://127.0.0.1:9/v1"
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A folder with a store that already holds a run named 'test' of five items."""
    write_jsonl(tmp_path / "posts.jsonl", posts(5))
    with Store(tmp_path / "runs.db") as store:
        runs.prepare(store, make_job(tmp_path, "http://127.0.0.1:9/v1", posts(5), name="test"), now=1.0)
    return tmp_path


CASES = {
    "unknown top key": ('colour = "red"\n' + GOOD_JOB, None, "job.toml: unknown key 'colour'"),
    "unknown section key": (GOOD_JOB + "[batch]\nmax_item = 3\n", None,
                            "job.toml [batch]: unknown key 'max_item': did you mean 'max_items'?"),
    "unknown key far from any": (GOOD_JOB + "[batch]\nsize = 3\n", None,
                                 "job.toml [batch]: unknown key 'size' (known: max_items, max_chars, concurrency, priority_field)"),
    "unknown provider kind": (GOOD_JOB + 'kind = "openai-chats"\n', None,
                              "job.toml [provider]: unknown kind 'openai-chats': did you mean 'openai-chat'?"),
    "a TOML key set twice": (GOOD_JOB + '[batch]\nmax_items = 5\nconcurrency = 1\nmax_items = 6\n', None,
                             "job.toml: key 'max_items' set twice, on line 8 and on line 10"),
    "a TOML table set twice": (GOOD_JOB + '[batch]\nmax_items = 5\n[retry]\nmax_attempts = 1\n[provider]\n', None,
                               "job.toml: table [provider] set twice, on line 5 and on line 11"),
    "a TOML value over lines set twice": (GOOD_JOB + '[prompt]\nfields = [\n"a",\n]\nfields = [\n"b",\n]\n', None,
                                          "job.toml: not valid TOML: Cannot overwrite a value (at line 13, column 2)"),
    "wrong type": (GOOD_JOB + '[batch]\nconcurrency = "two"\n', None, "job.toml [batch]: 'concurrency' must be an integer, not 'two'"),
    "not TOML": ("name = \n", None, "job.toml: not valid TOML: "),
    "negative retries": (GOOD_JOB + "[retry]\nrequest_retries = -1\n", None,
                         "job.toml [retry]: 'request_retries' must be at least 0"),
    "missing input": (GOOD_JOB.replace("posts.jsonl", "missing.jsonl"), None, "missing.jsonl: input file not found"),
    "duplicate keys": (GOOD_JOB, '{"id": "p1", "month": "m"}\n{"id": "p2", "month": "m"}\n{"id": "p1", "month": "m"}\n',
                       "posts.jsonl: duplicate key 'p1', on line 1 and on line 3"),
    "malformed line": (GOOD_JOB, '{"id": "p1", "month": "m"}\n{"id": "p2", "month": \n',
                       "posts.jsonl line 2: not valid JSON (Expecting value, column 24)"),
    "NaN": (GOOD_JOB, '{"id": "p1", "month": "m"}\n{"id": "p2", "month": "m", "score": NaN}\n',
            "posts.jsonl line 2: NaN is not a JSON number (NaN and infinities cannot be sent)"),
    "minus Infinity": (GOOD_JOB, '{"id": "p1", "month": "m", "score": [1, -Infinity]}\n',
                       "posts.jsonl line 1: -Infinity is not a JSON number (NaN and infinities cannot be sent)"),
    "a number no float holds": (GOOD_JOB, '{"id": "p1", "month": "m", "score": 1e400}\n',
                                "posts.jsonl line 1: 1e400 is not a JSON number (NaN and infinities cannot be sent)"),
    "no group": (GOOD_JOB, '{"id": "p1", "month": "m"}\n{"id": "p2"}\n',
                 "posts.jsonl line 2: no value for field 'month' (fields: id)"),
    "csv without the key column": (GOOD_JOB.replace("posts.jsonl", "posts.csv"), None,
                                   "posts.csv line 2: no value for field 'id' (fields: month, title)"),
    "bad schema": (GOOD_JOB + '[output.schema]\ntype = "thing"\n', None, "the output schema is not valid JSON Schema"),
    "not UTF-8": (GOOD_JOB, '{"id": "p1", "month": "m"}\n{"id": "caf\xe9", "month": "m"}\n',
                  "posts.jsonl line 2: not UTF-8 (byte 12)"),
    "no records": (GOOD_JOB, "\n\n", "posts.jsonl: no records"),
    "unset key variable": (GOOD_JOB + 'api_key_env = "RUNNER_TEST_UNSET_KEY"\n', None,
                           "environment variable RUNNER_TEST_UNSET_KEY is not set"),
}


def refused(folder: Path) -> str:
    """``runner run job.toml`` in ``folder`` fails as bad input: exit 1, one line, the store untouched.

    Returns that line, without ``error: `` and the folder (so that messages read as in the job's folder).
    """
    before = dump(folder / "runs.db")
    result = runner_cli("run", "job.toml", cwd=folder)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: "), result.stderr
    assert dump(folder / "runs.db") == before
    return result.stderr.removeprefix("error: ").rstrip("\n").replace(f"{folder.resolve()}/", "")


@pytest.mark.parametrize("job_text, jsonl, message", CASES.values(), ids=CASES.keys())
def test_bad_input_is_one_line_exit_1_and_the_store_unchanged(folder: Path, job_text: str, jsonl: str | None, message: str) -> None:
    (folder / "job.toml").write_text(job_text, encoding="utf-8")
    (folder / "posts.csv").write_text("month,title\n2026-01,hello\n", encoding="utf-8")
    if jsonl is not None:
        (folder / "posts.jsonl").write_bytes(jsonl.encode("utf-8").replace(b"\xc3\xa9", b"\xe9"))
    assert message in refused(folder)


BAD_STAGES = {
    "only a stage of kind decide": ('[[stage]]\nname = "review"\nkind = "decide"\n',
                                    "every stage is of kind 'decide': a job needs a stage that calls"),
    "a date in a when": ('[[stage]]\nname = "a"\n[[stage]]\nname = "b"\n'
                         'when = { field = "a.day", equals = 2026-01-02 }\n', "'equals' must be strings, numbers"),
}


@pytest.mark.parametrize("tables, message", BAD_STAGES.values(), ids=BAD_STAGES.keys())
def test_a_bad_stage_is_refused_before_a_store_file_is_made(tmp_path: Path, tables: str, message: str) -> None:
    write_jsonl(tmp_path / "posts.jsonl", posts(2))
    (tmp_path / "job.toml").write_text(GOOD_JOB + tables, encoding="utf-8")
    result = runner_cli("run", "job.toml", cwd=tmp_path)
    assert (result.returncode, result.stdout, result.stderr.count("\n")) == (1, "", 1), result.stderr
    assert message in result.stderr
    assert not (tmp_path / "runs.db").exists()


CSV_JOB = GOOD_JOB.replace("posts.jsonl", "posts.csv")
BAD_CSV = {
    "an unclosed quote is named where it opens": (
        'id,month,title\np1,m,"fine"\np2,m,"no end\np3,m,swallowed\np4,m,swallowed\n',
        "posts.csv line 3: a quoted field opens here and is not closed (unexpected end of data)",
    ),
    "a duplicate header name": ("id,month,id\np1,m,x\n", "posts.csv line 1: the header names the column 'id' twice"),
    "fewer fields than the header": (
        "id,month,title\np1,m,x\np2,m\n", "posts.csv line 3: expected 3 fields as in the header, got 2",
    ),
    "more fields than the header": (
        "id,month,title\np1,m,x,y\n", "posts.csv line 2: expected 3 fields as in the header, got 4",
    ),
}


@pytest.mark.parametrize("csv_text, message", BAD_CSV.values(), ids=BAD_CSV.keys())
def test_malformed_csv_is_refused_with_its_line_never_read_short(folder: Path, csv_text: str, message: str) -> None:
    (folder / "job.toml").write_text(CSV_JOB, encoding="utf-8")
    (folder / "posts.csv").write_text(csv_text, encoding="utf-8", newline="")
    assert refused(folder) == message


def test_a_jsonl_line_nested_thousands_deep_is_refused_with_its_line(folder: Path) -> None:
    (folder / "job.toml").write_text(GOOD_JOB, encoding="utf-8")
    deep = '{"id": "p2", "month": "m", "body": ' + "[" * 100_000 + "]" * 100_000 + "}"
    (folder / "posts.jsonl").write_text('{"id": "p1", "month": "m"}\n' + deep + "\n", encoding="utf-8")
    assert refused(folder) == "posts.jsonl line 2: nested deeper than 128 levels"


def test_a_jsonl_lone_surrogate_escape_is_refused_with_its_line(folder: Path) -> None:
    (folder / "job.toml").write_text(GOOD_JOB, encoding="utf-8")
    (folder / "posts.jsonl").write_text('{"id": "p1", "month": "m", "body": "half \\ud800 a pair"}\n', encoding="utf-8")
    assert refused(folder) == "posts.jsonl line 1: \\ud800 is half of a UTF-16 surrogate pair, not a character"


def test_a_file_that_is_not_a_store_is_refused(tmp_path: Path) -> None:
    (tmp_path / "runs.db").write_text("these are my notes, not a database\n" * 200)
    result = runner_cli("status", cwd=tmp_path)
    assert (result.returncode, result.stderr.count("\n")) == (1, 1)
    assert "cannot open as a run store" in result.stderr
    assert (tmp_path / "runs.db").read_text() == "these are my notes, not a database\n" * 200


def test_status_without_a_store_says_so_and_makes_none(tmp_path: Path) -> None:
    result = runner_cli("status", cwd=tmp_path)
    assert (result.returncode, result.stderr) == (1, "error: runs.db: no run store here (runner run or runner demo makes one)\n")
    assert not (tmp_path / "runs.db").exists()


def test_an_unknown_run_name_is_named(folder: Path) -> None:
    result = runner_cli("status", "tset", cwd=folder)
    assert result.returncode == 1
    assert result.stderr == "error: no run named 'tset' in runs.db (runs: test)\n"


def test_a_job_file_that_is_not_utf8_is_refused_with_its_line(folder: Path) -> None:
    (folder / "job.toml").write_bytes(GOOD_JOB.encode() + b"# caf\xe9\n")
    assert refused(folder) == "job.toml line 7: not UTF-8 (byte 6)"


def test_a_schema_ref_to_a_missing_pointer_is_refused_when_the_job_loads(folder: Path) -> None:
    schema = '[output.schema]\ntype = "object"\nproperties = { label = { "$ref" = "#/$defs/label" } }\n'
    (folder / "job.toml").write_text(GOOD_JOB + schema, encoding="utf-8")
    assert refused(folder) == (
        "job.toml [output]: the output schema has a $ref that leads nowhere: Pointer '/$defs/label' does not exist"
    )


def test_a_job_file_value_of_the_wrong_type_is_refused_naming_the_key_and_the_type(folder: Path) -> None:
    (folder / "job.toml").write_text("version = { a = 1 }\n" + GOOD_JOB, encoding="utf-8")
    assert refused(folder) == "job.toml: 'version' must be a string, not a table"


@pytest.mark.parametrize("given", ["OPENAI\\nKEY", "sk-proj-0123456789abcdefghij"], ids=["a newline", "a key pasted in"])
def test_an_api_key_env_that_names_no_variable_is_refused_on_one_line_never_showing_it(folder: Path, given: str) -> None:
    (folder / "job.toml").write_text(GOOD_JOB + f'api_key_env = "{given}"\n', encoding="utf-8")
    assert refused(folder) == (
        "job.toml [provider]: 'api_key_env' must be the name of the environment variable that holds the key "
        "(letters, digits, _), not the key or anything else (its value is not shown)"
    )


def test_an_infinite_float_in_a_sqlite_input_is_refused_with_its_row_and_column(folder: Path) -> None:
    (folder / "job.toml").write_text(GOOD_JOB.replace('"posts.jsonl"', '{ path = "posts.sqlite", table = "posts" }'),
                                     encoding="utf-8")
    sqlite_utils.Database(folder / "posts.sqlite")["posts"].insert_all(
        [{"id": "p1", "month": "m", "score": 1.5}, {"id": "p2", "month": "m", "score": float("inf")}])
    assert refused(folder) == ("posts.sqlite table posts row 2: column 'score' is inf, not a JSON number "
                               "(NaN and infinities cannot be sent)")
