"""Fault plans: which requests the simulator answers badly, and how.

A plan is JSON-able data::

    {"seed": 7, "rules": [
        {"fault": "http_429", "times": 2, "retry_after": 1},
        {"fault": "drop", "rate": 0.1},
        {"fault": "invalid_items", "keys": ["p001"]}
    ]}

For each request the rules of the faults that apply to its route
(:data:`SCOPES`) are tried in order; the first that matches decides the
fault, and no match means the normal answer. Rules of other routes are
skipped without touching their counters or the generator. A rule's
selectors, all optional and combined with AND:

- ``keys``: the request holds at least one of these item ids (for an upload
  or a batch: any line of its file does);
- ``rate``: a draw from the plan's one random generator, seeded with
  ``seed``, falls below it, so a seed and an order of requests give the same
  faults every time;
- ``times``: only the first N requests that pass the other selectors.

The rule's other keys are the fault's parameters (:data:`FAULTS`).

Faults of ``POST /v1/chat/completions``, and of no other route:

- errors, never billed: ``http_400``, ``http_401``, ``http_402``,
  ``http_403``, ``http_500``, ``http_503`` (``retry_after`` seconds),
  ``http_429`` (below) and ``insufficient_quota`` (a 429 not worth retrying);
- ``http_429`` puts its hint where ``header`` says: ``"retry-after"`` (the
  default, as OpenAI): ``Retry-After`` from ``retry_after`` seconds, a date
  with ``http_date``, and ``retry-after-ms`` from ``retry_after_ms``;
  ``"retry-after-ms"``: that header alone, from ``retry_after_ms`` or else
  ``retry_after``; ``"llm_provider-retry-after"``: that header alone, from
  ``retry_after``, as a LiteLLM proxy forwards it; ``"none"``: no hint at
  all, and LiteLLM's mock ``throttling_error`` body (code ``"429"``);
- errors as OpenAI or a LiteLLM proxy words them, never billed:
  ``budget_exceeded`` (LiteLLM's 422 ``budget_exceeded``), ``context_length``
  (a 400 ``context_length_exceeded``; it needs ``keys``, the items too long
  for the model), ``invalid_model`` (LiteLLM's 400 "Invalid model name
  passed in model=..."), ``model_not_found`` (OpenAI's 404 for the request's
  model) and ``echo_key`` (a 401 whose message holds the bearer key the
  client sent, as some proxies do);
- Anthropic's errors, never billed: ``overloaded`` (a 529 ``overloaded_error``)
  and ``credit_balance`` (its 400 "credit balance is too low"). On
  ``POST /v1/messages`` every error fault is worded as Anthropic words it
  (:mod:`runner.sim.anthropic`);
- ``timeout``: wait ``seconds`` (default 30), then answer normally;
- ``drop``: close the connection with nothing sent, not billed;
- ``billed_then_dropped``: bill the answer, then close with nothing sent;
- billed 200s with broken content: ``malformed`` (cut-off JSON, finish reason
  ``length``), ``wrong_ids`` (every id gets a ``-x``), ``missing_ids`` (the
  results of ``keys``, else of the batch's second half, are left out),
  ``invalid_items`` (the results of ``keys``, else of a ``share`` of the
  batch, default a half, keep only their id) and ``duplicate_ids`` (the
  result of ``keys``, else of the batch's first item, comes again at the
  end with other values: other choices, such as another label, where its
  schema leaves any, else other words);
- billed 200s with the normal answer dressed differently: ``content_parts``
  (``message.content`` a list of ``parts`` text parts, default 2, as some
  OpenAI-compatible servers send it) and ``fenced`` (the JSON inside a
  Markdown code fence: a line ```` ```json ````, the JSON, a line ```` ``` ````).

The fault of ``POST /v1/files``:

- ``upload_lost``: the file is stored, then the connection is closed with
  nothing sent.

Faults of ``POST /v1/batches``, chosen when the create arrives. The batch
is made all the same; unless a fault says otherwise, it runs and bills
the lines it answers when it ends:

- ``create_lost``: the connection is closed with nothing sent;
- ``create_500``: the answer is a 500 ``server_error``;
- ``create_slow``: the create waits ``seconds`` (default 5) before it makes
  the batch and answers, so a client that gives up sooner leaves a batch
  made after it left;
- ``create_twice``: two batches are made of the same file and metadata, as
  by a proxy that sent the create again on its own; the answer is the
  second, and both run and bill;
- ``batch_unknown``: from then on the batch is unknown: a 404 when read or
  cancelled, absent from the list, never billed;
- ``expire``: the batch ends ``expired`` at its 24 h deadline: the first half
  of its lines (at least one) answered, the rest ``batch_expired`` errors;
- ``missing_rows``: the batch completes, but the lines holding ``keys``
  (else its second half of lines) are in neither file, and not billed;
- ``batch_failed``: the batch fails validation, as for a spent token quota;
- ``errored_lines`` (Message Batches only): the requests holding ``keys`` (else
  every one) end ``errored`` with an ``api_error``, not billed.

On ``GET /v1/batches/{id}`` (a poll) and ``GET /v1/batches`` (the list):
``poll_503`` and ``list_503`` answer 503 ``server_is_overloaded``.

The waits of ``timeout``, of ``create_slow`` and of the simulator's
``latency`` are real seconds: the simulator's clock (:mod:`runner.sim.clock`)
times batches only, and moving it forward cuts no wait short.
"""

