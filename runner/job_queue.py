"""A job's queue settings (issue 19): when an item may be sent, which goes first, and per-kind retry limits.

- ``[schedule] field``: the input field holding the time an item may be sent
  at (ISO 8601 with an offset or ``Z``, or seconds since the epoch); an item
  whose time is ahead waits for it (``waiting``, held ``scheduled``).
- ``[batch] priority_field``: the input field holding an item's priority (an
  integer, higher first, 0 when absent).
- ``[retry]`` (:class:`RetryLimits`), with ``[retry.transport]`` and
  ``[retry.rate_limited]``: the re-attempt limits of one failure kind, each key
  unset taking ``[retry]``'s. Attempts are counted
  from the first try, as ``[retry] max_attempts`` is: ``max_attempts = 5``
  means at most five tries (Asynq's ``MaxRetry`` of 4).
- ``[cache] reuse`` (:class:`Cache`, per stage too): unique work across runs
  (:mod:`runner.reusing`).

Reading a field's value is here too: a bad one is an InputError naming the
record and the field, raised while the input is checked, before the store is
touched.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .errors import InputError, JobError
from .retention import span


@dataclass(frozen=True)
class Cache:
    """``[cache]`` (and ``[stage.cache]``): ``reuse``, an item whose same work already has a validated result in the
    store (any run) takes it, with no call and nothing billed (:mod:`runner.reusing`)."""

    reuse: bool = False


@dataclass(frozen=True)
class Schedule:
    """``[schedule]``: the input field naming when each item may be sent ("": none)."""

    field: str = ""
    #: ``runner run JOB --at TIME``: when the items this prepare adds may be sent, for those whose record names no
    #: time. Not a job file key, nor part of any fingerprint: running the job again without it changes no item.
    at: float | None = dataclasses.field(default=None, metadata={"job_file": False})


@dataclass(frozen=True)
class KindRetry:
    """``[retry.<kind>]``: one failure kind's re-attempt limits; a key left unset (None) takes ``[retry]``'s.

    ``type`` in a field's metadata is the type a job file gives it (its default, None, has none).
    """

    max_attempts: int | None = field(default=None, metadata={"type": int})
    backoff: float | None = field(default=None, metadata={"type": float})
    max_backoff: float | None = field(default=None, metadata={"type": float})

    def given(self) -> dict[str, Any]:
        """The keys set, by name."""
        return {name: value for name, value in dataclasses.asdict(self).items() if value is not None}


#: The failure kinds that take limits of their own: those the engine re-attempts on its own.
RETRY_KINDS = ("transport", "rate_limited")


def send_at(record: Mapping[str, Any], name: str, where: str) -> float | None:
    """The time (seconds since the epoch) the record's field ``name`` schedules it at; None when it has none."""
    value = record.get(name)
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if math.isfinite(value):
            return float(value)
    elif isinstance(value, str):
        return _iso(value.strip(), f"field {name!r}", where)
    raise InputError(f"{where}: field {name!r} must be a time (ISO 8601 with an offset, or epoch seconds), "
                     f"not {value!r}")


def parse_time(text: str, where: str, *, now: float) -> float:
    """A time a person gives (``--at``): ISO 8601 with an offset or ``Z``, epoch seconds, or ``in`` a count of
    seconds, minutes, hours or days from ``now`` (``in 10m``); else an InputError."""
    if text.strip().startswith("in "):
        later = span(text.strip()[3:], "smhd")
        if later is not None:
            return now + later
        raise InputError(f"{where}: not a time from now: {text!r} (say in 90s, in 10m, in 2h or in 1d)")
    return _iso(text.strip(), None, where, forms="epoch seconds, or a time from now: in 10m, in 90s, in 2h, in 1d")


def _iso(text: str, what: str | None, where: str, *, forms: str = "or epoch seconds") -> float:
    """ISO 8601 with an offset, or epoch seconds; else an InputError naming ``what`` (None: the text itself) and
    the ``forms`` accepted besides ISO 8601."""
    subject, given = (what, f": {text!r}") if what else (repr(text), "")
    try:
        seconds = float(text)
    except ValueError:
        seconds = None
    if seconds is not None and math.isfinite(seconds):
        return seconds
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        raise InputError(f"{where}: {subject} is not a time{given} (accepted: ISO 8601 with an offset, "
                         f"e.g. 2026-12-02T18:00:00Z, {forms})") from None
    if at.tzinfo is None:
        raise InputError(f"{where}: {subject} has no offset{given} (add Z or +01:00, say)")
    return at.timestamp()


def priority(record: Mapping[str, Any], name: str, where: str) -> int:
    """The record's priority in its field ``name`` (an integer, higher first); 0 when it has none."""
    value = record.get(name)
    if value is None or value == "":
        return 0
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            pass
    if isinstance(value, int) and not isinstance(value, bool) and -2**63 <= value < 2**63:
        return value
    raise InputError(f"{where}: field {name!r} must be an integer priority, not {value!r}")


@dataclass(frozen=True)
class RetryLimits:
    """Bounds on both retry layers: request retries inside an attempt, re-attempts of an item."""

    request_retries: int = 2
    max_attempts: int = 3
    backoff: float = 1.0
    max_backoff: float = 60.0
    #: Refused tries in a row (a 429: nothing ran, nothing billed) before an item fails ``rate_limited``;
    #: they do not count against ``max_attempts``, which bounds the tries that may have cost.
    max_refusals: int = 10
    #: The limits of one failure kind (``[retry.transport]``, ``[retry.rate_limited]``), unset keys as above.
    transport: KindRetry = field(default_factory=KindRetry)
    rate_limited: KindRetry = field(default_factory=KindRetry)

    def __post_init__(self) -> None:
        for kind in RETRY_KINDS:  # read back from a saved job as tables
            if isinstance(own := getattr(self, kind), dict):
                object.__setattr__(self, kind, KindRetry(**own))

    def of(self, kind: str) -> RetryLimits:
        """The limits a failure of ``kind`` is re-attempted under: its own keys over these (a 429 is a refusal:
        ``[retry.rate_limited] max_attempts`` bounds the 429s in a row, as ``max_refusals`` does)."""
        given = getattr(self, kind).given() if kind in RETRY_KINDS else {}
        if kind == "rate_limited" and "max_attempts" in given:
            given["max_refusals"] = given.pop("max_attempts")
        return dataclasses.replace(self, **given) if given else self

    def check(self, where: str) -> None:
        """Refuse a kind's limit below its least (a JobError naming the table and the key)."""
        for kind in RETRY_KINDS:
            for name, value in getattr(self, kind).given().items():
                least = 1 if name == "max_attempts" else 0
                if value < least:
                    raise JobError(f"{where} [retry.{kind}]: {name!r} must be at least {least}")
