"""The one read model: every question a UI asks, answered from the store.

The CLI, the TUI and the notebook panel render what these functions return
(plain rows, or the named tuples of :mod:`runner.store.answers`) and
write only commands; none of them reads the store another way. Where a run
stands (:func:`standing`) is assembled once, here, for all of them; the
status contract is its :meth:`~runner.store.answers.Standing.status`.

Counts come from the ``counts`` table that triggers keep in step with every
item change, so none of these reads scans the items of a large run.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .. import liveness, words
from ..words import scheduled_for
from ..errors import RunError
from ..model import UNFINISHED, BreakerState, Case, FailureKind, HeldItem, Hold, ItemState
from ..rules import queues, triage
from ..rules.breaker import Control
from . import event_log, expiry
from .budgets import HOLDING
from .cost_view import cost_and_budget
from .worker_rows import workers_shown
from .answers import (
    STATES,
    BatchInFlight,
    Decision,
    DecisionsView,
    FailedItem,
    FailuresView,
    HeldView,
    HistoryLine,
    ItemView,
    KindCount,
    RunView,
    StageTally,
    Standing,
    tallies,
)
from .lists import (
    EXPORT_STATES, batches, export_page, failures, history, holds, items, results, stage_kinds, stage_passes, staged,
)
from .live import (
    batches_in_flight,
    batches_upstream,
    command_tail,
    event_tail,
    failed_items,
    failure_kinds,
    finished_since,
    item,
    item_history,
    pace,
    scheduled,
    waiting_decisions,
    work_span,
)
from .scheduled_view import scheduled_view

if TYPE_CHECKING:
    from .sqlite import Store

__all__ = [  # from lists and live
    "EXPORT_STATES", "batches", "batches_in_flight", "batches_upstream", "command_tail", "event_tail", "export_page",
    "failed_items", "failure_kinds", "failures", "finished_since", "history", "holds", "item", "item_history", "items",
    "pace", "results", "scheduled", "scheduled_view", "stage_kinds", "stage_passes", "staged", "waiting_decisions",
    "work_span",
]

UNFINISHED_SQL = ", ".join(f"'{state.value}'" for state in UNFINISHED)

#: An item held for a person's confirmation, and one the engine may take.
HELD = "hold = 'confirm'"
NOT_HELD = "hold = 'none'"

#: Lines of a run's event log.
EVENT_LINES = 14
#: Failed items of one kind listed at the most.
FAILED_ROWS = 200
#: Items waiting for a decision listed at the most.
DECISION_ROWS = 200


def counts(store: Store, run_id: int) -> dict[str, dict[str, int]]:
    """Items by group and state, whatever their stage (every state present, zeros included)."""
    groups: dict[str, dict[str, int]] = {}
    for row in store.rows("SELECT grp, state, sum(n) AS n FROM counts WHERE run_id = ? AND n > 0 "
                          "GROUP BY grp, state ORDER BY grp", [run_id]):
        groups.setdefault(row["grp"], {s.value: 0 for s in ItemState})[row["state"]] = row["n"]
    return groups


#: A run's stages in its job's order (from the job saved with it; none saved: its one stage, by its items).
STAGE_ORDER = "SELECT @field(value, '$.name') AS stage FROM runs, @list_of_json(job, s, '$.stages') WHERE runs.id = ?"


def stage_counts(store: Store, run_id: int) -> dict[str, dict[str, int]]:
    """Items by their current stage and state, the stages in order (every state present, zeros included);
    ``completed`` items are past the last stage (or past the stages left, skipped), counted where they ended."""
    stages = {row["stage"]: {s.value: 0 for s in ItemState} for row in store.rows(STAGE_ORDER, [run_id])}
    for row in store.rows("SELECT stage, state, sum(n) AS n FROM counts WHERE run_id = ? AND n > 0 "
                          "GROUP BY stage, state", [run_id]):
        stages.setdefault(row["stage"], {s.value: 0 for s in ItemState})[row["state"]] = row["n"]
    return stages


def passes(store: Store, run_id: int, stages: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, int]]:
    """Per stage, the items that passed it and that skipped it; a run of one stage keeps no results apart from
    its items (:mod:`runner.store.migrations_stages`, version 12): its completed items are those that passed it."""
    if staged(store, run_id):
        return stage_passes(store, run_id)
    return {stage: {"passed": counts[ItemState.COMPLETED], "skipped": 0} for stage, counts in stages.items()}


def unfinished(store: Store, run_id: int) -> int:
    """Items that still need work, counted from the store, never from a queue."""
    rows = store.rows(
        f"SELECT coalesce(sum(n), 0) AS n FROM counts WHERE run_id = ? AND state IN ({UNFINISHED_SQL})",
        [run_id],
    )
    return int(rows[0]["n"])


def next_due(store: Store, run_id: int, *, skip: Sequence[str] = ()) -> float | None:
    """When the earliest waiting item may be tried again (a retry's wait, or a scheduled item's time), but for
    those at the stages ``skip`` names (no call of the engine asking moves them: it need not wait for them).
    One read for each hold, each on its partial index."""
    others = f" AND stage NOT IN ({', '.join('?' for _ in skip)})" if skip else ""  # PostgreSQL refuses ``IN ()``
    times = [store.rows(f"SELECT min(not_before) AS t FROM items WHERE run_id = ? AND {held}{others}",
                        [run_id, *skip])[0]["t"]
             for held in (f"state = 'waiting' AND {NOT_HELD}", "hold = 'scheduled'")]
    return min((float(t) for t in times if t is not None), default=None)


def rate_limited_until(store: Store, run_id: int, *, now: float) -> float | None:
    """Until when a rate limit (a 429 and its Retry-After) holds every batch of the run back; None: it does not.

    The engine waits out the latest time a 429 asked for before it starts
    any batch, and that time is the ``not_before`` of the items that 429
    sent back to ``waiting``: the latest such one still ahead is the store's
    word for it.
    """
    rows = store.rows(
        "SELECT max(not_before) AS t FROM items WHERE run_id = ? AND state = 'waiting' "
        f"AND error_kind = 'rate_limited' AND {NOT_HELD} AND not_before > ?",
        [run_id, now],
    )
    until = rows[0]["t"]
    return float(until) if until is not None else None


def status(store: Store, name: str, *, now: float) -> dict[str, Any]:
    """The status contract of the brief, for one run."""
    return standing(store, name, now=now).status()


def standing(store: Store, name: str, *, now: float) -> Standing:
    """Where one run stands: counts, groups, breaker and controls, held items, its engine, last change."""
    return _standing(store, _run(store, name), now=now)


def runs_overview(store: Store, *, now: float) -> tuple[Standing, ...]:
    """Where every run in the store stands, by name."""
    return tuple(_standing(store, run, now=now) for run in runs(store))


def engine_alive(store: Store, name: str, *, now: float) -> bool:
    """Whether a live worker runs ``name``: who will obey a command written now."""
    return any(liveness.lives(worker, now) for worker in store.workers(name))


def _standing(store: Store, run: Mapping[str, Any], *, now: float) -> Standing:
    groups = counts(store, run["id"])
    last = last_event_at(store, run["id"])
    stages = stage_counts(store, run["id"])
    workers = workers_shown(store, run["name"], run["id"], now=now)  # one left behind (never left its run) died
    alive = any(worker.alive for worker in workers)
    waiting_for_time, next_time = scheduled(store, run["id"])
    queue = store.share(run["id"], now=now)
    cost, budget = cost_and_budget(store, run)
    return Standing(
        name=run["name"], counts={state: sum(group[state] for group in groups.values()) for state in STATES},
        groups=groups, control=queues.joined(_control(run), queue), held=held_count(store, run["id"]), engine_alive=alive,
        duplicate_tasks=len(duplicates(store, run["id"])), idle_for=None if last is None else now - last,
        engine_silent_for=None if not workers or alive else min(worker.heartbeat_age for worker in workers),
        paid_calls=run["paid_calls"], maybe_paid=run["maybe_paid"],
        rate_limited_until=rate_limited_until(store, run["id"], now=now) if alive else None,
        cancelled=cancelled_count(store, run["id"]), cancelled_whole=cancelled_whole(store, run["id"]),
        stages=stages, passes=passes(store, run["id"], stages), needs_decision=decision_count(store, run["id"]),
        waiting_for_sub_items=store.waiting_for_sub_items(run["id"]),
        cost=cost, expiring=expiry.expiring(store, run["id"], now=now),
        workers=workers, scheduled=waiting_for_time, next_scheduled_at=next_time, read_at=now, queue=queue,
        archived=store.archived_count(run["id"]),
        budget=budget,
    )


def _run(store: Store, name: str) -> dict[str, Any]:
    """The run's row, by name; a name the store does not have raises the core's RunError, listing the runs."""
    (run,) = store.rows(f"SELECT {RUN_COLUMNS} FROM runs WHERE id = ?", [store.run_id(name)])
    return run


def _control(run: Mapping[str, Any]) -> Control:
    return Control(
        BreakerState(run["breaker"]), run["breaker_reason"], run["transport_failures"], bool(run["paused"]),
        run["steps"], FailureKind(run["breaker_kind"]) if run["breaker_kind"] else None,
    )


def duplicates(store: Store, run_id: int) -> list[dict[str, Any]]:
    """Upstream tasks found beside a batch's own, carrying its reference: each may have billed what it ran."""
    return store.rows(
        "SELECT batch_id, upstream_id, found_at, cancelled, message FROM duplicates WHERE run_id = ? ORDER BY id",
        [run_id],
    )


