"""Job files: every scalar key is read as its type; a wrong one is named with the key and the type it wants."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from runner import export, job_stages, jobs, pricing
from runner.errors import JobError
from runner.validation import ResultCheck

#: For each type a key wants: a TOML value of another type, and how the message shows it.
WRONG = {str: ("{ a = 1 }", "a table"), int: ('"x"', "'x'"), float: ('"x"', "'x'"), tuple: ("[1]", "[1]"),
         dict: ('"x"', "'x'"), bool: ('"yes"', "'yes'")}
TOP = [("name", str), ("key", str), ("group", str), ("version", str)]
INPUT = [("path", str), ("format", str), ("table", str)]
SECTIONS = [
    (section, key, type(getattr(cls(), key)))
    for section, cls in jobs.SECTIONS.items()
    for key in jobs.file_keys(cls)
    if not dataclasses.is_dataclass(getattr(cls(), key))  # a table in the section: [retry.transport]
]


def job_file(tmp_path: Path, top: str = "", input_: str = 'path = "in.jsonl"', tables: str = "") -> Path:
    lines = {"name": 'name = "t"', "input": f"input = {{ {input_} }}"}
    for line in top.splitlines():
        lines[line.split(" = ")[0]] = line
    (tmp_path / "job.toml").write_text("\n".join(lines.values()) + "\n" + tables, encoding="utf-8")
    return tmp_path / "job.toml"


def refusal(path: Path) -> str:
    with pytest.raises(JobError) as caught:
        jobs.load(path)
    return str(caught.value).removeprefix(f"{path}")


@pytest.mark.parametrize("key, wanted", TOP, ids=[k for k, _ in TOP])
def test_a_top_key_of_the_wrong_type_is_named_with_the_type_it_wants(tmp_path: Path, key: str, wanted: type) -> None:
    value, shown = WRONG[wanted]
    path = job_file(tmp_path, top=f"{key} = {value}")
    assert refusal(path) == f": {key!r} must be {jobs.TYPE_NAMES[wanted]}, not {shown}"


@pytest.mark.parametrize("key, wanted", INPUT, ids=[k for k, _ in INPUT])
def test_an_input_key_of_the_wrong_type_is_named_with_the_type_it_wants(tmp_path: Path, key: str, wanted: type) -> None:
    value, shown = WRONG[wanted]
    given = {"path": '"in.jsonl"', "format": '"jsonl"', "table": '"t"', key: value}
    path = job_file(tmp_path, input_=", ".join(f"{k} = {v}" for k, v in given.items()))
    assert refusal(path) == f" input: {key!r} must be {jobs.TYPE_NAMES[wanted]}, not {shown}"


@pytest.mark.parametrize("section, key, wanted", SECTIONS, ids=[f"{s}.{k}" for s, k, _ in SECTIONS])
def test_a_section_key_of_the_wrong_type_is_named_with_the_type_it_wants(
    tmp_path: Path, section: str, key: str, wanted: type
) -> None:
    value, shown = WRONG[wanted]
    path = job_file(tmp_path, tables=f"[{section}]\n{key} = {value}\n")
    assert refusal(path) == f" [{section}]: {key!r} must be {jobs.TYPE_NAMES[wanted]}, not {shown}"


@pytest.mark.parametrize("tables, message", [
    ("[batch]\nmax_items = true\n", " [batch]: 'max_items' must be an integer, not true"),
    ("[batch]\nmax_chars = 9223372036854775808\n", " [batch]: 'max_chars' must be an integer, not an integer over 64 bits"),
    ("[retry]\nbackoff = nan\n", " [retry]: 'backoff' must be a finite number, not nan"),
    ("[provider]\ntimeout = inf\n", " [provider]: 'timeout' must be a finite number, not inf"),
    ('[provider]\nbase_url = "http://api\\n.example.com"\n',
     " [provider]: 'base_url' is not a URL (Invalid non-printable ASCII character in URL, '\\n' at position 10.)"),
], ids=["true is no integer", "integers are 64-bit", "nan", "inf", "a URL httpx cannot parse"])
def test_values_toml_allows_but_a_job_cannot_use_are_refused(tmp_path: Path, tables: str, message: str) -> None:
    assert refusal(job_file(tmp_path, tables=tables)) == message


@pytest.mark.parametrize("tables, message", [
    ('[provider]\nkind = "python"\n', " [provider]: unknown kind 'python' (known: openai-chat, openai-batch, "
     "anthropic-messages, anthropic-batch)"),
    ('[provider]\nhandler = "my.classify"\n', " [provider]: unknown key 'handler' (known: kind, base_url, model, "
     "api_key_env, timeout, create_margin, max_tokens, price, expected_output_tokens, queue, queue_priority)"),
], ids=["kind", "handler"])
def test_a_python_handler_is_given_from_python_never_in_a_job_file(tmp_path: Path, tables: str, message: str) -> None:
    assert refusal(job_file(tmp_path, tables=tables)) == message


def test_an_integer_serves_where_a_number_is_wanted(tmp_path: Path) -> None:
    job = jobs.load(job_file(tmp_path, tables="[provider]\ntimeout = 30\n[retry]\nbackoff = 2\n"))
    assert (job.provider.timeout, job.retry.backoff) == (30.0, 2.0)


def test_a_job_file_with_a_byte_order_mark_loads(tmp_path: Path) -> None:
    path = job_file(tmp_path)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert jobs.load(path).name == "t"


def test_a_schema_whose_refs_resolve_loads(tmp_path: Path) -> None:
    schema = '[output.schema]\nproperties = { label = { "$ref" = "#/$defs/label" } }\n[output.schema."$defs".label]\ntype = "string"\n'
    job = jobs.load(job_file(tmp_path, tables=schema))
    assert ResultCheck(job.output_schema).problem({"label": 1}) == (
        'result does not fit the output schema at /label: 1 is not of type "string"'
    )


def test_a_python_job_whose_schema_has_a_ref_to_nothing_is_refused_as_a_job_error() -> None:
    with pytest.raises(JobError) as caught:
        ResultCheck({"$ref": "#/$defs/nothing"})
    assert str(caught.value) == (
        "Job(output_schema=...): the output schema has a $ref that leads nowhere: Pointer '/$defs/nothing' does not exist"
    )


def test_a_schema_ref_to_another_address_is_refused_never_fetched() -> None:
    with pytest.raises(JobError) as caught:
        ResultCheck({"$ref": "http://192.0.2.1/label.json"})
    assert "http://192.0.2.1/label.json is not fetched" in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("top, message", [
    ("version = " + "9" * 5000, ": not valid TOML: a number longer than 4300 digits"),
    ("version = " + "[" * 5000 + "]" * 5000, ": not valid TOML: arrays or tables nested too deeply"),
], ids=["an integer longer than Python reads", "nested thousands deep"])
def test_toml_that_python_cannot_read_is_refused_as_not_valid_toml(tmp_path: Path, top: str, message: str) -> None:
    assert refusal(job_file(tmp_path, top=top)) == message


def test_an_input_path_that_would_break_a_message_over_lines_is_refused(tmp_path: Path) -> None:
    path = job_file(tmp_path, input_='path = "posts\\n.jsonl"')
    assert refusal(path) == " input: 'path' must be a printable file name, not 'posts\\n.jsonl'"


BATCH_API = '[provider]\nkind = "openai-batch"\n'


@pytest.mark.parametrize("tables, limits", [
    ("", jobs.BatchLimits(25, 20_000, 2)),
    (BATCH_API, jobs.BatchLimits(50_000, 50_000_000, 16)),
    (BATCH_API + "[batch]\nmax_items = 1000\n", jobs.BatchLimits(1_000, 50_000_000, 16)),
    (BATCH_API + "[batch]\nmax_chars = 16000\nconcurrency = 2\n", jobs.BatchLimits(50_000, 16_000, 2)),
    (BATCH_API + "[batch]\nmax_items = 50000\n", jobs.BatchLimits(50_000, 50_000_000, 16)),
])
def test_the_batch_api_gets_its_own_defaults_for_the_keys_a_job_does_not_set(
    tmp_path: Path, tables: str, limits: jobs.BatchLimits
) -> None:
    assert jobs.load(job_file(tmp_path, tables=tables)).batch == limits


def test_more_items_a_batch_than_the_batch_api_takes_is_one_error_naming_its_limit(tmp_path: Path) -> None:
    path = job_file(tmp_path, tables=BATCH_API + "[batch]\nmax_items = 50001\n")
    assert refusal(path) == (" [batch]: 'max_items' must be at most 50,000 for kind 'openai-batch' "
                             "(the Batch API takes at most 50,000 requests a batch), not 50,001")


def test_a_python_run_of_the_batch_api_gets_its_defaults_too() -> None:
    data = {"name": "t", "input": "in.jsonl", "provider": {"kind": "openai-batch"}, "batch": {"concurrency": 3}}
    assert jobs.from_dict(data, base=Path.cwd(), where="Run('t')").batch == jobs.BatchLimits(50_000, 50_000_000, 3)


STAGE_REFUSALS = [
    ('[[stage]]\nname = "a"\nmodle = "x"\n', '[[stage]] 1 "a": unknown key \'modle\''),
    ('[[stage]]\nname = "a"\n[[stage]]\nname = "a"\n', '[[stage]] 2 "a": stage \'a\' is named twice'),
    ('[[stage]]\nname = "_a"\n', "not starting with '_' (reserved)"),
    ('[[stage]]\nname = "a.b"\n', "without '.'"),
    ("[[stage]]\nname = 'say \"hi\"'\n", "without '.' or '\"'"),
    ('[[stage]]\nname = "two\\nlines"\n', '[[stage]] 1 "two\\nlines": \'name\' must be a name, printable'),
    ('[[stage]]\nname = "a"\n[[stage]]\nkind = "decide"\n', "[[stage]] 2 (no name): 'name' is required"),
    ('[[stage]]\nname = "a"\n[[stage]]\nname = "b"\nkind = "decide"\n[stage.output.schema]\nrequired = ["ok"]\n',
     "[[stage]] 2 \"b\" [stage.output]: a stage of kind 'decide' makes no call, so it has no [stage.output]"),
    ('[[stage]]\nname = "a"\n[[stage]]\nname = "b"\nkind = "decide"\n[stage.prompt]\ninstructions = "x"\n',
     "[stage.prompt]: a stage of kind 'decide' makes no call"),
    ('[[stage]]\nname = "a"\n[[stage]]\nname = "message"\n', "stage 'message' has the name of a column of the export"),
    ('[[stage]]\nname = "a"\nwhen = { field = "x", equals = 1 }\n', "the first stage takes every item"),
    ('[[stage]]\nname = "a"\n[[stage]]\nname = "b"\nwhen = { field = "c.label", in = ["x"] }\n',
     "'c.label' reads stage 'c', which is not an earlier stage (earlier: a)"),
    ('[[stage]]\nname = "a"\n[stage.prompt]\nfields = ["b.x"]\n[[stage]]\nname = "b"\n', "reads stage 'b'"),
    ('[[stage]]\nname = "a"\n[stage.batch]\nconcurrency = 3\n', "'concurrency' is the run's"),
    ('[[stage]]\nname = "a"\nkind = "openai-chatt"\n', "unknown kind 'openai-chatt'"),
    ('[[stage]]\nname = "a"\n[[stage]]\nname = "b"\nwhen = { field = "a.x" }\n', "give a 'field' and one of"),
    ('[[stage]]\nname = "a"\n[[stage]]\nname = "b"\nwhen = { field = "a.x", in = [] }\n', "list of one value or more"),
    ('[[stage]]\nname = "a"\n[[stage]]\nname = "b"\nwhen = { field = "a.", equals = 1 }\n', "'a.' is not a path"),
    ('[[stage]]\nname = "a"\n[[stage]]\nname = "b"\nwhen = { field = "a..x", exists = true }\n',
     "'a..x' is not a path"),
    ('[[stage]]\nname = "a"\n[[stage]]\nname = "b"\n[stage.prompt]\nfields = ["a."]\n', "'a.' is not a path"),
]


@pytest.mark.parametrize("tables, said", STAGE_REFUSALS, ids=[said for _, said in STAGE_REFUSALS])
def test_a_bad_stage_is_refused_with_the_stage_named(tmp_path: Path, tables: str, said: str) -> None:
    assert said in refusal(job_file(tmp_path, tables=tables))


def test_no_stage_may_be_named_like_a_column_of_the_export() -> None:
    assert set(export.OWN) | {"stage"} == set(job_stages.COLUMNS)


def test_a_stage_inherits_the_top_level_sections_key_by_key(tmp_path: Path) -> None:
    tables = ('[provider]\nmodel = "big"\ntimeout = 9.0\n[batch]\nmax_items = 7\n'
              '[[stage]]\nname = "a"\n[[stage]]\nname = "b"\n[stage.provider]\nmodel = "small"\n'
              '[stage.batch]\nmax_chars = 100\n')
    a, b = jobs.load(job_file(tmp_path, tables=tables)).stages
    assert (a.provider.model, a.provider.timeout, a.batch.max_items) == ("big", 9.0, 7)
    assert (b.provider.model, b.provider.timeout, b.batch.max_items, b.batch.max_chars) == ("small", 9.0, 7, 100)


def test_a_chat_stage_of_a_batch_api_job_takes_the_plain_batch_limits_not_the_batch_api_s(tmp_path: Path) -> None:
    tables = ('[provider]\nkind = "openai-batch"\n[batch]\nmax_chars = 900\n'
              '[[stage]]\nname = "a"\n[[stage]]\nname = "b"\nkind = "openai-chat"\n')
    a, b = jobs.load(job_file(tmp_path, tables=tables)).stages
    assert (a.batch.max_items, a.batch.max_chars) == (50_000, 900)
    assert (b.batch.max_items, b.batch.max_chars) == (jobs.BatchLimits().max_items, 900)


def test_a_job_without_stages_has_one_named_after_its_provider_kind(tmp_path: Path) -> None:
    job = jobs.load(job_file(tmp_path, tables='[provider]\nkind = "openai-batch"\n'))
    assert [(s.name, s.kind) for s in job.stages] == [("openai-batch", "openai-batch")]
    assert not job.staged


def test_the_stages_round_trip_through_the_store_s_json(tmp_path: Path) -> None:
    tables = ('[[stage]]\nname = "a"\n[[stage]]\nname = "b"\nwhen = { field = "a.x", in = [1, "y"] }\n'
              '[[stage]]\nname = "c"\nkind = "openai-batch"\nwhen = { field = "a.ok", equals = false }\n')
    job = jobs.load(job_file(tmp_path, tables=tables))
    assert jobs.Job.from_json(job.to_json()) == job


@pytest.mark.parametrize(("price", "said"), [
    ('{ input = 0.15, output = "a" }', "price 'output' must be a number at least 0, not 'a'"),
    ("{ input = 0.15 }", "price needs 'output'"),
    ("{ input = -1, output = 1 }", "price 'input' must be a number at least 0, not -1"),
    ("{ input = 1, output = 1, per = 0 }", "price 'per' must be more than 0"),
    ("{ input = 1, output = 1, batch_discount = 2 }", "price 'batch_discount' is the part taken off: at most 1"),
    ("{ input = 1, output = 1, cents = 2 }", "price has no key 'cents'"),
    ('"cheap"', "'price' must be a table, not 'cheap'"),
])
def test_a_bad_price_is_one_plain_error_naming_the_value(tmp_path: Path, price: str, said: str) -> None:
    (tmp_path / "in.jsonl").write_text('{"id": "a"}\n')
    (tmp_path / "job.toml").write_text(f'name = "p"\ninput = "in.jsonl"\n[provider]\nprice = {price}\n')
    with pytest.raises(JobError) as raised:
        jobs.load(tmp_path / "job.toml")
    assert said in str(raised.value)


def test_a_price_given_is_kept_with_the_job_and_a_stage_inherits_it(tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_text('{"id": "a"}\n')
    (tmp_path / "job.toml").write_text(
        'name = "p"\ninput = "in.jsonl"\n[provider]\nmodel = "mine"\nprice = { input = 1, output = 2 }\n'
        '[[stage]]\nname = "one"\n[[stage]]\nname = "two"\n[stage.provider]\nprice = { input = 3, output = 4 }\n')
    job = jobs.Job.from_json(jobs.load(tmp_path / "job.toml").to_json())
    assert [pricing.price_of(s.provider.price, s.provider.model) for s in job.stages] == [
        pricing.Price(1.0, 2.0), pricing.Price(3.0, 4.0)]
