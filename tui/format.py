"""How numbers, times and states read on screen (a duration as the core writes it, :func:`runner.words.duration`)."""

from __future__ import annotations

from rich.text import Text

from runner.breaker import Control
from runner.model import BreakerState
from runner.store.answers import RunState
from runner.words import duration as duration, plural

#: One colour per item state, the same on every screen.
STATE_STYLE = {
    "pending": "grey62",
    "queued": "slate_blue1",
    "waiting": "yellow",
    "running": "cyan",
    "received": "orchid1",
    "completed": "green",
    "failed": "red",
}

RUN_STATE_STYLE = {
    RunState.RUNNING: "bold green",
    RunState.PAUSED: "bold yellow",
    RunState.NEEDS_PERSON: "bold black on yellow",
    RunState.DONE: "bold",
    RunState.DONE_WITH_FAILURES: "bold red",
    RunState.STOPPED: "bold",
    RunState.ENGINE_DIED: "bold white on red",
    RunState.CANCELLED: "bold red",
}

BREAKER_STYLE = {BreakerState.CLOSED: "green", BreakerState.PROBING: "yellow", BreakerState.OPEN: "bold red"}


def ago(seconds: float | None) -> str:
    return "never" if seconds is None else f"{duration(seconds)} ago"


def state(name: str) -> Text:
    return Text(name, style=STATE_STYLE.get(name, ""))


def breaker(control: Control, *, concurrency: int, in_flight: int) -> Text:
    """The breaker, its slots and a person's hand on them, in one line.

    ``breaker closed, 2 of 2 slots free``; held (paused, or the breaker open), what a person lets start:
    ``breaker closed · paused by a person: no new batches; 2 slots``, ``...: 1 step allowed; 2 slots``.
    """
    text = Text.assemble(("breaker ", "bold"), (control.breaker.value, BREAKER_STYLE[control.breaker]))
    if control.paused:
        text.append(" · ")
        text.append("paused by a person", style="bold yellow")
    if control.held:
        allowed = f"{plural(control.steps, 'step')} allowed" if control.steps else "no new batches"
        text.append(f": {allowed}; {plural(concurrency, 'slot')}")
    else:
        free = max(control.slots(concurrency) - in_flight, 0)
        text.append(f", {free} of {plural(concurrency, 'slot')} free")
    if control.reason:
        text.append(f"\n  {control.reason}", style="italic")
    return text


def count(n: int) -> str:
    """A count for a table cell: blank for zero, so the numbers that matter stand out."""
    return f"{n:,}" if n else ""