from __future__ import annotations

import copy
import json
import math
import random
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

DEFAULT_TIMEOUT = 30.0
DEFAULT_SHARE = 0.5
DEFAULT_PARTS = 2
DEFAULT_CREATE_SECONDS = 5.0
_HINT_KEYS = frozenset({"retry_after", "retry_after_ms", "http_date"})
# Where http_429 may put its hint: the keys each place takes, and whether it
# needs one of them.
_HINTS: dict[str, tuple[frozenset[str], bool]] = {
    "retry-after": (_HINT_KEYS, False),
    "retry-after-ms": (frozenset({"retry_after", "retry_after_ms"}), True),
    "llm_provider-retry-after": (frozenset({"retry_after"}), True),
    "none": (frozenset(), False),
}
#: Where ``http_429`` may put its hint; the first is the default.
HINT_HEADERS = tuple(_HINTS)

# A parameter's check, and what it must be, for the error message.
Param = tuple[Callable[[Any], bool], str]


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _is_whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_SECONDS: Param = (lambda v: _is_number(v) and v >= 0, "a number of seconds, 0 or more")
_WHOLE: Param = (lambda v: _is_whole(v) and v >= 0, "a whole number, 0 or more")
_FLAG: Param = (lambda v: isinstance(v, bool), "true or false")

SELECTORS: dict[str, Param] = {
    "rate": (lambda v: _is_number(v) and 0 <= v <= 1, "a number from 0 to 1"),
    "times": (lambda v: _is_whole(v) and v >= 1, "a whole number, 1 or more"),
    "keys": (
        lambda v: isinstance(v, list) and bool(v) and all(isinstance(k, str) for k in v),
        "a non-empty list of item ids",
    ),
}

#: Every fault, with the parameters it takes besides the selectors.
FAULTS: dict[str, dict[str, Param]] = {
    "http_400": {},
    "http_401": {},
    "http_402": {},
    "http_403": {},
    "http_429": {
        "retry_after": _WHOLE,
        "retry_after_ms": _WHOLE,
        "http_date": _FLAG,
        "header": (lambda v: v in HINT_HEADERS, f"one of {', '.join(HINT_HEADERS)}"),
    },
    "insufficient_quota": {},
    "budget_exceeded": {},
    "context_length": {},
    "invalid_model": {},
    "model_not_found": {},
    "echo_key": {},
    "http_500": {},
    "http_503": {"retry_after": _WHOLE},
    "overloaded": {"retry_after": _WHOLE},
    "credit_balance": {},
    "timeout": {"seconds": _SECONDS},
    "drop": {},
    "billed_then_dropped": {},
    "malformed": {},
    "wrong_ids": {},
    "missing_ids": {},
    "invalid_items": {"share": (lambda v: _is_number(v) and 0 < v <= 1, "a number above 0, up to 1")},
    "duplicate_ids": {},
    "content_parts": {"parts": (lambda v: _is_whole(v) and v >= 2, "a whole number, 2 or more")},
    "fenced": {},
    "upload_lost": {},
    "create_lost": {},
    "create_500": {},
    "create_slow": {"seconds": _SECONDS},
    "create_twice": {},
    "batch_unknown": {},
    "expire": {},
    "missing_rows": {},
    "batch_failed": {},
    "errored_lines": {},
    "poll_503": {},
    "list_503": {},
}


