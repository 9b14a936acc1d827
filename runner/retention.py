"""How long finished items stay in a run before ``runner archive`` moves them to its archive (issue 19).

A job's ``[retention]`` gives an age per finished state (``completed =
"30d"``, ``failed = "90d"``; a state without one is kept): ``runner archive
NAME`` with no flags, and ``runner run`` at its end, archive the items that
have been in that state longer. ``--older`` gives the age for every state
archived, ``--state`` one state alone (at its age, or any age when neither
gives one). A failed item is never dropped: the archive keeps it whole, and
``runner restore`` brings it back.

Durations are a whole number and a unit: ``30d`` (days), ``12h`` (hours),
``90m`` (minutes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import InputError, JobError

#: Seconds per unit of a duration (a retention age takes d, h or m; a time from now, ``in 90s``, s too).
UNITS = {"d": 86_400, "h": 3_600, "m": 60, "s": 1}
#: The finished states, in the order they are named.
FINISHED = ("completed", "failed")


@dataclass(frozen=True)
class Retention:
    """``[retention]``: how long the items of each finished state stay before they are archived ("": kept)."""

    completed: str = ""
    failed: str = ""

    def checked(self, where: str) -> Retention:
        """These ages, each a duration; else a JobError naming the job file (``where``) and the key."""
        for state, age in self.given().items():
            seconds(age, f"{where} [retention] {state!r}", error=JobError)
        return self

    def given(self) -> dict[str, str]:
        """The ages set, by state."""
        return {state: getattr(self, state) for state in FINISHED if getattr(self, state)}


def seconds(text: str, where: str, *, error: type[Exception] = InputError) -> int:
    """The seconds of a duration (``30d``, ``12h``, ``90m``); else ``error``, saying what a duration is."""
    found = span(text, "dhm")
    if found is None:
        raise error(f"{where}: {text!r} is not a duration (a whole number and d, h or m: 30d, 12h, 90m)")
    return found


def span(text: str, units: str) -> int | None:
    """The seconds of a whole number and one of ``units`` (of :data:`UNITS`), spaces around either allowed:
    ``90m``, ``2 h``; None when the text is not one."""
    found = re.fullmatch(rf"\s*(\d{{1,9}})\s*([{units}])\s*", text)
    return None if found is None else int(found[1]) * UNITS[found[2]]


def ages(retention: Retention, *, older: str | None, state: str | None) -> dict[str, str]:
    """The age each state is archived at, as given (``--older``, ``--state``, else the job's ``[retention]``);
    a state left out is not archived. ``--state`` without an age of its own takes every finished item of it."""
    states = (state,) if state else FINISHED
    if older is not None:
        return {s: older for s in states}
    kept = retention.given()
    return {s: kept.get(s, "0m") for s in states} if state else kept


def before(ages: dict[str, str], *, now: float) -> dict[str, float]:
    """Each state's time at or before which its items last changed to be archived (``now`` less its age)."""
    return {state: now - seconds(age, f"[retention] {state}") for state, age in ages.items()}
