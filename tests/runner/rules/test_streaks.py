"""The run's streaks, rule by rule: how each move changes them, and the stop their new value calls for."""

from __future__ import annotations

import pytest

from runner.model import FailureKind
from runner.rules.streaks import AllInvalid, Move, Refused, Reset, Stop, Streaks, may_stop, moved

NO_LABEL = "result has no label"
REFUSAL = Refused("# unknown parameter #", "400 unknown parameter 7")
ALL_INVALID = Stop(FailureKind.ITEM_INVALID, "item_invalid: result has no label (every result of 3 answers in a row: "
                                             "the job and the model disagree)")
TWICE = Stop(FailureKind.BAD_REQUEST, "bad_request: 400 unknown parameter 7 (refused so twice in a row)")


@pytest.mark.parametrize("before, move, after, stop", [
    (Streaks(), AllInvalid(NO_LABEL), Streaks(all_invalid=1, last_invalid=NO_LABEL), None),
    (Streaks(all_invalid=1, last_invalid=NO_LABEL), AllInvalid(NO_LABEL), Streaks(all_invalid=2, last_invalid=NO_LABEL),
     None),
    (Streaks(all_invalid=2, last_invalid=NO_LABEL), AllInvalid(NO_LABEL), Streaks(all_invalid=3, last_invalid=NO_LABEL),
     ALL_INVALID),
    # Another reason starts the count again; a refusal between them ends.
    (Streaks(all_invalid=2, last_invalid="another reason"), AllInvalid(NO_LABEL),
     Streaks(all_invalid=1, last_invalid=NO_LABEL), None),
    (Streaks(last_refusal="# unknown parameter #", all_invalid=1, last_invalid=NO_LABEL), AllInvalid(NO_LABEL),
     Streaks(all_invalid=2, last_invalid=NO_LABEL), None),
])
def test_every_result_invalid_for_one_reason_three_answers_of_the_run_in_a_row_stops_it(
    before: Streaks, move: Move, after: Streaks, stop: Stop | None
) -> None:
    assert moved(before, move) == (after, stop)


@pytest.mark.parametrize("before, after, stop", [
    (Streaks(), Streaks(last_refusal="# unknown parameter #"), None),
    (Streaks(last_refusal="# another refusal #"), Streaks(last_refusal="# unknown parameter #"), None),
    (Streaks(last_refusal="# unknown parameter #"), Streaks(last_refusal="# unknown parameter #"), TWICE),
    # A refusal leaves the streak of invalid answers as it is.
    (Streaks(all_invalid=2, last_invalid=NO_LABEL), Streaks("# unknown parameter #", 2, NO_LABEL), None),
])
def test_the_same_400_twice_in_a_row_in_the_run_stops_it(before: Streaks, after: Streaks, stop: Stop | None) -> None:
    assert moved(before, REFUSAL) == (after, stop)


@pytest.mark.parametrize("move, after", [
    (Reset(), Streaks()),
    (None, Streaks("# unknown parameter #", 2, NO_LABEL)),
])
def test_an_answer_ends_the_streaks_and_no_move_keeps_them(move: Move | None, after: Streaks) -> None:
    assert moved(Streaks("# unknown parameter #", 2, NO_LABEL), move) == (after, None)


@pytest.mark.parametrize("move, may", [(Reset(), False), (None, False), (AllInvalid(NO_LABEL), True), (REFUSAL, True)])
def test_only_an_all_invalid_answer_or_a_refusal_may_stop_the_run(move: Move | None, may: bool) -> None:
    assert may_stop(move) is may
