"""The estimate of a batch's cost: input characters / 4 at the input price, the stage's average output so far."""

from __future__ import annotations

import pytest

from runner.pricing import BUILT_IN, Price
from runner.rules import estimate
from runner.rules.estimate import Seen

MINI = BUILT_IN["gpt-4o-mini"]
ROUND = Price(input=1.0, output=2.0, per=1)


@pytest.mark.parametrize(("chars", "items", "seen", "price", "batch", "expected"), [
    # before any answer: expected_output_tokens (200) per item
    (400, 1, Seen(), ROUND, False, 100 * 1.0 + 200 * 2.0),
    (401, 1, Seen(), ROUND, False, 101 * 1.0 + 200 * 2.0),  # tokens rounded up
    # the stage's average output per item answered so far
    (400, 10, Seen(output_tokens=300, items=3), ROUND, False, 100 + 10 * 100 * 2.0),
    # a batch kind: half price unless the price says otherwise
    (400, 1, Seen(), ROUND, True, (100 + 400) * 0.5),
    (400, 1, Seen(), Price(1.0, 2.0, per=1, batch_discount=0.0), True, 500.0),
    (4_000_000, 0, Seen(), MINI, False, 0.15),
    (0, 5, Seen(output_tokens=1_000_000, items=5), MINI, False, 0.60),
])
def test_estimate_is_input_chars_over_four_and_average_output_so_far(chars, items, seen, price, batch, expected):
    got = estimate.cost(chars=chars, items=items, seen=seen, expected_output_tokens=200, price=price, batch=batch)
    assert got == pytest.approx(expected)


def test_an_unknown_price_estimates_an_unknown_cost_never_zero():
    assert estimate.cost(chars=400, items=1, seen=Seen(), expected_output_tokens=200, price=None, batch=False) is None


def test_estimated_tokens_say_input_and_output():
    got = estimate.tokens(chars=10, items=2, seen=Seen(), expected_output_tokens=50)
    assert (got.input, got.output) == (3, 100)