class Scope(StrEnum):
    """The request a fault applies to."""

    CHAT = "chat"  # POST /v1/chat/completions
    UPLOAD = "upload"  # POST /v1/files
    BATCH = "batch"  # POST /v1/batches
    POLL = "poll"  # GET /v1/batches/{id}
    LIST = "list"  # GET /v1/batches


_NOT_CHAT = {
    "upload_lost": Scope.UPLOAD,
    "create_lost": Scope.BATCH,
    "create_500": Scope.BATCH,
    "create_slow": Scope.BATCH,
    "create_twice": Scope.BATCH,
    "batch_unknown": Scope.BATCH,
    "expire": Scope.BATCH,
    "missing_rows": Scope.BATCH,
    "batch_failed": Scope.BATCH,
    "errored_lines": Scope.BATCH,
    "poll_503": Scope.POLL,
    "list_503": Scope.LIST,
}

#: Every fault, with the request it applies to.
SCOPES: dict[str, Scope] = {name: _NOT_CHAT.get(name, Scope.CHAT) for name in FAULTS}


@dataclass(frozen=True)
class Fault:
    """The fault chosen for one request: its name, parameters and target ids.

    ``targets`` are the ids whose results a content fault breaks (or, for
    ``duplicate_ids``, repeats), in batch order; for ``missing_rows``, the
    ids whose lines go missing.
    """

    name: str
    params: Mapping[str, Any]
    targets: tuple[str, ...] = ()


