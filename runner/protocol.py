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
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
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


#: One encoder for every call: ``json.dumps`` with options builds a new one each time. NaN and infinities are
#: not JSON (an upstream answers 400): the inputs refuse them, and the encoder too.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class NotANumber(ValueError):
    """``NaN``, ``Infinity`` or a number too large for a float: not JSON, and refused by every upstream."""


def _no_constant(name: str) -> float:
    raise NotANumber(name)


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise NotANumber(text)
    return number


#: A decoder of JSON as it is written: ``NaN``, ``Infinity`` and numbers no float holds are ``NotANumber``.
STRICT_JSON = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite)


def encode(value: Any) -> str:
    """Compact JSON, non-ASCII kept as is: the form items are sent and sized in."""
    return _ENCODER.encode(value)


def item_chars(payload: Mapping[str, Any]) -> int:
    """The size of one item as it is sent: the length of its compact JSON."""
    return len(encode(payload))


@dataclass(frozen=True)
class BatchItems:
    """A batch's items as the store keeps them: each the compact JSON (``encode``) of its payload, and no more.

    Providers take what they need of it: a chat call joins the texts into
    the user message's array as they are (``array``), a Batch API file puts
    each on its own line, a user's handler gets the payloads decoded anew
    (``payloads``), free to change them.
    """

    texts: list[str]

    @classmethod
    def of(cls, payloads: Iterable[Mapping[str, Any]]) -> BatchItems:
        """The items of ``payloads``, encoded as the store keeps them."""
        return cls([encode(payload) for payload in payloads])

    def payloads(self) -> list[dict[str, Any]]:
        """The items' payloads, decoded anew."""
        return [json.loads(text) for text in self.texts]

    def array(self) -> str:
        """The JSON array of the payloads (``encode(self.payloads())``), joined from the texts."""
        return f"[{','.join(self.texts)}]"


def user_message(template: str, instructions: str, items_json: str) -> str:
    """Fill the user template with the instructions and the batch's JSON array (``items_json``)."""
    return template.replace("{instructions}", instructions).replace("{items}", items_json)


def batch_schema(result_schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """The JSON Schema of a whole answer, ``{"results": [...]}``, each result under ``result_schema`` if given."""
    results: dict[str, Any] = {"type": "array"}
    if result_schema is not None:
        results["items"] = dict(result_schema)
    return {"type": "object", "properties": {"results": results}, "required": ["results"]}


def batch_response_format(result_schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """The OpenAI ``response_format`` asking for ``{"results": [...]}``."""
    if result_schema is None:
        return {"type": "json_object"}
    return {"type": "json_schema", "json_schema": {"name": BATCH_SCHEMA_NAME, "schema": batch_schema(result_schema)}}


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
    """A model answer split by item: results by key, what was wrong as a whole, and per key."""

    results: dict[str, dict[str, Any]]
    problem: str | None
    #: Keys the answer gave disagreeing results for, and why: those keys are not in ``results``.
    contradictions: dict[str, str] = field(default_factory=dict)


#: A Markdown code fence, with or without a language tag: models often wrap their JSON in one.
_FENCE = re.compile(r"```[\w+-]*[ \t]*")


def parse_results(content: object, keys: Iterable[str]) -> ParsedBatch:
    """Split the model's answer into one result per batch key.

    ``problem`` is set when the answer as a whole cannot be used (not text,
    not JSON, no ``results`` list); JSON inside a Markdown code fence is read
    as JSON. Results whose id is not in the batch are dropped, so that a
    missing key shows up as a missing result. A numeric id is matched as
    text (models often write ``1`` for ``"1"``). A key given results that
    differ is a contradiction, not a result; copies of one result are one.
    """
    if content is None or content == "":
        return ParsedBatch({}, "empty answer")
    if not isinstance(content, str):
        return ParsedBatch({}, f"answer is not text but {type(content).__name__}")
    body, problem = _json_of(content)
    if problem is not None:
        return ParsedBatch({}, problem)
    if not isinstance(body, dict) or not isinstance(body.get("results"), list):
        return ParsedBatch({}, 'answer has no "results" list')
    wanted = set(keys)
    given: dict[str, list[dict[str, Any]]] = {}
    for result in body["results"]:
        key = _key_of(result)
        if key in wanted:
            given.setdefault(key, []).append({**result, "id": key})
    results = {key: copies[0] for key, copies in given.items() if all(c == copies[0] for c in copies)}
    contradictions = {
        key: f'the answer gave {len(copies)} results for id "{key}" that disagree'
        for key, copies in given.items() if key not in results
    }
    return ParsedBatch(results, None, contradictions)



def _json_of(text: str) -> tuple[Any, str | None]:
    """The JSON value of an answer, or of its first code fence that holds one; else why not."""
    try:
        return STRICT_JSON.decode(text), None
    except json.JSONDecodeError as exc:
        problem = f"answer is not JSON ({exc.msg} at char {exc.pos})"
    except NotANumber as exc:
        problem = f"answer is not JSON ({exc} is not a JSON number)"
    fence_problem = None
    for fence in _FENCE.finditer(text):  # the JSON read whole, so that a fence quoted inside it does not end it
        start = len(text) - len(text[fence.end():].lstrip())
        try:
            value, end = STRICT_JSON.raw_decode(text, start)
        except json.JSONDecodeError as exc:
            fence_problem = fence_problem or f"{exc.msg} at char {exc.pos - start} of the fence"
            continue
        except NotANumber as exc:
            fence_problem = fence_problem or f"{exc} is not a JSON number"
            continue
        if text[end:].lstrip().startswith("```"):
            return value, None
    return None, problem if fence_problem is None else f"answer is not JSON, nor is its code fence ({fence_problem})"


def _key_of(result: Any) -> str | None:
    """A result's id as a key: text, or a number written for it."""
    key = result.get("id") if isinstance(result, dict) else None
    if isinstance(key, int) and not isinstance(key, bool):
        return str(key)
    return key if isinstance(key, str) else None
