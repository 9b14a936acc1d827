"""The SQLite idioms PostgreSQL refuses (issue 20, docs/plans/postgres.md §1), found in SQL text.

The store writes its SQL once, in a subset both take; the dialect step translates only what this leaves
(JSON functions, placeholders, PRAGMAs, planner hints). Each idiom is matched in the SQL as written
(``:name``, ``?``) and as SQLite's trace tells it, its parameters filled in (``NULL``, ``'text'``, ``1``).
"""

from __future__ import annotations

import re

#: A parameter, or the value SQLite's trace puts in its place.
VALUE = r"(?::\w+|\?\d*|NULL|'_'|-?\d+(?:\.\d+)?)"

#: Each idiom PostgreSQL refuses, named with its portable form.
IDIOMS = {
    "IS or IS NOT comparing two values (write IS [NOT] DISTINCT FROM)":
        re.compile(r"\bIS\s+(?:NOT\s+)?(?!NULL\b|NOT\b|DISTINCT\b|TRUE\b|FALSE\b)[\w'.:?(]"),
    "a parameter tested for NULL without a type (write CAST(:p AS TEXT) IS NULL)":
        re.compile(rf"(?<![\w.]){VALUE}\s+IS\s+(?:NOT\s+)?NULL\b"),
    "a parameter standing alone as a condition (compare it to a value)":
        re.compile(rf"(?:\b(?:ON|WHERE|AND|OR|(?<!IS )NOT)|\bCASE\s+WHEN)\s+{VALUE}\s*(?:\bAND\b|\bOR\b|\bTHEN\b|\)|;|$)"),
    "a condition summed as a number (write count(*) FILTER (WHERE ...))":
        re.compile(r"\b(?:sum|total|avg)\((?:(?!CASE\b)[^()])*(?:\bIS\b|\bIN\b|[=<>])"),
    "a condition added as a number (write CASE WHEN ... THEN 1 ELSE 0 END)":
        re.compile(r"[-+*/]\s*\((?!\s*SELECT\b)(?:(?!CASE\b)[^()])*(?:\bIS\b|\bIN\b|[=<>])"),
    "min or max of two values (compare them in the statement)":
        re.compile(r"\b(?:min|max)\([^()]*,"),
}


#: A quoted text in SQL, read as ``'_'``: what it says is no SQL.
QUOTED = re.compile(r"'(?:[^']|'')*'")


def refused_idioms(sql: str) -> list[str]:
    """The idioms PostgreSQL refuses that ``sql`` uses, by name."""
    read = QUOTED.sub("'_'", sql)
    return [idiom for idiom, pattern in IDIOMS.items() if pattern.search(read)]


#: SQLite's own SQL that the dialect's fragments (``runner.store.dialect``) stand for, and an upsert's
#: unqualified column beside ``excluded`` (ambiguous on PostgreSQL).
SQLITE_ONLY = {
    "a SQLite JSON function (write a fragment: @ints, @field, @object_agg, ...)":
        re.compile(r"(?<![@\w])json(?:_each|_extract|_group_object|_group_array|_array|_object)?\s*\("),
    "a SQLite planner hint (write @indexed_by(name))": re.compile(r"\bINDEXED\s+BY\b"),
    "a SQLite pragma (write a fragment)": re.compile(r"\bpragma_\w+|\bPRAGMA\b"),
    "an upsert's column added to unqualified (write table.column)":
        re.compile(r"(?<![.\w])(\w+)\s*=\s*\1\s*\+\s*excluded\."),
}


def sqlite_only(sql: str) -> list[str]:
    """The SQL only SQLite takes that ``sql`` (as written in ``runner/store/``) uses, by name."""
    read = QUOTED.sub("'_'", sql)
    return [name for name, pattern in SQLITE_ONLY.items() if pattern.search(read)]
