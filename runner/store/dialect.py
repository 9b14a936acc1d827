"""The store's SQL, written once, made into each database's own: placeholders and named fragments.

Statements are written in the SQL that SQLite and PostgreSQL both take,
with ``:name``, ``?`` and ``?N`` placeholders. What cannot be written once
is a named fragment, ``@name(arg, ...)`` (arguments are SQL, fragments may
nest): JSON read as rows or fields, JSON built or aggregated, a planner hint,
the claim's row locks. :func:`compiled` makes a statement the database's own,
once per statement (cached): SQLite's fragments put in, or PostgreSQL's, and
for PostgreSQL the placeholders made psycopg's (``%(name)s``; a literal
``%`` doubled), quoted text and ``::`` casts left as they are.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

SQLITE = "sqlite"
POSTGRES = "postgres"


def _path(literal: str) -> str:
    """A SQLite JSON path literal (``'$.a.b'``, ``'$[0]'``) as a PostgreSQL text-array path (``'{a,b}'``)."""
    steps = literal.strip().strip("'").removeprefix("$").replace("[", ".").replace("]", "")
    return "'{" + ",".join(step for step in steps.split(".") if step) + "}'"


def _rows(elements: str, value: str) -> Callable[..., str]:
    """PostgreSQL: a JSON list (at a path) as rows ``(key, value)``, the key its place from 0 (as in ``json_each``)."""

    def rows(source: str, alias: str, path: str = "") -> str:
        listed = f"CAST({source} AS jsonb)" + (f" #> {_path(path)}" if path else "")
        return (f"LATERAL (SELECT ordinality - 1 AS key, {value} AS value FROM {elements}({listed}) "
                f"WITH ORDINALITY AS listed(value, ordinality)) AS {alias}")
    return rows


def _true(source: str, path: str) -> str:
    """PostgreSQL: whether a JSON value at a path is true (``true``, or 1 as SQLite writes it)."""
    return f"((CAST({source} AS jsonb) #>> {_path(path)}) IN ('true', '1'))"


def _each(source: str, alias: str, path: str = "") -> str:
    return f"json_each({source}{', ' + path if path else ''}) AS {alias}"


#: Each fragment's text in each dialect, from its arguments' SQL.
FRAGMENTS: dict[str, dict[str, Callable[..., str]]] = {
    # IN (...) a JSON list parameter: its elements as ids, or as text.
    "ints": {SQLITE: lambda x: f"SELECT value FROM json_each({x})",
             POSTGRES: lambda x: f"SELECT CAST(value AS BIGINT) FROM jsonb_array_elements_text(CAST({x} AS jsonb))"},
    "texts": {SQLITE: lambda x: f"SELECT value FROM json_each({x})",
              POSTGRES: lambda x: f"SELECT value FROM jsonb_array_elements_text(CAST({x} AS jsonb))"},
    # FROM: a JSON list (at a path) as rows (key: its place from 0, value), the value an id, text or JSON.
    "list_of_ints": {SQLITE: _each, POSTGRES: _rows("jsonb_array_elements_text", "CAST(value AS BIGINT)")},
    "list_of_texts": {SQLITE: _each, POSTGRES: _rows("jsonb_array_elements_text", "value")},
    "list_of_json": {SQLITE: _each, POSTGRES: _rows("jsonb_array_elements", "value")},
    # FROM: a JSON object whose keys are ids, as rows (key: the id, value: its value as text).
    "object_by_id": {SQLITE: _each, POSTGRES: lambda x, alias: (
        f"LATERAL (SELECT CAST(key AS BIGINT) AS key, value FROM jsonb_each_text(CAST({x} AS jsonb))) AS {alias}")},
    # A field of a JSON value at a path literal (PostgreSQL: as text), a member by a key, an element by a place.
    "field": {SQLITE: lambda x, path: f"json_extract({x}, {path})",
              POSTGRES: lambda x, path: f"(CAST({x} AS jsonb) #>> {_path(path)})"},
    "member": {SQLITE: lambda x, key: f"json_extract({x}, '$.\"' || {key} || '\"')",
               POSTGRES: lambda x, key: f"(CAST({x} AS jsonb) ->> CAST({key} AS TEXT))"},
    "element": {SQLITE: lambda x, place: f"json_extract({x}, '$[' || {place} || ']')",
                POSTGRES: lambda x, place: f"(CAST({x} AS jsonb) ->> CAST({place} AS INTEGER))"},
    # A JSON true or false (or 1 or 0) at a path literal as 1 or 0 (absent: 0).
    "flag": {SQLITE: lambda x, path: f"coalesce(json_extract({x}, {path}), 0)",
             POSTGRES: lambda x, path: f"(CASE WHEN {_true(x, path)} THEN 1 ELSE 0 END)"},
    # A JSON true or false (or 1 or 0) at a path literal as a condition.
    "truth": {SQLITE: lambda x, path: f"json_extract({x}, {path})",
              POSTGRES: _true},
    # JSON text read as JSON, a JSON list built, and the aggregates that build an object or a list (as text).
    "json": {SQLITE: lambda x: f"json({x})", POSTGRES: lambda x: f"CAST({x} AS jsonb)"},
    "array": {SQLITE: lambda *xs: f"json_array({', '.join(xs)})",
              POSTGRES: lambda *xs: f"jsonb_build_array({', '.join(xs)})"},
    # Of no rows, SQLite's aggregates give an empty object or list: PostgreSQL's are made to as well.
    "object_agg": {SQLITE: lambda k, v: f"json_group_object({k}, {v})",
                   POSTGRES: lambda k, v: f"coalesce(CAST(jsonb_object_agg({k}, {v}) AS TEXT), '{{}}')"},
    "array_agg": {SQLITE: lambda v: f"json_group_array({v})",
                  POSTGRES: lambda v: f"coalesce(CAST(jsonb_agg({v}) AS TEXT), '[]')"},
    # A number's whole part, toward zero (PostgreSQL's CAST to an integer rounds).
    "whole": {SQLITE: lambda x: f"CAST({x} AS INTEGER)", POSTGRES: lambda x: f"CAST(trunc({x}) AS BIGINT)"},
    # A planner hint SQLite needs (PostgreSQL's planner chooses by itself), and the claim's lock on the rows it reads.
    "indexed_by": {SQLITE: lambda name: f"INDEXED BY {name}", POSTGRES: lambda name: ""},
    "claim_lock": {SQLITE: lambda: "", POSTGRES: lambda: "FOR UPDATE SKIP LOCKED"},
    # The names of a table's columns, in their order.
    "columns_of": {SQLITE: lambda table: f"SELECT name FROM pragma_table_info({table})",
                   POSTGRES: lambda table: "SELECT column_name AS name FROM information_schema.columns WHERE "
                   f"table_schema = current_schema() AND table_name = {table} ORDER BY ordinal_position"},
}


#: A fragment's name and its opening parenthesis.
FRAGMENT = re.compile(r"@(\w+)\(")


class Dialects(NamedTuple):
    """A migration written for each database (``migrations.UPGRADES`` holds it, or one list for both)."""

    sqlite: list[str]
    postgres: list[str]


def statements(upgrade: list[str] | Dialects, dialect: str) -> list[str]:
    """A migration's statements for one database."""
    if isinstance(upgrade, Dialects):
        return upgrade.sqlite if dialect == SQLITE else upgrade.postgres
    return upgrade


