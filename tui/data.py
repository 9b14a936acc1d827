"""What the screens show, read from the store on a worker thread as frozen dataclasses.

Every function here takes an open ``Store`` and the time (``now``, injected so
that ages, throughput and estimates can be tested), calls the core's read side
(:mod:`runner.store.views`, :mod:`runner.recovery`, :mod:`runner.lease`) and
returns plain data. Widgets render these; none of them touches the store.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from runner import lease, recovery
from runner.store import views
from runner.breaker import Control
from runner.errors import RunError
from runner.jobs import Job
from runner.model import UNFINISHED, BreakerState, ItemState
from runner.store import Store

from . import format

#: Throughput is counted over this many seconds of the run's latest events.
RATE_WINDOW = 60.0
EVENT_LINES = 14
FAILED_ROWS = 200

STATES = tuple(s.value for s in ItemState)


class RunState(StrEnum):
    """A run as a person sees it, from the store and the engine's lease."""

    RUNNING = "running"
    PAUSED = "paused"
    NEEDS_PERSON = "needs a person"
    DONE = "done"
    ENGINE_DEAD = "engine dead"


@dataclass(frozen=True)
class RunSummary:
    """One line of the runs screen."""

    name: str
    state: RunState
    engine_alive: bool
    counts: Mapping[str, int]
    breaker: BreakerState
    held: int
    #: Seconds since an item of the run last changed state (None: never).
    idle_for: float | None

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def unfinished(self) -> int:
        return sum(self.counts[s] for s in UNFINISHED)


@dataclass(frozen=True)
class BatchInFlight:
    """A batch formed or sent and not yet settled."""

    id: int
    group: str
    state: str
    size: int
    #: Seconds since it started (or, still queued, since it was formed).
    age: float
    upstream_id: str | None
    retries: int
    round: int


@dataclass(frozen=True)
class LogLine:
    """One line of the event log: items that changed state together (a batch's, or some items'), or a person's command."""

    age: float
    what: str
    detail: str = ""
    #: ``person`` for a command, else the state the items went to.
    tone: str = ""


@dataclass(frozen=True)
class RunView:
    """Everything the run screen shows."""

    name: str
    state: RunState
    engine_alive: bool
    counts: Mapping[str, int]
    groups: Mapping[str, Mapping[str, int]]
    control: Control
    concurrency: int
    provider: str
    held: int
    batches: tuple[BatchInFlight, ...]
    log: tuple[LogLine, ...]
    #: Items completed or failed per minute, over the last minute of events.
    per_minute: float

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def unfinished(self) -> int:
        return sum(self.counts[s] for s in UNFINISHED)

    @property
    def slots(self) -> int:
        """How many batches may be in flight now, given the breaker and a person's hand."""
        return self.control.slots(self.concurrency)

    @property
    def in_flight(self) -> int:
        return sum(1 for batch in self.batches if batch.state == "running")

    @property
    def moving(self) -> int:
        """Unfinished items the engine may finish on its own (not held for a person)."""
        return self.unfinished - self.held

    @property
    def eta(self) -> float | None:
        """Seconds left at the current rate; None while nothing moves or nobody works on it."""
        if not self.unfinished:
            return 0.0
        if not self.engine_alive or self.control.held or self.per_minute <= 0 or self.moving <= 0:
            return None
        return self.moving / self.per_minute * 60.0


@dataclass(frozen=True)
class KindCount:
    """Failed items of one kind."""

    kind: str
    count: int
    retryable: int
    example: str


@dataclass(frozen=True)
class FailedItem:
    key: str
    group: str
    attempts: int
    paid_calls: int
    maybe_paid: int
    retryable: bool
    message: str


@dataclass(frozen=True)
class FailuresView:
    """The failures screen: kinds with counts, and the items of the chosen kind."""

    name: str
    kinds: tuple[KindCount, ...]
    kind: str | None
    items: tuple[FailedItem, ...]


@dataclass(frozen=True)
class HistoryLine:
    """One line of an item's history: its own state change, or a move of its whole batch."""

    age: float
    batch_id: int | None
    from_state: str | None
    to_state: str
    kind: str | None
    message: str | None
    #: For a batch's move, how many of the batch's items moved; None for the item's own change.
    batch_items: int | None = None


