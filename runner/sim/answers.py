"""Deterministic model answers that follow the batch protocol.

Every choice is derived from a SHA-256 hash of the item id (and of the
position inside the result), never from Python's ``hash()`` or a random
generator, so the same batch always gets the same answer, in any process.

With a ``json_schema`` response format, each result is generated to satisfy
the per-result schema; without one, each result gets a ``label`` and a
``summary``. :func:`reply` encodes the results as the model's message,
broken or dressed as a content fault of the fault plan says.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping
from typing import Any

from runner import protocol
from runner.sim.faults import DEFAULT_PARTS, Fault

LABELS = ("question", "bug_report", "feature_request", "praise", "complaint", "other")
SUMMARY_WORDS = 8
# How many other choices duplicate_ids tries for a result that differs.
AGAIN_TRIES = 8

Schema = Mapping[str, Any]
#: A message's content: a string, or a list of text parts.
Content = str | list[dict[str, str]]


def answer(
    items: list[dict[str, Any]], response_format: dict[str, Any] | None
) -> list[dict[str, Any]]:
    """One result per item, in the items' order, each with the item's id."""
    schema = result_schema(response_format)
    return [_result(item, schema) for item in items]


def reply(
    items: list[dict[str, Any]],
    response_format: dict[str, Any] | None,
    fault: Fault | None = None,
) -> tuple[Content, str]:
    """The message content and finish reason answering ``items``, as ``fault`` makes them.

    A fault that is not about content leaves the normal answer.
    """
    schema = result_schema(response_format)
    results = [_result(item, schema) for item in items]
    if fault is not None and fault.name in _BREAKERS:
        results = _BREAKERS[fault.name](results, set(fault.targets))
    if fault is not None and fault.name == "duplicate_ids":
        results += [
            _again(item, schema, first)
            for item, first in zip(items, results, strict=True)
            if first["id"] in fault.targets
        ]
    return _dressed(protocol.encode({"results": results}), fault)


def _dressed(text: str, fault: Fault | None) -> tuple[Content, str]:
    """The encoded results as the message content, and the finish reason."""
    if fault is None:
        return text, "stop"
    if fault.name == "malformed":
        # Cut off half-way, as when max_tokens runs out; a strict prefix of
        # a JSON object is never valid JSON.
        return text[: len(text) // 2], "length"
    if fault.name == "fenced":
        return f"```json\n{text}\n```", "stop"
    if fault.name == "content_parts":
        return _parts(text, fault.params.get("parts", DEFAULT_PARTS)), "stop"
    return text, "stop"


def result_schema(response_format: Mapping[str, Any] | None) -> Schema | None:
    """The per-result schema inside a ``json_schema`` response format, if any."""
    if not response_format or response_format.get("type") != "json_schema":
        return None
    try:
        schema = response_format["json_schema"]["schema"]["properties"]["results"]["items"]
    except (KeyError, TypeError):
        return None
    return schema if isinstance(schema, Mapping) else None


def _result(
    item: Mapping[str, Any],
    schema: Schema | None,
    *,
    path: str | None = None,
    text: str | None = None,
) -> dict[str, Any]:
    """The item's result; another ``path`` makes other choices, another ``text`` other words."""
    key = str(item["id"])
    path = key if path is None else path
    text = _summary(item) if text is None else text
    if schema is None:
        return {"id": key, "label": LABELS[_digest(path) % len(LABELS)], "summary": text}
    value = _value(schema, path, text or key)
    fields = value if isinstance(value, dict) else {}
    return {"id": key, **{name: v for name, v in fields.items() if name != "id"}}


def _again(item: Mapping[str, Any], schema: Schema | None, first: dict[str, Any]) -> dict[str, Any]:
    """The item's result made again: other choices where the schema leaves any, else other words."""
    for attempt in range(1, AGAIN_TRIES + 1):
        again = _result(item, schema, path=f"{item['id']}/again{attempt}")
        if again != first:
            return again
    return _result(item, schema, text=f"(again) {_summary(item)}")


