"""Recovery's order over what a stopped engine left: the first case that holds decides."""

from __future__ import annotations

import pytest

from runner.model import Case as HeldCase
from runner.store import views
from runner.rules.triage import Case, Left, on_confirm, triage

SENT = {"sent": True}


@pytest.mark.parametrize("left, case", [
    (Left(input_changed=True, output_saved=True, sent=True, confirmed=True, task_id_saved=True), Case.INPUT_CHANGED),
    (Left(output_saved=True, sent=True, task_id_saved=True), Case.VALIDATE),
    (Left(output_saved=True), Case.VALIDATE),
    (Left(), Case.PENDING),
    (Left(confirmed=True, task_id_saved=True, create_sent=True), Case.PENDING),
    (Left(**SENT), Case.HOLD),
    (Left(**SENT, task_id_saved=True, create_sent=True), Case.HOLD),
    (Left(**SENT, confirmed=True, task_id_saved=True, create_sent=True), Case.POLL),
    (Left(**SENT, confirmed=True, create_sent=True), Case.ADOPT),
    (Left(**SENT, confirmed=True), Case.RESUBMIT),
])
def test_recovery_goes_input_changed_saved_output_never_sent_held_poll_adopt_resubmit(left: Left, case: Case) -> None:
    assert triage(left) is case


@pytest.mark.parametrize("left, case", [
    (Left(**SENT, task_id_saved=True, create_sent=True), Case.POLL),
    (Left(**SENT, create_sent=True), Case.ADOPT),
    (Left(**SENT), Case.RESUBMIT),
])
def test_confirming_a_held_item_polls_its_task_adopts_a_lost_create_or_resubmits_a_lost_call(
    left: Left, case: Case
) -> None:
    assert on_confirm(left) is case


@pytest.mark.parametrize("row, case", [
    ({"upstream_id": "batch_1", "submits": 1}, HeldCase.POLL),
    ({"upstream_id": None, "submits": 1}, HeldCase.ADOPT),
    ({"upstream_id": None, "submits": 0}, HeldCase.RESUBMIT),
])
def test_a_held_item_is_shown_with_the_case_triage_gives_confirming_it(
    row: dict[str, object], case: HeldCase
) -> None:
    assert views.case_of(row) is case