@dataclass(frozen=True)
class ItemView:
    """One item in full: its input, raw output, error, calls paid and whole history."""

    run: str
    key: str
    group: str
    state: str
    attempts: int
    paid_calls: int
    maybe_paid: int
    held: bool
    input: str
    output: str | None
    result: str | None
    kind: str | None
    message: str | None
    retryable: bool | None
    history: tuple[HistoryLine, ...]


@dataclass(frozen=True)
class HeldView:
    """What awaits a person on a run, and what confirming each case does."""

    name: str
    engine_alive: bool
    items: tuple[recovery.HeldItem, ...]

    def by_case(self) -> dict[recovery.Case, int]:
        cases = {case: 0 for case in recovery.Case}
        for item in self.items:
            cases[item.case] += 1
        return {case: n for case, n in cases.items() if n}


def runs_overview(store: Store, *, now: float) -> tuple[RunSummary, ...]:
    """Every run in the store, with its totals, state and last activity."""
    summaries = []
    for run in views.runs(store):
        counts = _totals(views.counts(store, run["id"]))
        alive = lease.alive(store, run["name"], now=now)
        held = views.held_count(store, run["id"])
        control = _control(run)
        last = views.last_event_at(store, run["id"])
        summaries.append(RunSummary(
            name=run["name"], state=_state(counts, control, held=held, alive=alive), engine_alive=alive,
            counts=counts, breaker=control.breaker, held=held, idle_for=None if last is None else now - last,
        ))
    return tuple(summaries)


def run_view(store: Store, name: str, *, now: float) -> RunView:
    """One run: counts, groups, breaker, batches in flight, throughput and the log's tail."""
    run = _run(store, name)
    groups = views.counts(store, run["id"])
    counts = _totals(groups)
    control = _control(run)
    alive = lease.alive(store, name, now=now)
    held = views.held_count(store, run["id"])
    job = Job.from_json(run["job"])
    finished, since = views.finished_since(store, run["id"], since=now - RATE_WINDOW)
    return RunView(
        name=name, state=_state(counts, control, held=held, alive=alive), engine_alive=alive, counts=counts,
        groups=groups, control=control, concurrency=job.batch.concurrency,
        provider=job.provider.describe(), held=held,
        batches=tuple(_batch(row, now) for row in views.batches_in_flight(store, run["id"])),
        log=_log(store, run["id"], now),
        per_minute=finished / max(now - since, 1.0) * 60.0,
    )


def failures_view(store: Store, name: str, *, kind: str | None) -> FailuresView:
    """Failed items by kind, and the first items of ``kind`` (or of the largest kind)."""
    run = _run(store, name)
    kinds = tuple(
        KindCount(row["kind"] or "unknown", row["n"], row["retryable"], row["message"] or "")
        for row in views.failure_kinds(store, run["id"])
    )
    if kind not in {k.kind for k in kinds}:
        kind = kinds[0].kind if kinds else None
    rows = views.failed_items(store, run["id"], kind=kind, limit=FAILED_ROWS) if kind else []
    items = tuple(
        FailedItem(r["key"], r["group"], r["attempts"], r["paid_calls"], r["maybe_paid"], bool(r["retryable"]),
                   r["message"] or "")
        for r in rows
    )
    return FailuresView(name, kinds, kind, items)


def item_view(store: Store, name: str, key: str, *, now: float) -> ItemView:
    """One item of a run in full, with its history from the events table."""
    row = views.item(store, _run(store, name)["id"], key)
    if row is None:
        raise RunError(f"run {name!r} has no item {key!r}")
    history = tuple(
        HistoryLine(now - h["at"], h["batch_id"], h["from_state"], h["to_state"], h["kind"], h["message"],
                    h["items"] if h["batch_move"] else None)
        for h in views.item_history(store, row["id"])
    )
    return ItemView(
        run=name, key=row["key"], group=row["group"], state=row["state"], attempts=row["attempts"],
        paid_calls=row["paid_calls"], maybe_paid=row["maybe_paid"], held=row["needs_confirmation"] == recovery.HELD,
        input=row["input"], output=row["output"], result=row["result"], kind=row["kind"], message=row["message"],
        retryable=None if row["retryable"] is None else bool(row["retryable"]), history=history,
    )


def held_view(store: Store, name: str, *, now: float) -> HeldView:
    """The items held for a person on a run, each with its case."""
    return HeldView(name, lease.alive(store, name, now=now), tuple(recovery.held(store, name)))


