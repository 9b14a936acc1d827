"""What :mod:`runner.store.views` answers: one named tuple per question a UI asks.

The CLI, the TUI and the notebook panel render these and decide nothing: what
a run's state is as a person sees it, how many batches may start and how long
the rest will take are properties here, read off the store's numbers. Most
are named tuples rather than dataclasses: as immutable, and defined in a
tenth of the time, which every cold ``runner status`` pays.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, NamedTuple

from ..budgets import BudgetView
from ..costs import Cost
from ..rules.budget import Budget, Committed, Left
from ..model import UNFINISHED, BreakerState, ItemState
from ..rules.breaker import Control
from .expiry import Expiring
from .worker_rows import WorkerShown
from .answers_items import (
    Decision, DecisionsView, FailedItem, FailuresView, HeldView, HistoryLine, ItemView, KindCount, ScheduledItem,
    ScheduledView, stage_note,
)

__all__ = [  # from answers_items
    "Decision", "DecisionsView", "FailedItem", "FailuresView", "HeldView", "HistoryLine", "ItemView", "KindCount",
    "ScheduledItem", "ScheduledView", "stage_note",
]

#: The seven states, in the order every UI shows them.
STATES = tuple(s.value for s in ItemState)


class RunState(StrEnum):
    """A run as a person sees it, from the store and the engine's lease."""

    RUNNING = "running"
    PAUSED = "paused"
    NEEDS_PERSON = "needs a person"
    DONE = "done"
    #: Nothing left to do, and some items failed (``runner run`` exits 3).
    DONE_WITH_FAILURES = "done, failures"
    #: Its engine gave the run back with work left and nothing for a person (a Ctrl-C, say).
    STOPPED = "stopped"
    #: Its engine stopped beating without giving the run back: killed, or its machine lost.
    ENGINE_DIED = "engine died"
    #: Nothing left to do: a person cancelled the whole run (``runner cancel NAME``), its last command.
    CANCELLED = "cancelled by a person"


class Hold(StrEnum):
    """What holds an unfinished run for a person, as :attr:`Standing.held_by` reads it."""

    CONFIRMATION = "items await confirmation"
    #: Only items waiting at a ``decide`` stage are left; or some are, and no engine works the others.
    DECISION = "items await a decision"
    BREAKER_OPEN = "breaker open"
    PAUSE = "paused"


class StageTally(NamedTuple):
    """One stage of a run: items there now by state, the items that passed it (its result saved there; a run of
    one stage: completed) and that skipped it (its ``when`` false)."""

    stage: str
    counts: Mapping[str, int]
    passed: int
    skipped: int

    @property
    def here(self) -> tuple[tuple[str, int], ...]:
        """The states of the items at the stage now, those with any, in the order of :data:`STATES`."""
        return tuple((state, self.counts[state]) for state in STATES if self.counts.get(state))


def tallies(stages: Mapping[str, Mapping[str, int]], passes: Mapping[str, Mapping[str, int]]) -> tuple[StageTally, ...]:
    """Each stage of ``stages`` (items by state) in order, with what ``passes`` says passed and skipped it."""
    none = {"passed": 0, "skipped": 0}
    return tuple(StageTally(stage, counts, passes.get(stage, none)["passed"], passes.get(stage, none)["skipped"])
                 for stage, counts in stages.items())


class QueueShare(NamedTuple):
    """The run's shared queue (``[provider] queue``) as every view shows it, and what this run holds of it."""

    name: str
    concurrency: int
    #: The queue's breaker, shared by its runs.
    control: Control
    #: The time before which no batch of the queue starts (a 429's Retry-After); None once it passed.
    quiet_until: float | None
    #: This run's batches in flight and waiting for a slot (0 without a live engine), and all its runs' in flight.
    held: int
    waiting: int
    in_flight: int

    def json(self) -> dict[str, Any]:
        return {"name": self.name, "concurrency": self.concurrency, "held": self.held, "waiting": self.waiting,
                "in_flight": self.in_flight,
                "breaker": {"state": self.control.breaker.value, "reason": self.control.reason},
                "quiet_until": self.quiet_until}