class Compiled(NamedTuple):
    """A statement in one dialect; ``positional``: its parameters come as a sequence, to be named ``_1``, ``_2``..."""

    sql: str
    positional: bool


def _skip_quoted(sql: str, at: int) -> int:
    """The index after the quoted text (``'...'`` or ``"..."``, a quote inside doubled) that starts at ``at``."""
    quote, end = sql[at], at + 1
    while True:
        end = sql.find(quote, end) + 1
        if not end:  # not closed: quoted to the end
            return len(sql)
        if end < len(sql) and sql[end] == quote:
            end += 1
            continue
        return end


def _arguments(sql: str, at: int) -> tuple[list[str], int]:
    """The arguments of the fragment whose ``(`` is at ``at``, and the index after its ``)``."""
    args, depth, start, i = [], 0, at + 1, at + 1
    while i < len(sql):
        char = sql[i]
        if char in "'\"":
            i = _skip_quoted(sql, i)
            continue
        if char == "(":
            depth += 1
        elif char == ")" and depth:
            depth -= 1
        elif char == ")" or char == "," and not depth:
            args.append(sql[start:i].strip())
            start = i + 1
            if char == ")":
                return [arg for arg in args if arg], i + 1
        i += 1
    raise ValueError(f"a fragment without its closing parenthesis in: {sql}")


