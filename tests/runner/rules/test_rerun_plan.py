"""A re-run's plan: each item sent again is charge-safe or may be billed again, with each part's estimated cost."""

from __future__ import annotations

import pytest

from runner.rules.rerun_plan import Group, Part, RerunPlan, Resend, Resent, Share, calls, part, plan


@pytest.mark.parametrize("resent, expected", [
    (Resent(Resend.POLL, lost=True, answered=True), Part.CHARGE_SAFE),  # a saved task polled: no new task
    (Resent(Resend.ADOPT, lost=True), Part.CHARGE_SAFE),  # found and polled, or sent once it can no longer land
    (Resent(Resend.RESUBMIT), Part.MAY_REPEAT),  # a call whose answer was lost, sent again
    (Resent(Resend.RETRY, "rejected", answered=True, lost=True), Part.CHARGE_SAFE),  # waits for a person, no call
    (Resent(Resend.RETRY, "item_invalid"), Part.MAY_REPEAT),  # answered: a re-attempt is billed again
    (Resent(Resend.RETRY, "batch_invalid"), Part.MAY_REPEAT),
    (Resent(Resend.RETRY, "transport", lost=True), Part.MAY_REPEAT),  # a drop after sending: an unknown charge
    (Resent(Resend.RETRY, "rate_limited", answered=True), Part.MAY_REPEAT),  # answered before it was refused
    (Resent(Resend.RETRY, "rate_limited"), Part.CHARGE_SAFE),  # refused before running
    (Resent(Resend.RETRY, "billing"), Part.CHARGE_SAFE),
    (Resent(Resend.RETRY, "transport"), Part.CHARGE_SAFE),  # a Batch API line not run, a 5xx: nothing billed
    (Resent(Resend.RETRY, "cancelled"), Part.CHARGE_SAFE),  # cancelled before it was sent
    (Resent(Resend.REVALIDATE_AGAIN), Part.MAY_REPEAT),  # a result now invalid: it was answered
    (Resent(Resend.REVALIDATE_KEPT), Part.CHARGE_SAFE),  # kept or completed with no call
])
def test_an_item_sent_again_is_charge_safe_unless_a_call_of_it_may_have_been_billed(
    resent: Resent, expected: Part
) -> None:
    assert part(resent) is expected


@pytest.mark.parametrize("resent, called", [
    (Resent(Resend.POLL), True),
    (Resent(Resend.RETRY, "rejected"), False),
    (Resent(Resend.RETRY, "item_invalid"), True),
    (Resent(Resend.REVALIDATE_KEPT), False),
    (Resent(Resend.REVALIDATE_AGAIN), True),
])
def test_only_items_sent_with_a_call_are_priced(resent: Resent, called: bool) -> None:
    assert calls(resent) is called


def per_item(stage: str, items: int, chars: int) -> float | None:
    return None if stage == "unpriced" else items * 0.01 + chars * 0.0


def test_each_part_adds_its_items_and_their_estimate() -> None:
    shown = plan([
        Group("a", Resent(Resend.POLL), 100, 4000),
        Group("a", Resent(Resend.RESUBMIT), 20, 800),
        Group("a", Resent(Resend.RETRY, "rejected"), 5, 100),  # no call: costs nothing
    ], per_item)
    assert shown == RerunPlan(Share(105, pytest.approx(1.0)), Share(20, pytest.approx(0.2)))


def test_a_part_with_an_unpriced_stage_costs_unknown_never_zero() -> None:
    shown = plan([Group("a", Resent(Resend.RESUBMIT), 2, 10), Group("unpriced", Resent(Resend.RESUBMIT), 1, 5)],
                 per_item)
    assert shown.may_repeat == Share(3, None)


def test_the_plan_reads_items_charge_safe_and_may_be_billed_again_each_with_its_estimate() -> None:
    assert str(RerunPlan(Share(100, 0.02), Share(20, None))) == (
        "plan: 120 items · 100 charge-safe (est. $0.0200) · 20 may be billed again (cost unknown)")
    assert str(RerunPlan(Share(1, 0.0))) == "plan: 1 item · 1 charge-safe (est. $0.0000) · 0 may be billed again"


def test_a_plan_counts_and_names_the_items_not_retryable_as_they_are() -> None:
    shown = plan([Group("a", Resent(Resend.RETRY, "bad_request", retryable=False), 2, 10),
                  Group("a", Resent(Resend.RETRY, "transport"), 3, 10)], per_item)
    assert shown.not_retryable == 2
    assert str(shown).endswith(" · 0 may be billed again · 2 not retryable as they are (refused as sent: fix the "
                               "cause first, or it fails the same way)")