class Standing(NamedTuple):
    """Where one run stands: what ``runner status`` prints, a line of the TUI's runs, the panel's head."""

    name: str
    #: Items by state, every state present.
    counts: Mapping[str, int]
    #: Items by group and state, every state present in each group.
    groups: Mapping[str, Mapping[str, int]]
    control: Control
    #: Items held for a person's confirmation.
    held: int
    engine_alive: bool
    #: Upstream tasks found beside a batch's own (each may have billed what it ran).
    duplicate_tasks: int
    #: Seconds since an item of the run last changed state (None: never).
    idle_for: float | None
    #: Seconds since the last heartbeat of an engine that still holds the run's lease but no longer
    #: lives (it died without giving the run back); None when no engine holds it, or a live one does.
    engine_silent_for: float | None = None
    #: The run's calls that were billed (each answered call, per item), and those that may have been (answer lost).
    paid_calls: int = 0
    maybe_paid: int = 0
    #: While a live engine waits out a rate limit (a 429's Retry-After), the time before which no batch starts.
    rate_limited_until: float | None = None
    #: Items failed as ``cancelled`` by a person.
    cancelled: int = 0
    #: A person cancelled the whole run (``runner cancel NAME`` with no keys), the last command it was given.
    cancelled_whole: bool = False
    #: Items by their current stage and state, the stages in the job's order.
    stages: Mapping[str, Mapping[str, int]] = {}
    #: Per stage, the items that passed it (``passed``: its result saved) and that skipped it (``skipped``).
    passes: Mapping[str, Mapping[str, int]] = {}
    #: Items waiting at a ``decide`` stage for a person's decision (counted as ``waiting``, with no time).
    needs_decision: int = 0
    #: Parents of a fan-out waiting at their join for their sub-items (counted as ``waiting``).
    waiting_for_sub_items: int = 0
    #: What the run cost (issue 18): spent, unknown, in flight, tokens, from its ledger at its job's prices.
    cost: Cost = Cost()
    #: Saved tasks whose results were not fetched and expire within a day (``runner.store.expiry``).
    expiring: tuple[Expiring, ...] = ()
    #: Items waiting for the time their input scheduled them at (counted as ``waiting``), and the earliest such time.
    scheduled: int = 0
    next_scheduled_at: float | None = None
    #: Items moved to the run's archive (``runner archive``): still counted above, by the state they were in.
    archived: int = 0
    #: When the store was read: a time in it is shown with its date when that day is not this one's.
    read_at: float | None = None
    #: The run's shared queue (None: it names none); ``control`` is then the worse of the run's and the queue's.
    queue: QueueShare | None = None
    #: The run's budget (issue 18's guard): its limits, what the run committed to and what is left.
    budget: BudgetView = BudgetView(Budget(), Committed(), Left())
    #: The run's workers (issue 20), alive or not, the longest at work first.
    workers: tuple[WorkerShown, ...] = ()

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def unfinished(self) -> int:
        return sum(self.counts[s] for s in UNFINISHED)

    @property
    def moving(self) -> int:
        """Unfinished items the engine may finish on its own (not held for a person, nor waiting for a decision)."""
        return self.unfinished - self.held - self.needs_decision

    @property
    def due(self) -> int:
        """Items the engine may finish on its own now: those moving, less those scheduled for later."""
        return max(self.moving - self.scheduled, 0)

    @property
    def tallies(self) -> tuple[StageTally, ...]:
        """Each stage in order: the items there now by state, and those that passed it and that skipped it."""
        return tallies(self.stages, self.passes)

    @property
    def stages_ahead(self) -> float:
        """The stages an unfinished item has still to pass, on the average (1 for a run of one stage): what turns
        the items done with a stage per minute into time left (an item that skips a stage ahead takes less)."""
        order = list(self.stages.values())
        ahead = [(sum(counts[s] for s in UNFINISHED), len(order) - i) for i, counts in enumerate(order)]
        items = sum(n for n, _ in ahead)
        return sum(n * stages for n, stages in ahead) / items if items else 1.0

    @property
    def alive_workers(self) -> int:
        """How many live workers work the run together (several ``runner run NAME`` on one store)."""
        return sum(worker.alive for worker in self.workers)

    @property
    def engine_died(self) -> bool:
        """The engine that held the run died: its lease was never given back, only let lapse."""
        return self.engine_silent_for is not None

    @property
    def held_by(self) -> Hold | None:
        """What holds the run for a person, the first of: items to confirm, decisions alone left, the breaker open,
        a pause, decisions waiting while no engine works the other items (a stopped run whose decisions wait needs a
        person first: the items an engine could move wait for a ``runner run`` too); else None."""
        if self.held:
            return Hold.CONFIRMATION
        if self.needs_decision and not self.moving:
            return Hold.DECISION
        if self.control.breaker is BreakerState.OPEN:
            return Hold.BREAKER_OPEN
        if self.control.paused:
            return Hold.PAUSE
        return Hold.DECISION if self.needs_decision and not self.engine_alive else None

    @property
    def state(self) -> RunState:
        if not self.unfinished and self.cancelled_whole:
            return RunState.CANCELLED
        if not self.unfinished:
            return RunState.DONE_WITH_FAILURES if self.counts[ItemState.FAILED] else RunState.DONE
        if self.engine_died:
            return RunState.ENGINE_DIED
        if self.held_by is not None:
            return RunState.PAUSED if self.held_by is Hold.PAUSE else RunState.NEEDS_PERSON
        return RunState.RUNNING if self.engine_alive else RunState.STOPPED

    def status(self) -> dict[str, Any]:
        """The status contract of the brief (``runner status NAME --json``)."""
        return {
            "run": self.name,
            "total": self.total,
            "counts": dict(self.counts),
            "groups": {group: dict(counts) for group, counts in self.groups.items()},
            "breaker": {"state": self.control.breaker.value, "reason": self.control.reason},
            "needs_confirmation": self.held,
            "engine": {"alive": self.engine_alive},
            "duplicate_tasks": self.duplicate_tasks,
            "paused": self.control.paused,
            "steps_allowed": self.control.steps,
            "paid_calls": self.paid_calls,
            "maybe_paid": self.maybe_paid,
            "cancelled": self.cancelled,
            # Added with stages (issue 17): items by current stage and state; ``counts`` stays by current state.
            # Each stage also has ``passed`` (its result saved) and ``skipped`` (its ``when`` false).
            # Added with reuse (issue 19): ``reused``, the results a stage took from the same work with no call.
            "stages": {t.stage: {**t.counts, "passed": t.passed, "skipped": t.skipped,
                                 "reused": self.reused_at(t.stage)} for t in self.tallies},
            # Added with decisions (issue 17): items waiting at a decide stage (within counts' ``waiting``).
            "needs_decision": self.needs_decision,
            # Added with fan-out (issue 17): parents waiting at their join for their sub-items (in ``waiting``).
            "waiting_for_sub_items": self.waiting_for_sub_items,
            # Added with the ledger (issue 18): spent, unknown, in flight (USD; null when unknown, with the reason).
            "cost": self.cost.as_json(),
            # Added with expiring results (issue 18): saved tasks whose results were not fetched and expire
            # within a day, each {"batch", "task", "stage", "group", "items", "expires_at"}.
            "expiring": [task.json() for task in self.expiring],
            # Added with schedules (issue 19): items waiting for their scheduled time (in ``waiting``), and the
            # earliest such time (seconds since the epoch; null when none).
            "scheduled": self.scheduled,
            "next_scheduled_at": self.next_scheduled_at,
            # Added with shared queues (issue 19): the run's queue, null when it names none; ``breaker`` above is
            # then the worse of the run's and the queue's. {"name", "concurrency", "held" (this run's batches in
            # flight), "waiting" (this run's batches waiting for a slot), "in_flight" (all its runs'), "breaker"
            # {"state", "reason"}, "quiet_until" (seconds since the epoch; null when none)}.
            "queue": None if self.queue is None else self.queue.json(),
            # Added with the archive (issue 19): items moved to the run's archive, still in ``counts`` and the totals.
            "archived": self.archived,
            # Added with the budget guard (issue 18): {"max_cost", "max_tokens", "left": {"cost", "tokens"}}, what
            # the budget leaves after spent, in flight and unknown charges; null when no budget is set.
            "budget": self.budget.as_json(),
            # Added with reuse (issue 19): results taken from the same work with no call, not billed (per stage in
            # ``stages``).
            "reused": self.cost.reused,
            # Added with several workers (issue 20): each worker of the run, alive or not, as {"host", "pid",
            # "heartbeat_age" (seconds), "alive", "batches", "items"} (what it holds: its batches queued or running).
            "workers": [worker.json() for worker in self.workers],
        }

    def reused_at(self, stage: str) -> int:
        """The results ``stage`` took from the same work with no call (``[cache] reuse``)."""
        return self.cost.stages[stage].reused if stage in self.cost.stages else 0


