"""The batch protocol: how a batch of items travels to the model and back.

The user message carries the batch's items as a JSON array of objects, each
with its ``"id"`` (the item key) and its fields. The model answers one JSON
object ``{"results": [{"id": "<key>", ...}, ...]}``. A result is valid when
its id belongs to the batch and it passes the job's output schema, if any.

Both the provider and the simulator use these functions, so that what the
engine counts as a batch's size is exactly what the upstream receives.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_SYSTEM = (
    "You process records in batches. For every record in the user's JSON array, "
    'return one result with the same "id". Answer with one JSON object: '
    '{"results": [{"id": "<id>", ...}, ...]} and nothing else.'
)
DEFAULT_USER = "{instructions}\n\nRecords:\n{items}"

BATCH_SCHEMA_NAME = "batch_results"


def item_payload(key: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    """The object that stands for one item in the user message."""
    return {"id": key, **{k: v for k, v in fields.items() if k != "id"}}


#: One encoder for every call: ``json.dumps`` with options builds a new one each time.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def encode(value: Any) -> str:
    """Compact JSON, non-ASCII kept as is: the form items are sent and sized in."""
    return _ENCODER.encode(value)


def item_chars(payload: Mapping[str, Any]) -> int:
    """The size of one item as it is sent: the length of its compact JSON."""
    return len(encode(payload))


def user_message(template: str, instructions: str, payloads: Iterable[Mapping[str, Any]]) -> str:
    """Fill the user template with the instructions and the batch's JSON array."""
    return template.replace("{instructions}", instructions).replace(
        "{items}", encode(list(payloads))
    )


def batch_response_format(result_schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """The OpenAI ``response_format`` asking for ``{"results": [...]}``."""
    if result_schema is None:
        return {"type": "json_object"}
    return {
        "type": "json_schema",
        "json_schema": {
            "name": BATCH_SCHEMA_NAME,
            "schema": {
                "type": "object",
                "properties": {"results": {"type": "array", "items": dict(result_schema)}},
                "required": ["results"],
            },
        },
    }


def find_items(text: str) -> list[dict[str, Any]] | None:
    """The first JSON array of objects with an ``"id"`` in a user message."""
    decoder = json.JSONDecoder()
    start = text.find("[")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            value = None
        if isinstance(value, list) and value and all(
            isinstance(v, dict) and isinstance(v.get("id"), str) for v in value
        ):
            return value
        start = text.find("[", start + 1)
    return None


@dataclass(frozen=True)
class ParsedBatch:
    """A model answer split by item: results by key, and what was wrong."""

    results: dict[str, dict[str, Any]]
    problem: str | None


def parse_results(content: str | None, keys: Iterable[str]) -> ParsedBatch:
    """Split the model's answer into one result per batch key.

    ``problem`` is set when the answer as a whole cannot be used (not JSON,
    no ``results`` list); results whose id is not in the batch are dropped,
    so that a missing key shows up as a missing result. A numeric id is
    matched as text (models often write ``1`` for ``"1"``).
    """
    wanted = set(keys)
    if not content:
        return ParsedBatch({}, "empty answer")
    try:
        body = json.loads(content)
    except json.JSONDecodeError as exc:
        return ParsedBatch({}, f"answer is not JSON ({exc.msg} at char {exc.pos})")
    if not isinstance(body, dict) or not isinstance(body.get("results"), list):
        return ParsedBatch({}, 'answer has no "results" list')
    results: dict[str, dict[str, Any]] = {}
    for result in body["results"]:
        if not isinstance(result, dict):
            continue
        key = result.get("id")
        if isinstance(key, int) and not isinstance(key, bool):
            key = str(key)
        if isinstance(key, str) and key in wanted:
            results.setdefault(key, {**result, "id": key})
    return ParsedBatch(results, None)
