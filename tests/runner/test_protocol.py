"""The batch protocol: what counts as a result for which item."""

from __future__ import annotations

import json

from runner import protocol


def test_a_numeric_id_matches_its_key_and_odd_ids_are_ignored() -> None:
    content = json.dumps({"results": [{"id": 1, "label": "a"}, {"id": ["2"], "label": "b"}, {"id": "3", "label": "c"}]})
    parsed = protocol.parse_results(content, ["1", "2", "3"])
    assert parsed.problem is None
    assert parsed.results == {"1": {"id": "1", "label": "a"}, "3": {"id": "3", "label": "c"}}


def test_an_answer_that_is_not_the_protocol_says_why() -> None:
    assert protocol.parse_results('{"results": [', ["1"]).problem == "answer is not JSON (Expecting value at char 13)"
    assert protocol.parse_results('{"items": []}', ["1"]).problem == 'answer has no "results" list'
    assert protocol.parse_results("", ["1"]).problem == "empty answer"