class FaultPlan:
    """A checked plan with its own random generator and per-rule counters.

    :meth:`choose` may be called from many request threads at once; the
    generator and the counters are used under one lock.
    """

    def __init__(self, plan: object | None = None) -> None:
        #: The plan as given, checked, with its seed filled in.
        self.plan = validate_plan({} if plan is None else plan)
        self._rng = random.Random(self.plan["seed"])
        self._used = [0] * len(self.plan["rules"])
        self._lock = threading.Lock()

    def choose(self, ids: Sequence[str], scope: Scope = Scope.CHAT) -> Fault | None:
        """The fault of the first rule of ``scope`` matching a request for ``ids``, if any."""
        with self._lock:
            for index, rule in enumerate(self.plan["rules"]):
                if SCOPES[rule["fault"]] is scope and self._matches(index, rule, ids):
                    params = {k: v for k, v in rule.items() if k != "fault" and k not in SELECTORS}
                    return Fault(rule["fault"], params, self._targets(rule, ids))
        return None

    def _matches(self, index: int, rule: Mapping[str, Any], ids: Sequence[str]) -> bool:
        if "keys" in rule and not set(rule["keys"]).intersection(ids):
            return False
        if "times" in rule and self._used[index] >= rule["times"]:
            return False
        if "rate" in rule and self._rng.random() >= rule["rate"]:
            return False
        self._used[index] += 1
        return True

    def _targets(self, rule: Mapping[str, Any], ids: Sequence[str]) -> tuple[str, ...]:
        name = rule["fault"]
        if name == "wrong_ids":
            return tuple(ids)
        if name in ("missing_rows", "errored_lines") and "keys" in rule:
            return tuple(key for key in ids if key in set(rule["keys"]))
        if name not in ("missing_ids", "invalid_items", "duplicate_ids"):
            return ()
        if "keys" in rule:
            chosen = set(rule["keys"])
        elif name == "missing_ids":
            chosen = set(ids[len(ids) // 2 :])
        elif name == "duplicate_ids":
            chosen = set(ids[:1])
        else:
            count = math.ceil(rule.get("share", DEFAULT_SHARE) * len(ids))
            chosen = set(self._rng.sample(list(ids), count))
        return tuple(key for key in ids if key in chosen)


def validate_plan(plan: object) -> dict[str, Any]:
    """A copy of ``plan`` with its seed filled in; ValueError says what is wrong."""
    if not isinstance(plan, Mapping):
        raise ValueError(f"a fault plan is a JSON object, not {_show(plan)}")
    unknown = sorted(set(plan) - {"seed", "rules"})
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r} in the fault plan (allowed: rules, seed)")
    seed = plan.get("seed", 0)
    if not _is_whole(seed):
        raise ValueError(f"the plan's 'seed' must be a whole number, not {_show(seed)}")
    rules = plan.get("rules", [])
    if not isinstance(rules, list):
        raise ValueError(f"the plan's 'rules' must be a list, not {_show(rules)}")
    return {"seed": seed, "rules": [_checked_rule(n, rule) for n, rule in enumerate(rules, 1)]}


def _checked_rule(number: int, rule: object) -> dict[str, Any]:
    if not isinstance(rule, Mapping):
        raise ValueError(f"rule {number} must be a JSON object, not {_show(rule)}")
    name = rule.get("fault")
    if not isinstance(name, str) or name not in FAULTS:
        raise ValueError(f"rule {number}: unknown fault {_show(name)} (known: {', '.join(FAULTS)})")
    allowed = {**SELECTORS, **FAULTS[name]}
    where = f"rule {number} ({name})"
    for key, value in rule.items():
        if key == "fault":
            continue
        if key not in allowed:
            raise ValueError(f"{where}: unknown key {key!r} (allowed: {', '.join(allowed)})")
        check, wanted = allowed[key]
        if not check(value):
            raise ValueError(f"{where}: {key!r} must be {wanted}, not {_show(value)}")
    problem = _clash(rule)
    if problem is not None:
        raise ValueError(f"{where}: {problem}")
    return {key: copy.deepcopy(value) for key, value in rule.items()}


def _clash(rule: Mapping[str, Any]) -> str | None:
    """What is wrong with a rule's keys taken together; None when nothing."""
    if rule.get("http_date") and "retry_after" not in rule:
        return "'http_date' needs 'retry_after'"
    if "share" in rule and "keys" in rule:
        return "give 'keys' or 'share', not both"
    if rule["fault"] == "context_length" and "keys" not in rule:
        return "needs 'keys', the items too long for the model"
    if rule["fault"] == "http_429":
        return _hint_clash(rule.get("header", HINT_HEADERS[0]), set(rule))
    return None


def _hint_clash(header: str, given: set[str]) -> str | None:
    """What an ``http_429`` rule's ``header`` cannot take among the ``given`` keys."""
    takes, needs_one = _HINTS[header]
    refused = sorted(given & _HINT_KEYS - takes)
    if refused:
        return f"'header' {header!r} takes no {refused[0]!r}"
    if needs_one and not given & takes:
        return f"'header' {header!r} needs {' or '.join(map(repr, sorted(takes)))}"
    return None


def parse_plan(text: str | bytes) -> dict[str, Any]:
    """A checked plan from its JSON text; ValueError says what is wrong."""
    try:
        plan = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"the fault plan is not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
        ) from exc
    return validate_plan(plan)


def load_plan(text_or_path: str) -> dict[str, Any]:
    """A checked plan from JSON text (starting with ``{``) or a JSON file's path.

    For a command line option such as ``--faults plan.json`` or
    ``--faults '{"rules": [{"fault": "drop", "rate": 0.1}]}'``.
    """
    if text_or_path.lstrip().startswith("{"):
        return parse_plan(text_or_path)
    try:
        text = Path(text_or_path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read the fault plan {text_or_path}: {exc.strerror or exc}") from exc
    try:
        return parse_plan(text)
    except ValueError as exc:
        raise ValueError(f"{text_or_path}: {exc}") from exc


def _show(value: Any) -> str:
    """A value as it would be written in JSON, for error messages."""
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
