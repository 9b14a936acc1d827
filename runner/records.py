"""Records given in Python (a list of dicts, a pandas DataFrame), written as the JSONL input a job reads.

The core streams items from a file, so :func:`job_input` writes records
beside the store (``<db>.inputs/<run>.jsonl``), rewriting the file only when
its text changed, and returns the job's ``input`` section; a path is passed
through as it is. :func:`added_input` does the same for records added to a
run (``<db>.inputs/added/<run>.jsonl``). Dates are written as ISO text, numpy scalars as numbers;
anything else that is not JSON is refused with the record's number.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .errors import JobError
from .location import StoreLocation, named


def job_input(items: object, name: str, db: StoreLocation, key: str, table: str | None) -> dict[str, Any]:
    """The job's ``input``: a file as given, or records written as JSONL beside the store."""
    if isinstance(items, str | Path):
        return {"path": str(items), **({"table": table} if table else {})}
    folder = _beside(db)
    return {"path": str(_written(items, key, folder.parent / f"{folder.name}.inputs", name)), "format": "jsonl"}


def added_input(items: object, name: str, db: StoreLocation, key: str) -> Path:
    """The file of records added to a run (``Run.add``): a file as given, or records written as JSONL beside the
    store, apart from the runs' own inputs (``<db>.inputs/added/<run>.jsonl``)."""
    if isinstance(items, str | Path):
        return Path(items)
    folder = _beside(db)
    return _written(items, key, folder.parent / f"{folder.name}.inputs" / "added", name)


def _beside(db: StoreLocation) -> Path:
    """The store file the records are written beside; a database on a server has none (not built yet)."""
    if not isinstance(db, Path):
        raise JobError(f"records given in Python are written beside a SQLite store; {named(db)} is a PostgreSQL "
                       "database: give the items as a file's path (items='posts.jsonl')")
    return db


def _written(items: object, key: str, folder: Path, name: str) -> Path:
    """Records written as ``<folder>/<name>.jsonl``, the file rewritten only when its text changed."""
    path = folder / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}.jsonl"
    text = _frame_jsonl(items, key) if _is_frame(items) else _records_jsonl(items)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
    return path


def _is_frame(items: object) -> bool:
    return type(items).__module__.partition(".")[0] == "pandas" and hasattr(items, "to_json")


def _frame_jsonl(frame: Any, key: str) -> str:
    if key not in frame.columns and frame.index.name == key:
        frame = frame.reset_index()
    text: str = frame.to_json(orient="records", lines=True, date_format="iso", force_ascii=False)
    return text if not text or text.endswith("\n") else text + "\n"


def _records_jsonl(items: object) -> str:
    if not isinstance(items, Iterable) or isinstance(items, Mapping):
        raise JobError(f"items must be a list of dicts, a DataFrame or a path, not {type(items).__name__}")
    lines = []
    for number, record in enumerate(items, start=1):
        if not isinstance(record, Mapping):
            raise JobError(f"item {number}: expected a dict, got {type(record).__name__}")
        try:
            lines.append(json.dumps(dict(record), ensure_ascii=False, allow_nan=False, default=_jsonable) + "\n")
        except (TypeError, ValueError) as exc:
            raise JobError(f"item {number}: cannot be sent as JSON ({exc})") from exc
    return "".join(lines)


def _jsonable(value: Any) -> Any:
    """Dates as ISO text, numpy scalars as Python numbers; anything else is refused."""
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON")