def _parts(text: str, count: int) -> list[dict[str, str]]:
    """``text`` cut into ``count`` text parts of about the same length."""
    cuts = [len(text) * n // count for n in range(count + 1)]
    return [{"type": "text", "text": text[a:b]} for a, b in zip(cuts, cuts[1:], strict=False)]


def _summary(item: Mapping[str, Any]) -> str:
    """The first words of the item's longest text field."""
    texts = [v for name, v in item.items() if name != "id" and isinstance(v, str)]
    longest = max(texts, key=len, default="")
    return " ".join(longest.split()[:SUMMARY_WORDS])


def _digest(path: str) -> int:
    return int.from_bytes(hashlib.sha256(path.encode()).digest()[:8], "big")


def _value(schema: Schema, path: str, text: str) -> Any:
    """A value satisfying ``schema``; ``path`` seeds every choice made."""
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        options = list(schema["enum"])
        return options[_digest(path) % len(options)]
    return _GENERATORS[_type_of(schema)](schema, path, text)


def _type_of(schema: Schema) -> str:
    declared = schema.get("type")
    if isinstance(declared, list):
        # A nullable type ["string", "null"] is answered with the real type.
        declared = next((t for t in declared if t != "null"), "null")
    if isinstance(declared, str):
        return declared
    if "properties" in schema or "required" in schema:  # what JSON Schema's keywords of an object imply
        return "object"
    return "array" if "items" in schema else "string"


def _object(schema: Schema, path: str, text: str) -> dict[str, Any]:
    properties: Mapping[str, Schema] = schema.get("properties", {})
    names = [*properties, *(n for n in schema.get("required", []) if n not in properties)]
    return {name: _value(properties.get(name, {}), f"{path}/{name}", text) for name in names}


def _array(schema: Schema, path: str, text: str) -> list[Any]:
    count = max(schema.get("minItems", 0), 1)
    if "maxItems" in schema:
        count = min(count, schema["maxItems"])
    items: Schema = schema.get("items", {})
    return [_value(items, f"{path}/{i}", text) for i in range(count)]


def _string(schema: Schema, path: str, text: str) -> str:
    value = text[: schema.get("maxLength", len(text))]
    return value.ljust(schema.get("minLength", 0), ".")


def _integer(schema: Schema, path: str, text: str) -> int:
    low, high = _bounds(schema)
    return math.ceil(low) + _digest(path) % (math.floor(high) - math.ceil(low) + 1)


def _number(schema: Schema, path: str, text: str) -> float:
    low, high = _bounds(schema)
    return low + (_digest(path) % 1000) / 1000 * (high - low)


def _bounds(schema: Schema) -> tuple[float, float]:
    """``minimum`` and ``maximum``, a span of 100 standing in for a missing one."""
    low = schema.get("minimum", schema.get("maximum", 100) - 100)
    return low, schema.get("maximum", low + 100)


def _boolean(schema: Schema, path: str, text: str) -> bool:
    return _digest(path) % 2 == 0


def _null(schema: Schema, path: str, text: str) -> None:
    return None


_GENERATORS: dict[str, Callable[[Schema, str, str], Any]] = {
    "object": _object,
    "array": _array,
    "string": _string,
    "integer": _integer,
    "number": _number,
    "boolean": _boolean,
    "null": _null,
}


# Content faults: each breaks the results of the target ids.


def _renamed(results: list[dict[str, Any]], ids: set[str]) -> list[dict[str, Any]]:
    return [{**r, "id": f"{r['id']}-x"} if r["id"] in ids else r for r in results]


def _without(results: list[dict[str, Any]], ids: set[str]) -> list[dict[str, Any]]:
    return [r for r in results if r["id"] not in ids]


def _stripped(results: list[dict[str, Any]], ids: set[str]) -> list[dict[str, Any]]:
    """Only the id is kept, so that every other required field is missing."""
    return [{"id": r["id"]} if r["id"] in ids else r for r in results]


_BREAKERS: dict[str, Callable[[list[dict[str, Any]], set[str]], list[dict[str, Any]]]] = {
    "wrong_ids": _renamed,
    "missing_ids": _without,
    "invalid_items": _stripped,
}