def _run(store: Store, name: str) -> dict[str, Any]:
    for run in views.runs(store):
        if run["name"] == name:
            return run
    store.run_id(name)  # raises the core's RunError, which lists the runs there are
    raise AssertionError("unreachable")


def _totals(groups: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    return {state: sum(group[state] for group in groups.values()) for state in STATES}


def _control(run: Mapping[str, Any]) -> Control:
    return Control(
        BreakerState(run["breaker"]), run["breaker_reason"], 0, bool(run["paused"]), run["steps"]
    )


def _state(counts: Mapping[str, int], control: Control, *, held: int, alive: bool) -> RunState:
    if not any(counts[s] for s in UNFINISHED):
        return RunState.DONE
    if held or control.breaker is BreakerState.OPEN:
        return RunState.NEEDS_PERSON
    if control.paused:
        return RunState.PAUSED
    return RunState.RUNNING if alive else RunState.ENGINE_DEAD


def _batch(row: Mapping[str, Any], now: float) -> BatchInFlight:
    since = row["started_at"] if row["started_at"] is not None else row["created_at"]
    return BatchInFlight(
        id=row["id"], group=row["grp"], state=row["state"], size=row["size"], age=now - since,
        upstream_id=row["upstream_id"], retries=row["retries"], round=row["round"],
    )


def _log(store: Store, run_id: int, now: float) -> tuple[LogLine, ...]:
    """The newest lines: a batch's moves, runs of items' own events that moved together, and commands."""
    lines: list[tuple[float, LogLine]] = []
    for group in _together(views.event_tail(store, run_id, limit=EVENT_LINES * 25)):
        first = group[0]
        move = f"{first['from_state']} → {first['to_state']}" if first["from_state"] else f"new, {first['to_state']}"
        detail = f"{first['kind']}: {first['message']}" if first["kind"] else (first["message"] or "")
        what = f"{_where(first)}{_who(group)} {move}"
        lines.append((first["id"], LogLine(now - first["at"], what, detail, first["to_state"])))
    commands = views.command_tail(store, run_id, limit=EVENT_LINES)
    merged = sorted(
        [(line.age, 0, -order, line) for order, line in lines]
        + [(now - c["at"], 1, -c["id"], LogLine(now - c["at"], f"person: {c['command']}{_args(c['args'])}",
                                                 c["outcome"] or "", "person")) for c in commands],
        key=lambda entry: (entry[0], entry[1], entry[2]),
    )
    return tuple(line for *_, line in merged[:EVENT_LINES])


def _together(rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Consecutive items' own events of one change of several items (same batch, time, move and reason).

    A batch's move is one event already, a group of its own.
    """
    groups: list[list[dict[str, Any]]] = []
    for row in rows:
        same = ("at", "batch_id", "from_state", "to_state", "kind", "message")
        own = row["key"] is not None
        if groups and own and groups[-1][0]["key"] is not None and all(groups[-1][0][f] == row[f] for f in same):
            groups[-1].append(row)
        else:
            groups.append([row])
    return groups[:EVENT_LINES]


def _who(group: list[dict[str, Any]]) -> str:
    """The items of a log line: a batch's move (or items added) says how many, items' own events name them."""
    first = group[0]
    if first["key"] is None:
        return format.many(first["items"], "item")
    return first["key"] if len(group) == 1 else f"{first['key']} +{len(group) - 1}"


def _where(event: dict[str, Any]) -> str:
    """The batch of a log line, and for a batch formed by a split, the batch it came from."""
    if not event["batch_id"]:
        return ""
    if event["parent_id"] and event["key"] is None and event["to_state"] == ItemState.QUEUED:
        return f"batch {event['batch_id']} (split from {event['parent_id']}): "
    return f"batch {event['batch_id']}: "


def _args(args: str) -> str:
    """A command's arguments as a person would write them: ``--kind transport``, keys."""
    try:
        given = json.loads(args)
    except ValueError:
        return ""
    if isinstance(given, dict):
        keys = given.get("keys") or []
        kind = f" --kind {given['kind']}" if given.get("kind") else ""
        return kind + _args(keys if isinstance(keys, str) else json.dumps(keys))
    if isinstance(given, list) and given:
        shown = " ".join(str(key) for key in given[:3])
        return f" {shown}" + (f" +{len(given) - 3}" if len(given) > 3 else "")
    return ""