def left_running(store: Store, name: str, *, now: float) -> int:
    """Items ``running``, neither held nor confirmed, with no engine alive to finish them (it was killed): the next
    engine's recovery decides each (held for a confirmation where its call may have been billed)."""
    if engine_alive(store, name, now=now):
        return 0
    (row,) = store.rows(f"SELECT count(*) AS n FROM items WHERE run_id = ? AND state = 'running' AND {NOT_HELD}",
                        [store.run_id(name)])
    return int(row["n"])


# What the TUI polls: each read uses an index or a LIMIT, never a scan of a run's items.

RUN_COLUMNS = (
    "id, name, job, created_at, updated_at, breaker, breaker_reason, breaker_kind, transport_failures, paused, "
    f"steps, paid_calls, maybe_paid, input_read_at, {HOLDING} AS budget"
)


def runs(store: Store) -> list[dict[str, Any]]:
    """Every run in the store, by name: its saved job, breaker, a person's controls, paid totals, input last read."""
    return store.rows(f"SELECT {RUN_COLUMNS} FROM runs ORDER BY name")


def held_count(store: Store, run_id: int) -> int:
    """Items held for a person's confirmation (the partial index on exactly this condition keeps it cheap)."""
    (row,) = store.rows(f"SELECT count(*) AS n FROM items WHERE run_id = ? AND {HELD}", [run_id])
    return int(row["n"])