def _fragments(sql: str, dialect: str) -> str:
    """The statement with every ``@name(...)`` fragment put in as the dialect writes it."""
    out, i = [], 0
    while i < len(sql):
        char = sql[i]
        if char in "'\"":
            end = _skip_quoted(sql, i)
            out.append(sql[i:end])
            i = end
        elif (fragment := FRAGMENT.match(sql, i)) is not None:
            args, i = _arguments(sql, fragment.end() - 1)
            out.append(FRAGMENTS[fragment.group(1)][dialect](*(_fragments(arg, dialect) for arg in args)))
        else:
            out.append(char)
            i += 1
    return "".join(out)


def _placeholders(sql: str) -> Compiled:
    """PostgreSQL's placeholders for the statement's: ``:name`` -> ``%(name)s``, ``?N`` and ``?`` -> ``%(_N)s``."""
    out, i, asked = [], 0, 0
    positional = False
    while i < len(sql):
        char = sql[i]
        if char in "'\"":
            end = _skip_quoted(sql, i)
            out.append(sql[i:end].replace("%", "%%"))
            i = end
        elif char == ":" and sql.startswith("::", i):
            out.append("::")
            i += 2
        elif char == ":" and i + 1 < len(sql) and (sql[i + 1].isalpha() or sql[i + 1] == "_"):
            end = i + 1
            while end < len(sql) and (sql[end].isalnum() or sql[end] == "_"):
                end += 1
            out.append(f"%({sql[i + 1:end]})s")
            i = end
        elif char == "?":
            end = i + 1
            while end < len(sql) and sql[end].isdigit():
                end += 1
            if end == i + 1:
                asked += 1
                number = asked
            else:
                number = int(sql[i + 1:end])
            out.append(f"%(_{number})s")
            positional = True
            i = end
        elif char == "%":
            out.append("%%")
            i += 1
        else:
            out.append(char)
            i += 1
    return Compiled("".join(out), positional)


@functools.lru_cache(maxsize=4096)
def compiled(sql: str, dialect: str) -> Compiled:
    """The statement as the dialect's database takes it (cached: the store's statements are a few hundred)."""
    if "@" in sql:
        sql = _fragments(sql, dialect)
    if dialect == SQLITE:
        return Compiled(sql, False)
    return _placeholders(sql)


def parameters(statement: Compiled, params: Sequence[Any] | Mapping[str, Any]) -> Any:
    """A statement's parameters as its driver takes them (psycopg: by name, for its ``%(name)s`` placeholders)."""
    if statement.positional:
        return {f"_{number}": value for number, value in enumerate(params, 1)}
    return params


class Compiling:
    """A driver's connection that makes each statement its dialect's own before running it (a ``Conn``)."""

    def __init__(self, conn: Any, dialect: str) -> None:
        self.conn = conn
        self.dialect = dialect

    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = (), /) -> Any:
        statement = compiled(sql, self.dialect)
        return self.conn.execute(statement.sql, parameters(statement, params))

    def executemany(self, sql: str, params: Iterable[Sequence[Any] | Mapping[str, Any]], /) -> Any:
        statement = compiled(sql, self.dialect)
        cursor = self.conn.cursor()
        cursor.executemany(statement.sql, [parameters(statement, each) for each in params])
        return cursor
