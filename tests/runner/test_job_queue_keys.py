"""Issue 19's job keys: ``[schedule] field``, ``[batch] priority_field`` and ``[retry.<kind>]``, read and checked."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from runner import item_rows, jobs
from runner.errors import InputError, JobError
from runner.job_queue import KindRetry, parse_time


def job_file(tmp_path: Path, tables: str, records: list[dict[str, object]] | None = None) -> Path:
    lines = [json.dumps(record) for record in records or [{"id": "a"}]]
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "job.toml").write_text(f'name = "t"\ninput = "in.jsonl"\n{tables}', encoding="utf-8")
    return tmp_path / "job.toml"


def test_per_kind_retry_limits_are_read_with_unset_keys_taking_the_retrys(tmp_path: Path) -> None:
    job = jobs.load(job_file(tmp_path, "[retry]\nmax_attempts = 3\nbackoff = 2\n[retry.transport]\nmax_attempts = 5\n"
                                       "[retry.rate_limited]\nmax_attempts = 8\nbackoff = 10\n"))
    assert job.retry.transport == KindRetry(max_attempts=5)
    assert (job.retry.of("transport").max_attempts, job.retry.of("transport").backoff) == (5, 2.0)
    limited = job.retry.of("rate_limited")
    assert (limited.max_attempts, limited.max_refusals, limited.backoff) == (3, 8, 10.0)
    assert job.retry.of("item_invalid") == job.retry
    assert jobs.Job.from_json(job.to_json()).retry == job.retry


@pytest.mark.parametrize("tables, message", [
    ("[retry.transport]\nmax_attempts = 0\n", " [retry.transport]: 'max_attempts' must be at least 1"),
    ("[retry.rate_limited]\nbackoff = -1.5\n", " [retry.rate_limited]: 'backoff' must be at least 0"),
    ("[retry.transport]\nmax_attempts = -1\n", " [retry.transport]: 'max_attempts' must be at least 1"),
    ("[retry.transport]\nbackoff = \"5s\"\n", " [retry.transport]: 'backoff' must be a finite number, not '5s'"),
    ("[retry.transport]\nretries = 2\n", " [retry.transport]: unknown key 'retries' (known: max_attempts, backoff, "
     "max_backoff)"),
    ("[retry.auth]\nmax_attempts = 2\n", " [retry]: unknown key 'auth'"),
    ('[retry]\ntransport = 3\n', " [retry.transport]: must be a table"),
    ("[schedule]\ncolumn = \"at\"\n", " [schedule]: unknown key 'column' (known: field)"),
    ("[batch]\npriority_field = 1\n", " [batch]: 'priority_field' must be a string, not 1"),
    ('[provider]\nqueue = "openai main"\n', " [provider]: 'queue' must be one word of letters, digits and _ . : - "
     "(say \"openai-main\"), not 'openai main'"),
    ("[provider]\nqueue_priority = \"high\"\n", " [provider]: 'queue_priority' must be an integer, not 'high'"),
    ('[provider]\nqueue = "q"\n[[stage]]\nname = "one"\n[stage.provider]\nqueue = "other"\n',
     ' [[stage]] 1 "one" [stage.provider]: \'queue\' is the run\'s, shared by every stage: set it in [provider]'),
], ids=["max_attempts 0", "negative backoff", "max_attempts -1", "backoff as text", "unknown kind key", "a kind of no limits", "not a table",
        "schedule key", "priority_field type", "queue name", "queue_priority type", "a stage's queue"])
def test_bad_queue_keys_are_refused_with_a_plain_message(tmp_path: Path, tables: str, message: str) -> None:
    path = job_file(tmp_path, tables)
    with pytest.raises(JobError) as caught:
        jobs.load(path)
    assert str(caught.value).removeprefix(str(path)).startswith(message)


def test_an_items_priority_and_time_are_read_from_the_fields_the_job_names(tmp_path: Path) -> None:
    records = [{"id": "a", "p": 3, "at": "2026-12-02T18:00:00Z"}, {"id": "b", "at": 1_800_000_000},
               {"id": "c", "p": "-2", "at": "2026-12-02T19:00:00+01:00"}]
    job = jobs.load(job_file(tmp_path, '[batch]\npriority_field = "p"\n[schedule]\nfield = "at"\n', records))
    rows = list(item_rows.items(job))
    six_pm = datetime(2026, 12, 2, 18, tzinfo=UTC).timestamp()
    assert [(row.priority, row.at) for row in rows] == [(3, six_pm), (0, 1_800_000_000.0), (-2, six_pm)]


def test_a_new_time_is_a_new_input_whichever_fields_the_prompt_sends(tmp_path: Path) -> None:
    tables = '[schedule]\nfield = "at"\n[prompt]\nfields = ["body"]\n'
    first = list(item_rows.items(jobs.load(job_file(tmp_path, tables, [{"id": "a", "body": "x", "at": 1}]))))
    again = list(item_rows.items(jobs.load(job_file(tmp_path, tables, [{"id": "a", "body": "x", "at": 2}]))))
    assert first[0].input == again[0].input and first[0].fingerprint != again[0].fingerprint


@pytest.mark.parametrize("value, said", [
    ('"tomorrow"', "field 'at' is not a time: 'tomorrow'"),
    ('"2026-12-02T18:00:00"', "field 'at' has no offset"),
    ("true", "field 'at' must be a time"),
    ('"nan"', "field 'at' is not a time: 'nan'"),
], ids=["words", "no offset", "a boolean", "nan"])
def test_a_bad_time_names_the_record_and_the_field_before_the_store_is_touched(
    tmp_path: Path, value: str, said: str
) -> None:
    (tmp_path / "in.jsonl").write_text('{"id": "a"}\n{"id": "b", "at": ' + value + "}\n", encoding="utf-8")
    (tmp_path / "job.toml").write_text('name = "t"\ninput = "in.jsonl"\n[schedule]\nfield = "at"\n', encoding="utf-8")
    with pytest.raises(InputError) as caught:
        item_rows.check(jobs.load(tmp_path / "job.toml"))
    assert f"in.jsonl line 2: {said}" in str(caught.value)


def test_a_priority_that_is_no_integer_names_the_record_and_the_field(tmp_path: Path) -> None:
    path = job_file(tmp_path, '[batch]\npriority_field = "p"\n', [{"id": "a", "p": "high"}])
    with pytest.raises(InputError) as caught:
        item_rows.check(jobs.load(path))
    assert "line 1: field 'p' must be an integer priority, not 'high'" in str(caught.value)


def test_a_runs_shared_queue_and_its_priority_there_are_read_from_its_provider(tmp_path: Path) -> None:
    job = jobs.load(job_file(tmp_path, '[provider]\nqueue = "openai-main"\nqueue_priority = 5\n'))
    assert (job.provider.queue, job.provider.queue_priority) == ("openai-main", 5)
    assert jobs.Job.from_json(job.to_json()).provider.queue == "openai-main"


def test_a_time_a_person_gives_that_is_no_time_says_the_forms_accepted() -> None:
    with pytest.raises(InputError) as refused:
        parse_time("tomorrow", "--at", now=0.0)
    assert str(refused.value) == ("--at: 'tomorrow' is not a time (accepted: ISO 8601 with an offset, e.g. "
                                  "2026-12-02T18:00:00Z, epoch seconds, or a time from now: in 10m, in 90s, in 2h, "
                                  "in 1d)")