def decision_count(store: Store, run_id: int) -> int:
    """Items waiting at a decide stage for a person's decision (the partial index on exactly this condition)."""
    (row,) = store.rows("SELECT count(*) AS n FROM items WHERE run_id = ? AND hold = 'decide'", [run_id])
    return int(row["n"])


def cancelled_count(store: Store, run_id: int, *, stage: str | None = None) -> int:
    """Items a person cancelled, all or at one stage (the index of failed items by kind keeps it cheap)."""
    (row,) = store.rows("SELECT count(*) AS n FROM items WHERE run_id = ? AND state = 'failed' "
                        "AND error_kind = 'cancelled' AND (CAST(? AS TEXT) IS NULL OR stage = ?)", [run_id, stage, stage])
    return int(row["n"])


def cancelled_whole(store: Store, run_id: int) -> bool:
    """Whether the last command a person gave the run cancelled all of it (a retry since would come after).

    The compensations that follow a cancel (``on_cancel``, logged as a command) are no new act of a person.
    """
    rows = store.rows("SELECT command, args FROM commands WHERE run_id = ? AND command != 'on_cancel' "
                      "ORDER BY id DESC LIMIT 1", [run_id])
    return bool(rows) and rows[0]["command"] == "cancel" and rows[0]["args"] == '{"keys": []}'


def last_event_at(store: Store, run_id: int) -> float | None:
    """When items of the run last changed state (or were added)."""
    rows = store.rows("SELECT at FROM events WHERE run_id = ? ORDER BY id DESC LIMIT 1", [run_id])
    return float(rows[0]["at"]) if rows else None


# What the screens show: each assembled from the reads above and those of live.


def run_view(store: Store, name: str, *, now: float) -> RunView:
    """One run: where it stands, batches in flight, throughput and the log's tail."""
    from ..jobs import Job  # here: the CLI's read-only commands never load the job file's parser

    run = _run(store, name)
    job = Job.from_json(run["job"])
    standing = _standing(store, run, now=now)
    return RunView(
        standing=standing, concurrency=job.batch.concurrency,
        provider=job.provider.describe(), go_on=words.go_on(job, store.path),
        batches=tuple(_batch(row, now) for row in batches_in_flight(store, run["id"])),
        log=event_log.lines(
            event_tail(store, run["id"], limit=EVENT_LINES * 25), command_tail(store, run["id"], limit=EVENT_LINES),
            now=now, limit=EVENT_LINES,
        ),
        per_minute=pace(store, run["id"], now=now),
        took=None if standing.engine_alive else work_span(store, run["id"]),
    )


