"""Reading a job's input as a stream of records: JSONL, CSV or a SQLite table.

Each reader yields ``(where, record)`` pairs one at a time, ``where`` naming
the line or row for error messages, so that a million-record input never
sits in memory whole.
"""

from __future__ import annotations

import csv
import hashlib
import itertools
import json
import math
import os
import sqlite3
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from .errors import InputError
from .protocol import STRICT_JSON, NotANumber

Format = Literal["jsonl", "csv", "sqlite"]

SUFFIXES: dict[str, Format] = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".csv": "csv",
    ".db": "sqlite",
    ".sqlite": "sqlite",
    ".sqlite3": "sqlite",
}

#: Records nested deeper are refused. Far below Python's recursion limit, so that
#: a record read here can be parsed and encoded again anywhere in the engine.
MAX_DEPTH = 128


#: ``json.loads``'s own decoder, called without the checks of its argument and options (a microsecond a
#: record); ``NaN``, ``Infinity`` and numbers a float cannot hold refused (``protocol.NotANumber``).
_decode = STRICT_JSON.decode


@dataclass(frozen=True)
class InputSpec:
    """Where a job's records come from."""

    path: Path
    format: Format
    table: str | None = None

    def describe(self) -> str:
        return f"{self.path}" + (f" table {self.table}" if self.table else "")

    def require(self) -> None:
        """Refuse an input file that is not there (InputError), before anything is read or made."""
        if not self.path.is_file():
            raise InputError(f"{self.path}: input file not found")

    def fingerprint(self) -> Fingerprint | None:
        """The input file's fingerprint; None for no file, or a SQLite input (always read: changes may sit in its -wal)."""
        if self.format == "sqlite" or not self.path.is_file():
            return None
        path = self.path.resolve()
        with path.open("rb") as file:
            stat = os.fstat(file.fileno())
            # The inode and change time too: a tool that puts the mtime back (touch -r, cp -p, rsync -t) moves them.
            digest = hashlib.sha256(f"{stat.st_ino}:{stat.st_ctime_ns}:".encode())
            digest.update(file.read(FINGERPRINT_WINDOW))
            if stat.st_size > FINGERPRINT_WINDOW:
                file.seek(max(FINGERPRINT_WINDOW, stat.st_size - FINGERPRINT_WINDOW))
                digest.update(file.read(FINGERPRINT_WINDOW))
        return Fingerprint(str(path), stat.st_size, stat.st_mtime_ns, digest.hexdigest())


#: Bytes hashed at each end of an input file for its fingerprint.
FINGERPRINT_WINDOW = 64 * 1024


@dataclass(frozen=True)
class Fingerprint:
    """An input file as it was when read: when any of its parts differs, it is read again.

    ``digest`` hashes the file's inode and change time and its first and
    last ``FINGERPRINT_WINDOW`` bytes (the whole of a smaller file): a full
    hash would cost the full read it saves. Any write moves the change time,
    even one whose tool puts the mtime back; only a change in the middle of
    a large file with the clock itself set back could go unseen.
    """

    path: str
    size: int
    mtime_ns: int
    digest: str


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
    spec.require()
    readers = {"jsonl": _jsonl, "csv": _csv, "sqlite": _sqlite}
    return readers[spec.format](spec)


def _jsonl(spec: InputSpec) -> Iterator[tuple[str, dict[str, Any]]]:
    line = f"{spec.path} line "
    with spec.path.open("rb") as lines:
        for number, raw in enumerate(lines, start=1):
            where = f"{line}{number}"
            record = _json_record(raw, where, bom=number == 1)
            if record is not None:
                yield where, record


def _json_record(raw: bytes, where: str, *, bom: bool) -> dict[str, Any] | None:
    """One JSONL line as a record, None for a blank line."""
    try:
        line = raw.decode("utf-8-sig" if bom else "utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{where}: not UTF-8 (byte {exc.start + 1})") from exc
    if not line or line.isspace():  # not strip(): no copy of every line
        return None
    try:
        if line[0] == "\ufeff":  # as json.loads refuses it
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", line, 0)
        record = _decode(line)
    except json.JSONDecodeError as exc:
        raise InputError(f"{where}: not valid JSON ({exc.msg}, column {exc.pos + 1})") from exc
    except RecursionError as exc:
        raise InputError(f"{where}: nested deeper than {MAX_DEPTH} levels") from exc
    except NotANumber as exc:
        raise InputError(f"{where}: {exc} is not a JSON number (NaN and infinities cannot be sent)") from exc
    except ValueError as exc:  # the only other one: an integer over Python's digit limit
        raise InputError(f"{where}: a number longer than {sys.get_int_max_str_digits()} digits") from exc
    if not isinstance(record, dict):
        raise InputError(f"{where}: expected a JSON object, got {type(record).__name__}")
    # Both checks walk the record, so a cheap look at the line decides whether they are needed.
    if line.count("[") + line.count("{") > MAX_DEPTH and _depth(record) > MAX_DEPTH:
        raise InputError(f"{where}: nested deeper than {MAX_DEPTH} levels")
    if "\\u" in line:
        _refuse_lone_surrogates(record, where)
    return record


