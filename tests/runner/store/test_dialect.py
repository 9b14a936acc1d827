"""The store's SQL is written once and made each database's own by ``runner.store.dialect`` (issue 20)."""

from __future__ import annotations

import ast
import re

import psycopg
import pytest
from portable import QUOTED, sqlite_only
from postgres_server import fresh_schema
from test_portable_sql import NOT_RUNTIME, STORE, texts

from runner.store import Store
from runner.store.dialect import POSTGRES, SQLITE, compiled, parameters

#: What PostgreSQL's text must no longer hold once compiled: sqlite3's placeholders, SQLite's JSON functions.
LEFT_FOR_SQLITE = re.compile(r"(?<![:\w]):[A-Za-z_]\w*|\?|(?<![@\w])json(?:_each|_extract|_group_\w+)?\(|@\w+\(")


#: The modules of one database's own SQL (a SQLite file's pragmas, PostgreSQL's schema), and the fragments' texts.
ONE_DATABASES = {"connection.py", "tidy.py", "postgres.py", "schema_postgres.py", "schema_postgres_triggers.py",
                 "dialect.py"}


def runtime_texts() -> list[tuple[str, str]]:
    """Every text of the store's modules written once for both databases, with where it is."""
    modules = sorted(path for path in STORE.glob("*.py")
                     if not NOT_RUNTIME.fullmatch(path.name) and path.name not in ONE_DATABASES)
    return [(f"{module.name}:{line}", text) for module in modules for line, text in texts(module)
            if "`" not in text]  # not a docstring


def test_the_stores_runtime_sql_uses_a_fragment_for_what_only_sqlite_takes() -> None:
    offences = sorted(f"{where}: {name}" for where, text in runtime_texts() for name in sqlite_only(text))
    assert offences == []


def test_every_sql_text_of_the_store_compiles_on_both_dialects_and_leaves_postgresql_none_of_sqlites() -> None:
    left = []
    for where, text in runtime_texts():
        compiled(text, SQLITE)
        postgres = QUOTED.sub("''", compiled(text, POSTGRES).sql)
        left += [f"{where}: {found}" for found in LEFT_FOR_SQLITE.findall(postgres)]
    assert left == []


#: A whole statement: not a part of one, nor a WITH put before another, nor a text formatted before it runs.
WHOLE = re.compile(r"\s*(?:SELECT|INSERT|UPDATE|DELETE)\b")


def whole_statements() -> list[tuple[str, str]]:
    """The store's statements written whole as module constants, with where each is."""
    modules = sorted(path for path in STORE.glob("*.py")
                     if not NOT_RUNTIME.fullmatch(path.name) and path.name not in ONE_DATABASES)
    return [(f"{module.name}:{node.lineno}", node.value.value) for module in modules
            for node in ast.parse(module.read_text(encoding="utf-8")).body
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str) and WHOLE.match(node.value.value)
            and not re.search(r"\{\w*\}", node.value.value.replace("'{}'", ""))]


def test_every_whole_statement_of_the_store_is_planned_by_postgresql(pg_server: str) -> None:
    """EXPLAIN (parsed, typed, planned, never run), each parameter NULL: a syntax error anywhere fails here."""
    statements = whole_statements()
    assert len(statements) > 50
    refused = []
    with fresh_schema(pg_server) as location, Store(location) as store:
        conn = store.database.conn
        for where, text in statements:
            sql = re.sub(r"%\((\w+)\)s", "NULL", compiled(text, POSTGRES).sql).replace("%%", "%")
            try:
                conn.execute(f"EXPLAIN {sql}")
            except psycopg.Error as exc:
                refused.append(f"{where}: {str(exc).splitlines()[0]}")
    assert refused == []


@pytest.mark.parametrize(("written", "postgres"), [
    ("SELECT a FROM t WHERE id = :id AND run_id = :run", "SELECT a FROM t WHERE id = %(id)s AND run_id = %(run)s"),
    ("UPDATE t SET a = ? WHERE id = ?", "UPDATE t SET a = %(_1)s WHERE id = %(_2)s"),
    ("SELECT ?2, ?1, ?1", "SELECT %(_2)s, %(_1)s, %(_1)s"),
    ("SELECT name FROM t WHERE name NOT LIKE 'sqlite%' AND a = 5 % 2", "SELECT name FROM t WHERE name NOT LIKE 'sqlite%%' AND a = 5 %% 2"),
    ("SELECT ':not_a_name ?', \"a:b\" FROM t", "SELECT ':not_a_name ?', \"a:b\" FROM t"),
    ("SELECT 'it''s :x', x::bigint FROM t", "SELECT 'it''s :x', x::bigint FROM t"),
])
def test_placeholders_become_psycopgs_and_quoted_text_and_casts_stay_as_written(written: str, postgres: str) -> None:
    assert compiled(written, POSTGRES).sql == postgres
    assert compiled(written, SQLITE).sql == written


def test_parameters_by_place_are_named_by_their_place_for_postgresql() -> None:
    statement = compiled("SELECT ?2 + ?1", POSTGRES)
    assert parameters(statement, (10, 20)) == {"_1": 10, "_2": 20}
    assert parameters(compiled("SELECT :a", POSTGRES), {"a": 1}) == {"a": 1}


def test_a_fragment_is_put_in_as_each_dialect_writes_it_nested_ones_too() -> None:
    written = "SELECT @object_agg(stage, @array(@json(result), fingerprint)) FROM results WHERE id IN (@ints(:ids))"
    assert compiled(written, SQLITE).sql == (
        "SELECT json_group_object(stage, json_array(json(result), fingerprint)) FROM results "
        "WHERE id IN (SELECT value FROM json_each(:ids))")
    assert compiled(written, POSTGRES).sql == (
        "SELECT coalesce(CAST(jsonb_object_agg(stage, jsonb_build_array(CAST(result AS jsonb), fingerprint)) AS TEXT), "
        "'{}') FROM results WHERE id IN (SELECT CAST(value AS BIGINT) FROM jsonb_array_elements_text(CAST(%(ids)s AS jsonb)))")


def test_a_json_path_reads_as_postgresqls_path_of_keys_and_places() -> None:
    assert compiled("SELECT @field(job, '$.provider.queue'), @field(v, '$[2]')", POSTGRES).sql == (
        "SELECT (CAST(job AS jsonb) #>> '{provider,queue}'), (CAST(v AS jsonb) #>> '{2}')")