def failures_view(store: Store, name: str, *, kind: str | None, limit: int = FAILED_ROWS) -> FailuresView:
    """Failed items by kind, and the first ``limit`` items of ``kind`` (or, not failed now, of the largest kind)."""
    run_id = store.run_id(name)
    kinds = tuple(
        KindCount(row["kind"] or "unknown", row["n"], row["retryable"], row["message"] or "")
        for row in failure_kinds(store, run_id)
    )
    if kind not in {k.kind for k in kinds}:
        kind = kinds[0].kind if kinds else None
    rows = failed_items(store, run_id, kind=kind, limit=limit) if kind else []
    items = tuple(
        FailedItem(r["key"], r["group"], r["attempts"], r["paid_calls"], r["maybe_paid"], bool(r["retryable"]),
                   r["message"] or "", r["stage"])
        for r in rows
    )
    return FailuresView(name, kinds, kind, items, staged(store, run_id))


def item_view(store: Store, name: str, key: str, *, now: float) -> ItemView:
    """One item of a run in full, with its history from the events table."""
    row = item(store, store.run_id(name), key)
    if row is None:
        raise RunError(f"run {name!r} has no item {key!r}")
    history = tuple(
        HistoryLine(h["at"], now - h["at"], h["batch_id"], h["from_state"], h["to_state"], h["kind"], h["message"],
                    h["items"] if h["batch_move"] else None, h["stage"], h["to_stage"])
        for h in item_history(store, row["id"])
    )
    return ItemView(
        run=name, key=row["key"], group=row["group"], state=row["state"], attempts=row["attempts"],
        paid_calls=row["paid_calls"], maybe_paid=row["maybe_paid"], held=row["hold"] == Hold.CONFIRM,
        input=row["input"], output=row["output"], result=row["result"], kind=row["kind"], message=row["message"],
        retryable=None if row["retryable"] is None else bool(row["retryable"]), history=history, waits=waits(row, now=now),
        stage=row["stage"], staged=staged(store, store.run_id(name)),
        results={stage: json.dumps(result) for stage, result in json.loads(row["results"]).items()},
    )


def stage_tallies(store: Store, name: str) -> tuple[StageTally, ...]:
    """A pipeline's stages in order: items at each now by state, the items that passed it and that skipped it."""
    run_id = store.run_id(name)
    stages = stage_counts(store, run_id)
    return tallies(stages, passes(store, run_id, stages))


def waits(row: Mapping[str, Any], *, now: float) -> str:
    """What a waiting item waits for, in words: a person's decision, its scheduled time, or a back-off's end; ""
    when it is not waiting."""
    if row["state"] != ItemState.WAITING:
        return ""
    if row["hold"] == Hold.DECIDE:
        return f"waiting for a decision at stage {row['stage']}"
    if row["hold"] == Hold.SCHEDULED:
        return scheduled_for(row["not_before"], now=now)
    return f"waiting until {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(row['not_before'] or 0))}"


def decisions_view(store: Store, name: str, *, limit: int = DECISION_ROWS) -> DecisionsView:
    """The items of a run waiting at a decide stage: how many, and the first ``limit`` with their state so far."""
    run_id = store.run_id(name)
    rows = waiting_decisions(store, run_id, limit=limit)
    return DecisionsView(name, decision_count(store, run_id), tuple(
        Decision(r["key"], r["group"], r["stage"], json.loads(r["input"]), json.loads(r["results"])) for r in rows))


def held_view(store: Store, name: str, *, now: float) -> HeldView:
    """The items held for a person on a run, each with its case (what confirming it does)."""
    return HeldView(name, engine_alive(store, name, now=now), tuple(held(store, name)))


def _batch(row: Mapping[str, Any], now: float) -> BatchInFlight:
    since = row["started_at"] if row["started_at"] is not None else row["created_at"]
    return BatchInFlight(
        id=row["id"], group=row["grp"], state=row["state"], size=row["size"], age=now - since,
        upstream_id=row["upstream_id"], retries=row["retries"], round=row["round"], stage=row["stage"],
    )


def held(store: Store, name: str) -> list[HeldItem]:
    """The items of a run that wait for a person, with their case."""
    return [_held_item(row, case_of(row)) for row in store.held_items(store.run_id(name))]


def _held_item(row: dict[str, Any], case: Case) -> HeldItem:
    lands_by = row["lands_by"] if case is Case.ADOPT else None
    return HeldItem(row["key"], row["grp"], case, row["upstream_id"], row["attempts"], row["paid_calls"], lands_by)


def case_of(row: dict[str, Any]) -> Case:
    """What confirming a held item does (a held task's create was sent, or its items would be pending)."""
    left = triage.Left(sent=True, task_id_saved=bool(row["upstream_id"]), create_sent=bool(row["submits"]))
    return Case(triage.on_confirm(left))