class BatchInFlight(NamedTuple):
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
    #: The stage whose call the batch makes (a batch is one stage's and one group's).
    stage: str = ""


class LogLine(NamedTuple):
    """One line of the event log: items that changed state together (a batch's, or some items'), or a person's command."""

    age: float
    what: str
    detail: str = ""
    #: ``person`` for a command, else the state the items went to.
    tone: str = ""


class RunView(NamedTuple):
    """Everything a run's screen shows: where it stands, its batches in flight, throughput and the log."""

    standing: Standing
    concurrency: int
    #: The provider's kind and model, as one line.
    provider: str
    #: The command (or Python call) that continues the run, spelt for the store it was read from.
    go_on: str
    batches: tuple[BatchInFlight, ...]
    log: tuple[LogLine, ...]
    #: Items done with a stage (completed, failed, or on to the next) per minute, over the last minute of events.
    per_minute: float
    #: Seconds from the run's first start to its last completion (or failure), read once no engine
    #: works on it; None while one does, or before anything finished.
    took: float | None = None

    @property
    def slots(self) -> int:
        """How many batches may be in flight now, given the breaker and a person's hand."""
        return self.standing.control.slots(self.concurrency)

    @property
    def in_flight(self) -> int:
        return sum(1 for batch in self.batches if batch.state == "running")

    @property
    def moving(self) -> int:
        """Unfinished items the engine may finish on its own (not held for a person)."""
        return self.standing.moving

    @property
    def eta(self) -> float | None:
        """Seconds left at the current rate (:func:`time_left`)."""
        return time_left(self.standing, self.per_minute)


