"""A job file's values read as the types their keys want: the one place every scalar of a job file is checked."""

from __future__ import annotations

import math
import reprlib
from typing import Any

from .errors import JobError

#: How messages name the type a key wants.
TYPE_NAMES: dict[type[Any], str] = {
    str: "a string", int: "an integer", float: "a finite number", bool: "true or false", tuple: "a list of strings",
    dict: "a table",
}
INT64 = range(-(2**63), 2**63)


def typed(value: Any, wanted: type[Any], key: str, where: str) -> Any:
    """A job file value as the type its key wants, or a JobError naming the key and that type.

    The one place every scalar of a job file is checked. An integer serves where
    a number is wanted; integers beyond 64 bits (TOML has none, SQLite stores
    none) and TOML's inf and nan are refused.
    """
    if wanted is float and is_a(value, int) and value in INT64:
        value = float(value)
    if wanted is tuple and isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    if is_a(value, wanted) and (wanted is not float or math.isfinite(value)) and (wanted is not int or value in INT64):
        return value
    raise JobError(f"{where}: {key!r} must be {TYPE_NAMES[wanted]}, not {shown(value)}")


def is_a(value: Any, wanted: type[Any]) -> bool:
    """isinstance, except that true and false are not integers here."""
    return isinstance(value, wanted) and isinstance(value, bool) == (wanted is bool)


def shown(value: Any) -> str:
    """A wrong value as a message shows it: short, and on one line."""
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and value not in INT64:
        return "an integer over 64 bits"
    return reprlib.repr(value)
