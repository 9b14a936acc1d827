"""A job file read as TOML: every problem one JobError saying what and where.

A key or a table given twice is named with both its lines; tomllib names only
the second, so the first is found by parsing the lines before it again.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path
from typing import Any

from .errors import JobError
from .inputs import not_utf8

#: How tomllib says that a key or a table is given twice, and the line of the second.
TWICE = re.compile(r"(Cannot overwrite a value|Cannot declare .* twice) \(at line (\d+), column \d+\)")


def read(path: Path) -> dict[str, Any]:
    """The parsed TOML of the job file at ``path``."""
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except FileNotFoundError:
        raise JobError(f"{path}: job file not found") from None
    except OSError as exc:
        raise JobError(f"{path}: cannot read the job file ({exc.strerror})") from exc
    except UnicodeDecodeError as exc:
        raise JobError(not_utf8(path)) from exc
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise JobError(f"{path}: {_given_twice(text, str(exc)) or f'not valid TOML: {exc}'}") from exc
    except ValueError as exc:  # the only other one: an integer over Python's digit limit
        raise JobError(f"{path}: not valid TOML: a number longer than {sys.get_int_max_str_digits()} digits") from exc
    except RecursionError as exc:
        raise JobError(f"{path}: not valid TOML: arrays or tables nested too deeply") from exc


def _given_twice(text: str, error: str) -> str | None:
    """``key 'name' set twice, on line 1 and on line 3``; None for another error, or a first line not found.

    The second line is parsed after fewer and fewer of the lines before it:
    the first line whose removal lets it parse is where the key was set first.
    """
    lines = [line + "\n" for line in text.split("\n")]  # as tomllib counts them: \u2028 in a string is no line end
    found = TWICE.fullmatch(error)
    if found is None or int(found[2]) > len(lines):
        return None
    again = int(found[2])
    second = lines[again - 1]
    kept = again - 1
    while kept > 0 and _fails(lines[: kept - 1] + [second], found[1]):
        kept -= 1
    if kept == 0 or _fails(lines[: kept - 1] + [second], None):
        return None  # the second line alone does not parse (a value over several lines): no first line to name
    name = second.split("=")[0].strip()
    said = f"table {name}" if name.startswith("[") else f"key {name!r}"
    return f"{said} set twice, on line {kept} and on line {again}"


def _fails(lines: list[str], alike: str | None) -> bool:
    """Whether these lines fail to parse: with the same error as ``alike``, or (None) with any error."""
    try:
        tomllib.loads("".join(lines))
    except (tomllib.TOMLDecodeError, ValueError, RecursionError) as exc:
        return alike is None or str(exc).startswith(alike)
    return False
