"""The run's streaks: what the answers and refusals of all its workers say in a row, and when they stop the run.

A verdict (:mod:`runner.rules.judge`) carries how its call moves them, never
their new value; the store applies the move to the run's row in the
settlement's transaction (:func:`moved`), so that two workers judging at once
lose no move, and the stop is decided from the value after it:

| move                                        | the streaks after it                                       |
|---------------------------------------------|------------------------------------------------------------|
| :class:`Reset`: an answer                   | none                                                       |
| :class:`AllInvalid`: every result of an     | one more answer in a row for that reason (one, for another |
| answer invalid for one reason               | reason); no refusal: :data:`INVALID_IN_A_ROW` stop the run |
| :class:`Refused`: a bad request no batch    | its gist the last refusal; the same gist as the last one   |
| would pass                                  | stops the run                                              |
| none (no answer, another failure)           | unchanged                                                  |

These are the run's: with several workers, three answers in a row are the
run's three, whichever worker got them. A worker's rate limits in a row stay
its own (they only set its back-off's length: the quiet time is the run's).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model import FailureKind

#: Answers in a row whose every result is invalid for the same reason before the run stops for a person.
INVALID_IN_A_ROW = 3
#: The kinds of the stops the streaks call for.
STOPS = (FailureKind.ITEM_INVALID, FailureKind.BAD_REQUEST)


@dataclass(frozen=True)
class Streaks:
    """What the run remembers from one verdict to the next, whichever of its workers gave it."""

    #: The gist of the last batch the upstream refused as a bad request, until an answer comes.
    last_refusal: str | None = None
    #: Answers in a row whose every result was invalid for the same reason, and that reason.
    all_invalid: int = 0
    last_invalid: str | None = None


@dataclass(frozen=True)
class Stop:
    """Why the run must stop for a person: the failure's kind, and the reason to show."""

    kind: FailureKind
    reason: str


@dataclass(frozen=True)
class Reset:
    """An answer came: the streaks end."""


@dataclass(frozen=True)
class AllInvalid:
    """An answer whose every result (two or more) is invalid for ``reason``."""

    reason: str


@dataclass(frozen=True)
class Refused:
    """A bad request no batch would pass: its gist (``reason``), and the upstream's ``message``."""

    reason: str
    message: str


#: How a call moves the run's streaks (None: it leaves them as they are).
Move = Reset | AllInvalid | Refused


def stopping(kind: FailureKind, message: str) -> Stop:
    """The stop for a failure of ``kind``: its reason names the kind."""
    return Stop(kind, f"{kind.value}: {message}")


def may_stop(move: Move | None) -> bool:
    """Whether the move can stop the run (an answer's reset never does)."""
    return isinstance(move, AllInvalid | Refused)


def moved(before: Streaks, move: Move | None) -> tuple[Streaks, Stop | None]:
    """The streaks after ``move``, and the stop they call for."""
    if isinstance(move, Reset):
        return Streaks(), None
    if isinstance(move, AllInvalid):
        in_a_row = before.all_invalid + 1 if before.last_invalid == move.reason else 1
        after = Streaks(all_invalid=in_a_row, last_invalid=move.reason)
        if in_a_row < INVALID_IN_A_ROW:
            return after, None
        return after, stopping(FailureKind.ITEM_INVALID, f"{move.reason} (every result of {in_a_row} answers in a "
                                                         "row: the job and the model disagree)")
    if isinstance(move, Refused):
        after = Streaks(last_refusal=move.reason, all_invalid=before.all_invalid, last_invalid=before.last_invalid)
        if before.last_refusal != move.reason:
            return after, None
        return after, stopping(FailureKind.BAD_REQUEST, f"{move.message} (refused so twice in a row)")
    return before, None
