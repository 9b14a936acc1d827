"""How old a finished item must be to be archived: durations, and which flag or key gives each state's age."""

from __future__ import annotations

import pytest

from runner.errors import InputError
from runner.retention import Retention, ages, seconds


@pytest.mark.parametrize("text, wanted", [("30d", 30 * 86_400), ("12h", 12 * 3_600), ("90m", 90 * 60), ("0m", 0)])
def test_a_duration_is_a_whole_number_of_days_hours_or_minutes(text: str, wanted: int) -> None:
    assert seconds(text, "--older") == wanted


@pytest.mark.parametrize("text", ["3x", "30", "d", "1.5h", "-1d", "30 days", ""])
def test_anything_else_is_refused_saying_what_a_duration_is(text: str) -> None:
    with pytest.raises(InputError, match=r"^--older: .* is not a duration \(a whole number and d, h or m: 30d, "):
        seconds(text, "--older")


@pytest.mark.parametrize("kept, older, state, wanted", [
    (Retention("30d", "90d"), None, None, {"completed": "30d", "failed": "90d"}),
    (Retention("30d"), None, None, {"completed": "30d"}),
    (Retention(), None, None, {}),
    (Retention("30d", "90d"), "1d", None, {"completed": "1d", "failed": "1d"}),
    (Retention("30d", "90d"), "1d", "failed", {"failed": "1d"}),
    (Retention("30d", "90d"), None, "failed", {"failed": "90d"}),
    (Retention(), None, "failed", {"failed": "0m"}),
])
def test_older_then_the_jobs_retention_give_each_states_age_and_state_alone_takes_any_age(
    kept: Retention, older: str | None, state: str | None, wanted: dict[str, str]
) -> None:
    assert ages(kept, older=older, state=state) == wanted
