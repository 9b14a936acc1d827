"""A run's items written out as rows, a page of the store at a time: JSONL, CSV or Parquet.

One row per item, as JSONL writes it::

    {"key", "group", "state", <the result's fields>, "input": {<the fields sent>},
     "kind", "message", "attempts", "paid_calls", "maybe_paid", "not_billed", "reused", "tokens_in", "tokens_out",
     "cost"}

A pipeline's row (a job of ``[[stage]]`` tables) has, in place of the result's
fields, the ``stage`` the item is at and one group per stage it passed, in the
job's stage order: ``{"classify": {"label": ...}, "extract": {...}}`` (flat:
``classify.label``; the flat columns too come in stage order, whichever item
had them first). A decide stage's group says the person's decision:
``{"approved": true, <the data approved with>}``, and ``{"approved": false}``
for an item rejected there (flat: ``review.approved``).

An item that is not completed has no result fields; ``kind`` and ``message``
say why a failed item failed. A result field named like one of the row's own
columns is kept as ``result.<name>``, and the result's ``id`` (the key) is
left out. CSV, Parquet and the notebook's ``run.results()`` take the row flat:
nested objects as dotted columns (``input.title``, ``address.city``), lists as
JSON text in CSV and Parquet.

Memory stays bounded whatever the run's size: each page read from the store is
written before the next is read. CSV and Parquet need their columns before the
first row, so they read the run twice; the first pass keeps only the column
names and the types of their values.
"""

from __future__ import annotations

import csv
import importlib
import io
import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from itertools import chain
from pathlib import Path
from typing import IO, Any, NamedTuple

from .errors import ExportError
from .model import FailureKind
from .rules.deciding import DECIDE
from .store import Store, views
from .words import plural

FORMATS = ("jsonl", "csv", "parquet")
#: Items read from the store at a time.
PAGE = 1_000
#: The row's own columns: before the result's fields, and after the input's.
HEAD = ("key", "group", "state")
#: The charges (issue 18): calls billed (``paid_calls``), unknown (``maybe_paid``) and not billed, the item's share
#: of its batches' tokens, and its cost in USD (empty when unknown: a call with no usage or no price); ``reused``
#: (issue 19): the results it took from the same work with no call (``[cache] reuse``).
TAIL = ("kind", "message", "attempts", "paid_calls", "maybe_paid", "not_billed", "reused", "tokens_in", "tokens_out",
        "cost")
OWN = frozenset((*HEAD, "input", *TAIL))


def write(store: Store, name: str, out: str, *, fmt: str = "jsonl", state: str = "all", archived: bool = False) -> int:
    """Write run ``name``'s items in ``state`` to the file ``out`` (``-``: stdout) as ``fmt``; how many rows.
    ``archived``: the items of the run's archive (``runner archive``), in the same columns."""
    writer = _writer(fmt)
    _check_state(state)
    store.run_id(name)
    with _opened(out) as stream:
        return writer(store, name, state, stream, archived)


def archive_note(store: Store, name: str, *, archived: bool) -> str | None:
    """What an export of no row says when the run's archive holds items (None: it holds none, or it was read)."""
    held = 0 if archived else store.archived_count(store.run_id(name))
    if not held:
        return None
    return (f"its archive holds {plural(held, 'item')} of run {name!r} (runner archive); "
            f"export {'it' if held == 1 else 'them'} with --archived")


def rows(store: Store, name: str, *, state: str = "all", archived: bool = False) -> Iterator[dict[str, Any]]:
    """Every item of run ``name`` in ``state`` (completed, failed or all) as an export row, in the order added."""
    return chain.from_iterable(pages(store, name, state=state, archived=archived))


def pages(
    store: Store, name: str, *, state: str = "all", size: int = PAGE, archived: bool = False
) -> Iterator[list[dict[str, Any]]]:
    """The export rows of run ``name``, ``size`` items at a time, each page read from the store when asked for."""
    _check_state(state)
    run_id = store.run_id(name)
    staged = views.staged(store, run_id)
    shape = _shape(store, run_id) if staged else Shape({}, frozenset())
    after = 0
    while items := views.export_page(store, run_id, state=state, after=after, limit=size, staged=staged,
                                     archived=archived):
        yield [_staged_row(item, shape) if staged else _row(item) for item in items]
        after = items[-1]["id"]


class Shape(NamedTuple):
    """A pipeline's stages as its export places them: each stage's place in order, and its decide stages."""

    places: dict[str, int]
    decide: frozenset[str]


def _shape(store: Store, run_id: int) -> Shape:
    stages = views.stage_kinds(store, run_id)
    return Shape({name: n for n, (name, _) in enumerate(stages)},
                 frozenset(name for name, kind in stages if kind == DECIDE))


