"""The head of a run's screen: its state, how its engine stands or ended, its pace, the breaker (and a rate limit
waited out, the shared queue it takes turns in), what a person can do."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from runner import budgets, progress_line
from runner.model import BreakerState, FailureKind, ItemState
from runner.store.answers import Hold, RunState, RunView, Standing, why_no_estimate
from runner.words import archived, plural, with_workers

from . import format


class RunPanel(Static):
    """The run's state, its engine, throughput and estimate (or, once it ended, how long it took), and the breaker."""

    def show(self, view: RunView) -> None:
        self.update(run_text(view))


def run_text(view: RunView) -> Text:
    run = view.standing
    text = Text.assemble(
        (run.name, "bold"), "  ", (f" {run.state.value} ", format.RUN_STATE_STYLE[run.state]),
        "  " + " · ".join(part for part in (f"{run.total:,} items", archived(run.archived), view.provider) if part)
        + "\n",
        ("engine ", "bold"),
    )
    text.append_text(engine(view))
    text.append("\n")
    text.append_text(pace(view))
    text.append("\n")
    text.append(budgets.cost_line(run.cost, run.budget), style="dim" if run.cost.spent is not None else "yellow")
    text.append("\n")
    text.append_text(format.breaker(run.control, concurrency=view.concurrency, in_flight=view.in_flight))
    if run.rate_limited_until is not None:
        text.append("\n")
        text.append(progress_line.rate_limited(run.rate_limited_until, now=run.read_at), style="bold yellow")
    if run.queue is not None:
        text.append("\n")
        text.append(progress_line.queue(run.queue, run.control, now=run.read_at), style="magenta")
    if run.scheduled:
        text.append("\n")
        text.append(progress_line.scheduled(run.scheduled, run.next_scheduled_at, now=run.read_at), style="cyan")
    for line in needs(view):
        text.append("\n")
        text.append("▶ ", style="bold yellow")
        text.append(line)
    return text


def engine(view: RunView) -> Text:
    """Whether an engine works on the run; if not, how the last one ended: gave the run back, or died holding it."""
    run = view.standing
    goes_on = f"; `{view.go_on}` goes on"
    if run.engine_alive:
        return Text.assemble(("alive", "green"), f"{with_workers(run.alive_workers)}: it obeys a command within a second")
    if run.engine_died:
        return Text.assemble(
            ("died", "bold red"), f": no heartbeat for {format.duration(run.engine_silent_for or 0.0)}",
            f"; `{view.go_on}` recovers the run",
        )
    ended = {
        RunState.DONE: "every item completed",
        RunState.DONE_WITH_FAILURES: f"every item finished, {run.counts[ItemState.FAILED]:,} failed (f shows them)",
        RunState.STOPPED: f"stopped with {plural(run.unfinished, 'item')} to do{goes_on}",
        RunState.CANCELLED: f"cancelled by a person, {plural(run.cancelled, 'item')} cancelled (f shows them)",
    }
    said = ended[run.state] if run.state in ended else f"stopped for a person: {_why_held(run)}"
    if run.held_by is Hold.DECISION and run.moving:  # decisions wait, and the other items for an engine
        said += f"; {plural(run.moving, 'item')} to do{goes_on}"
    return Text.assemble(("ended", "bold"), f": {said}")


def _why_held(run: Standing) -> str:
    """What holds a run stopped for a person, as the store's standing says (its ``held_by``), in words."""
    hold = run.held_by
    assert hold is not None, "a run stopped for a person is held by something"
    if hold is Hold.CONFIRMATION:
        return f"{plural(run.held, 'item awaits', 'items await')} confirmation"
    if hold is Hold.DECISION:
        return f"{plural(run.needs_decision, 'item waits', 'items wait')} for a decision (d shows them)"
    return hold.value


def pace(view: RunView) -> Text:
    """A live run's throughput and estimate; without an engine, how many items finished in how long.

    How long: from the run's first start to its last finish, as the store tells (``RunView.took``).
    """
    run = view.standing
    text = Text()
    if view.took is None:  # (always None while an engine works on the run)
        rate = f"{view.per_minute:,.0f}" if view.per_minute >= 10 else f"{view.per_minute:.1f}"
        text.append("throughput ", style="bold")
        through = " through a stage" if len(run.stages) > 1 else ""
        text.append(f"{rate} items/min{through}" if run.engine_alive else "none: no engine at work")
    else:
        text.append("took ", style="bold")
        text.append(f"{format.duration(view.took)}: {settled(run)}")
        if not run.unfinished:
            return text
    text.append(" · ")
    text.append("left ", style="bold")
    text.append(_eta(view))
    return text


def settled(run: Standing) -> str:
    """The items a run settled, in words that tell the completed from the failed (and the cancelled among them)."""
    said = plural(run.counts[ItemState.COMPLETED], "item") + " completed"
    failed = run.counts[ItemState.FAILED]
    if failed:
        said += f", {failed:,} failed" + (f" ({run.cancelled:,} of them cancelled)" if run.cancelled else "")
    return said


def _eta(view: RunView) -> str:
    eta, run = view.eta, view.standing
    if eta == 0.0:
        return "nothing: every item completed or failed"
    left = plural(run.unfinished, 'item')
    held = run.held + run.needs_decision
    waiting = f", {held:,} of them wait for a person" if held else ""
    waiting += f", {run.scheduled:,} scheduled for later" if run.scheduled else ""
    if eta is not None:
        return f"{left}, {progress_line.about(eta)} at this rate{waiting}"
    return f"{left}{waiting}; {why_no_estimate(run)}"


def needs(view: RunView) -> list[str]:
    """What a person can do about a held run, by its cause."""
    run = view.standing
    lines = []
    if run.held:
        lines.append(f"{plural(run.held, 'item awaits', 'items await')} your confirmation after a crash: c shows them")
    if run.needs_decision:
        lines.append(f"{plural(run.needs_decision, 'item waits', 'items wait')} for your decision, not for a time: "
                     "d shows them one at a time")
    if run.engine_alive:
        step, then = "s steps one batch", ""
    else:  # a key only writes a command, which the next engine obeys
        step, then = "s allows one batch", f"; no engine works on it: `{view.go_on}` goes on"
    if run.control.breaker is BreakerState.OPEN and run.control.kind is FailureKind.BUDGET:
        goes_on = ", and the run goes on" if run.engine_alive else ""
        lines.append(f"stopped at its budget: b gives a larger one{goes_on}; {step} past it{then}")
    elif run.control.breaker is BreakerState.OPEN:
        lines.append(f"the breaker is open: fix the cause, then r resumes (one batch at a time) or {step}{then}")
    elif run.control.paused:
        lines.append(f"paused: r resumes, {'s lets exactly one batch run' if run.engine_alive else step}{then}")
    return lines
