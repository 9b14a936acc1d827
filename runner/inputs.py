"""Reading a job's input as a stream of records: JSONL, CSV or a SQLite table.

Each reader yields ``(where, record)`` pairs one at a time, ``where`` naming
the line or row for error messages, so that a million-record input never
sits in memory whole.
"""

from __future__ import annotations

import csv
import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import sqlite_utils

from .errors import InputError

Format = Literal["jsonl", "csv", "sqlite"]

SUFFIXES: dict[str, Format] = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".csv": "csv",
    ".db": "sqlite",
    ".sqlite": "sqlite",
    ".sqlite3": "sqlite",
}


@dataclass(frozen=True)
class InputSpec:
    """Where a job's records come from."""

    path: Path
    format: Format
    table: str | None = None

    def describe(self) -> str:
        return f"{self.path}" + (f" table {self.table}" if self.table else "")


def format_of(path: Path) -> Format:
    """The input format named by a file's suffix."""
    try:
        return SUFFIXES[path.suffix.lower()]
    except KeyError:
        known = ", ".join(sorted(SUFFIXES))
        raise InputError(
            f"{path}: cannot tell the input format from the suffix (known: {known})"
        ) from None


def read_records(spec: InputSpec) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield ``(where, record)`` for every record of the input, in order."""
    if not spec.path.is_file():
        raise InputError(f"{spec.path}: input file not found")
    readers = {"jsonl": _jsonl, "csv": _csv, "sqlite": _sqlite}
    return readers[spec.format](spec)


def _jsonl(spec: InputSpec) -> Iterator[tuple[str, dict[str, Any]]]:
    with spec.path.open("rb") as lines:
        for number, raw in enumerate(lines, start=1):
            where = f"{spec.path} line {number}"
            try:
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
                if not line.strip():
                    continue
                record = json.loads(line)
            except UnicodeDecodeError as exc:
                raise InputError(f"{where}: not UTF-8 (byte {exc.start + 1})") from exc
            except json.JSONDecodeError as exc:
                raise InputError(f"{where}: not valid JSON ({exc.msg}, column {exc.pos + 1})") from exc
            if not isinstance(record, dict):
                raise InputError(f"{where}: expected a JSON object, got {type(record).__name__}")
            yield where, record


def _csv(spec: InputSpec) -> Iterator[tuple[str, dict[str, Any]]]:
    with spec.path.open(encoding="utf-8-sig", newline="") as handle:
        reader = csv.DictReader(handle)
        try:
            for record in reader:
                where = f"{spec.path} line {reader.line_num}"
                if None in record:
                    raise InputError(f"{where}: more fields than the header has")
                yield where, dict(record)
        except csv.Error as exc:
            raise InputError(f"{spec.path} line {reader.line_num}: {exc}") from exc
        except UnicodeDecodeError as exc:
            raise InputError(f"{spec.path}: not UTF-8 ({exc.reason})") from exc


def _sqlite(spec: InputSpec) -> Iterator[tuple[str, dict[str, Any]]]:
    if not spec.table:
        raise InputError(f"{spec.path}: a SQLite input needs a table (input = {{ path, table }})")
    try:
        db = sqlite_utils.Database(sqlite3.connect(f"file:{spec.path}?mode=ro", uri=True))
        if not db[spec.table].exists():
            raise InputError(f"{spec.path}: no table {spec.table!r}")
        for number, row in enumerate(db[spec.table].rows, start=1):
            yield f"{spec.path} table {spec.table} row {number}", row
    except sqlite3.DatabaseError as exc:
        raise InputError(f"{spec.path}: cannot read as SQLite ({exc})") from exc