def flat(row: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A row with its nested objects as dotted columns: ``{"input": {"title": t}}`` is ``{"input.title": t}``."""
    out: dict[str, Any] = {}
    for name, value in row.items():
        if isinstance(value, dict) and value:
            out.update(flat(value, f"{prefix}{name}."))
        else:
            out[prefix + name] = value
    return out


def columns(store: Store, name: str, *, state: str, archived: bool = False) -> dict[str, set[str]]:
    """The flat columns of an export, in the row's order, each with the type names of its values (None left out);
    with no row, the row's own columns."""
    run_id = store.run_id(name)
    staged = views.staged(store, run_id)
    own = (*HEAD, *(("stage",) if staged else ()), *TAIL)  # every row has them: the header of an export of none
    seen: dict[str, set[str]] = {column: set() for column in own}
    places = _shape(store, run_id).places if staged else {}
    for row in rows(store, name, state=state, archived=archived):
        for column, value in flat(row).items():
            types = seen.setdefault(column, set())
            if value is not None:
                types.add(type(value).__name__)
    ordered = sorted(seen, key=lambda column: _section(column, places))
    return {column: seen[column] for column in ordered}


def _row(item: Mapping[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {column: item[column] for column in HEAD}
    result = json.loads(item["result"]) if item["result"] is not None else {}
    for field, value in result.items() if isinstance(result, dict) else [("result", result)]:
        if field == "id" and value == item["key"]:
            continue
        row[f"result.{field}" if field in OWN else field] = value
    row["input"] = {field: value for field, value in json.loads(item["input"]).items() if field != "id"}
    return row | {column: item[column] for column in TAIL}


def _staged_row(item: Mapping[str, Any], shape: Shape) -> dict[str, Any]:
    """A pipeline's row: its stage, then each passed stage's result under the stage's name (the key left out), in
    stage order; a decide stage's as the decision (approved, with its data; rejected)."""
    row: dict[str, Any] = {column: item[column] for column in HEAD} | {"stage": item["stage"]}
    if item["parent"] is not None:  # a sub-item of a fan-out
        row["parent"] = item["parent"]
    results = json.loads(item["stages"])
    if item["kind"] == FailureKind.REJECTED and item["stage"] in shape.decide:
        results[item["stage"]] = {"approved": False}
    for stage in sorted(results, key=lambda stage: shape.places.get(stage, len(shape.places))):
        result = results[stage]
        if stage in shape.decide and isinstance(result, dict) and "approved" not in result:
            result = {"approved": True, **result}  # data of its own "approved" is kept as the person typed it
        row[stage] = {f: v for f, v in result.items() if (f, v) != ("id", item["key"])} if isinstance(
            result, dict) else result
    row["input"] = {field: value for field, value in json.loads(item["input"]).items() if field != "id"}
    return row | {column: item[column] for column in TAIL}


def _section(column: str, places: Mapping[str, int]) -> tuple[int, int]:
    """Where a flat column stands: the row's head, the result's fields (a pipeline's by its stage's place), the
    input's, the row's tail."""
    if column in HEAD or column in ("stage", "parent"):
        return 0, 0
    if column in TAIL:
        return 3, 0
    if column.startswith("input.") or column == "input":
        return 2, 0
    return 1, places.get(column.partition(".")[0], len(places))


def _check_state(state: str) -> None:
    if state not in views.EXPORT_STATES:
        raise ExportError(f"unknown state {state!r}: one of {', '.join(views.EXPORT_STATES)}")


Writer = Callable[[Store, str, str, IO[bytes], bool], int]


def _writer(fmt: str) -> Writer:
    if fmt == "jsonl":
        return _jsonl
    if fmt == "csv":
        return _csv
    if fmt == "parquet":
        _import("pyarrow.parquet")
        return _parquet
    raise ExportError(f"unknown format {fmt!r}: one of {', '.join(FORMATS)}")


def _jsonl(store: Store, name: str, state: str, out: IO[bytes], archived: bool) -> int:
    count = 0
    for page in pages(store, name, state=state, archived=archived):
        out.write("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in page).encode())
        count += len(page)
    return count


def _csv(store: Store, name: str, state: str, out: IO[bytes], archived: bool) -> int:
    text = io.TextIOWrapper(out, encoding="utf-8", newline="", write_through=True)
    table = csv.DictWriter(text, list(columns(store, name, state=state, archived=archived)))
    table.writeheader()
    count = 0
    for page in pages(store, name, state=state, archived=archived):
        table.writerows({column: _text(value) for column, value in flat(row).items()} for row in page)
        count += len(page)
    text.detach()  # the stream stays open for whoever opened it
    return count


def _text(value: Any) -> Any:
    """A cell as JSON would spell it (true, 1.5, [..]), text as it is, nothing for null."""
    return value if isinstance(value, str) or value is None else json.dumps(value, ensure_ascii=False)


def _parquet(store: Store, name: str, state: str, out: IO[bytes], archived: bool) -> int:
    arrow = _import("pyarrow")
    schema = arrow.schema([(column, _arrow_type(arrow, types)) for column, types in
                           columns(store, name, state=state, archived=archived).items()])
    as_text = {field.name for field in schema if field.type == arrow.string()}
    count = 0
    with _import("pyarrow.parquet").ParquetWriter(out, schema) as parquet:
        for page in pages(store, name, state=state, archived=archived):
            cells = [{c: _text(v) if c in as_text else v for c, v in flat(row).items()} for row in page]
            parquet.write_table(arrow.Table.from_pylist(cells, schema=schema))
            count += len(page)
    return count


def _arrow_type(arrow: Any, types: set[str]) -> Any:
    """A column's Parquet type from the types of its values; anything mixed or nested is JSON text."""
    if types == {"bool"}:
        return arrow.bool_()
    if types == {"int"}:
        return arrow.int64()
    if types and types <= {"int", "float"}:
        return arrow.float64()
    return arrow.string()


def _import(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ExportError("parquet needs pyarrow, which is not installed: pip install pyarrow") from None


@contextmanager
def _opened(out: str) -> Iterator[IO[bytes]]:
    """Stdout for ``-``; a device or pipe (``/dev/null``, a FIFO) written as it is; else a file written beside
    ``out`` and moved there whole, so a failed export leaves none."""
    if out == "-":
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    path = Path(out)
    whole = not path.exists() or path.is_file()
    target = path.with_name(f".{path.name}.part") if whole else path
    try:
        with target.open("wb") as stream:
            yield stream
        if whole:
            os.replace(target, path)
    except OSError as exc:
        raise ExportError(f"cannot write {out}: {exc.strerror or exc}") from exc
    finally:
        if whole:
            target.unlink(missing_ok=True)