def time_left(standing: Standing, per_minute: float) -> float | None:
    """The one estimate of the time a run has left, in seconds, that the progress line and the TUI show.

    Its items due now, each with the stages ahead of it, at ``per_minute`` (items done with a stage per minute of
    late): items scheduled for later are left out (a view says them apart); 0 when nothing is left; None while
    nothing can move (paused, the breaker open, a rate limit waited out, only held or scheduled items left), no
    engine works on it, or nothing finished of late.
    """
    if not standing.unfinished:
        return 0.0
    if not standing.engine_alive or standing.control.held or standing.rate_limited_until is not None:
        return None
    if per_minute <= 0 or standing.due <= 0:
        return None
    return standing.due * standing.stages_ahead / per_minute * 60.0


def why_no_estimate(standing: Standing) -> str:
    """Why :func:`time_left` gives none, in the order it asks, for a view to say."""
    if not standing.engine_alive:
        return "no estimate without an engine"
    if standing.control.paused:
        return "no estimate while paused"
    if standing.control.held:
        return "no estimate while the breaker is open"
    if standing.rate_limited_until is not None:
        return "no estimate while rate limited"
    if standing.moving <= 0:
        return "they wait for a person"
    if standing.due <= 0:
        return "they wait for their scheduled time"
    return "none finished in the last minute"