def _depth(value: Any) -> int:
    """How many arrays and objects deep a JSON value goes, counted without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


def _refuse_lone_surrogates(record: dict[str, Any], where: str) -> None:
    """Refuse text holding half a UTF-16 pair (from an escape such as \\ud800): it is not UTF-8."""
    try:
        json.dumps(record, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        half = ord(exc.object[exc.start])
        raise InputError(f"{where}: \\u{half:04x} is half of a UTF-16 surrogate pair, not a character") from exc


def _csv(spec: InputSpec) -> Iterator[tuple[str, dict[str, Any]]]:
    with spec.path.open(encoding="utf-8-sig", newline="") as handle:
        try:
            yield from _csv_records(spec.path, handle)
        except UnicodeDecodeError as exc:
            raise InputError(not_utf8(spec.path)) from exc


def _csv_records(path: Path, lines: Iterable[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Records as header name to field, each named by the line it starts on."""
    # strict: at the end of the file (or at the field size limit) inside a quoted field,
    # the csv module raises instead of returning that field holding every later line.
    reader = csv.reader(lines, strict=True)
    header: list[str] | None = None
    while True:
        first = reader.line_num + 1
        try:
            row = next(reader, None)
        except csv.Error as exc:
            raise _csv_error(path, first, reader.line_num, exc) from exc
        if row is None:
            return
        where = f"{path} line {first}"
        if not row:
            continue  # a blank line
        if header is None:
            header = _csv_header(row, where)
        elif len(row) != len(header):
            raise InputError(f"{where}: expected {len(header)} fields as in the header, got {len(row)}")
        else:
            yield where, dict(zip(header, row))


def _csv_header(row: list[str], where: str) -> list[str]:
    seen: set[str] = set()
    for name in row:
        if name in seen:
            raise InputError(f"{where}: the header names the column {name!r} twice")
        seen.add(name)
    return row


def _csv_error(path: Path, first: int, last: int, exc: csv.Error) -> InputError:
    """The error for a record the csv module refused, naming the line its open quote is on."""
    with path.open(encoding="utf-8-sig", newline="") as handle:
        opened, still_open = _open_quote(itertools.islice(handle, first - 1, last), first)
    if still_open:
        return InputError(f"{path} line {opened}: a quoted field opens here and is not closed ({exc})")
    inside = f", in a quoted field that opened on line {opened}" if opened < last else ""
    return InputError(f"{path} line {last}: bad quoting ({exc}){inside}")


def _open_quote(lines: Iterable[str], first: int) -> tuple[int, bool]:
    """The line where a record's last quoted field opened, and whether it is still open after ``lines``.

    The csv module's own quote states (default dialect), followed here only
    because the module does not say where a quoted field began.
    """
    opened, state = first, "start"
    for number, line in enumerate(lines, start=first):
        for char in line:
            if state == "quoted":
                state = "quote" if char == '"' else "quoted"
            elif char in ",\r\n":
                state = "start"
            elif char == '"' and state in ("start", "quote"):
                opened = number if state == "start" else opened
                state = "quoted"
            else:
                state = "field"
    return opened, state == "quoted"


def not_utf8(path: Path) -> str:
    """The message for a text file that is not UTF-8, naming the first line that is not."""
    with path.open("rb") as lines:
        for number, raw in enumerate(lines, start=1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                return f"{path} line {number}: not UTF-8 (byte {exc.start + 1})"
    return f"{path}: not UTF-8"


def _sqlite(spec: InputSpec) -> Iterator[tuple[str, dict[str, Any]]]:
    if not spec.table:
        raise InputError(f"{spec.path}: a SQLite input needs a table (input = {{ path, table }})")
    import sqlite_utils  # here, not at the top: it imports pandas and numpy whenever they are installed

    try:
        db = sqlite_utils.Database(sqlite3.connect(f"file:{spec.path}?mode=ro", uri=True))
        if not db[spec.table].exists():
            raise InputError(f"{spec.path}: no table {spec.table!r}")
        for number, row in enumerate(db[spec.table].rows, start=1):
            where = f"{spec.path} table {spec.table} row {number}"
            for column, value in row.items():
                if isinstance(value, float) and not math.isfinite(value):
                    raise InputError(f"{where}: column {column!r} is {value}, not a JSON number "
                                     "(NaN and infinities cannot be sent)")
            yield where, row
    except sqlite3.DatabaseError as exc:
        raise InputError(f"{spec.path}: cannot read as SQLite ({exc})") from exc
