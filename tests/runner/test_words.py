"""Words the CLI, the TUI and the panel share: a retry's outcome tells the items sent back to a decision apart."""

from __future__ import annotations

import pytest

from runner.model import Retried
from runner.words import retried


@pytest.mark.parametrize("done, said", [
    (Retried(3), "3 failed items of run 'x' pending again"),
    (Retried(1, 1), "1 failed item of run 'x' waiting again for a person's decision"),
    (Retried(3, 1), "3 failed items of run 'x' sent again: 2 pending, 1 waiting for a person's decision"),
])
def test_a_retry_says_which_items_wait_again_for_a_decision_rather_than_pending(done: Retried, said: str) -> None:
    assert retried(done, of=" of run 'x'") == said
