"""The batch protocol: what counts as an answer's text, and as a result for which item."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runner import protocol
from runner.providers import Answer
from runner.providers.openai_chat import answer_of


def test_a_numeric_id_matches_its_key_and_odd_ids_are_ignored() -> None:
    content = json.dumps({"results": [{"id": 1, "label": "a"}, {"id": ["2"], "label": "b"}, {"id": "3", "label": "c"}]})
    parsed = protocol.parse_results(content, ["1", "2", "3"])
    assert parsed.problem is None
    assert parsed.results == {"1": {"id": "1", "label": "a"}, "3": {"id": "3", "label": "c"}}


def test_an_answer_that_is_not_the_protocol_says_why() -> None:
    assert protocol.parse_results('{"results": [', ["1"]).problem == "answer is not JSON (Expecting value at char 13)"
    assert protocol.parse_results('{"items": []}', ["1"]).problem == 'answer has no "results" list'
    assert protocol.parse_results("", ["1"]).problem == "empty answer"


def chat(content: Any, finish_reason: Any = "stop") -> dict[str, Any]:
    return {"choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": finish_reason}]}


@pytest.mark.parametrize("body, expected", [
    (chat('{"results": []}'), Answer('{"results": []}', "stop", raw='{"results": []}')),
    (chat([{"type": "text", "text": '{"results": '}, {"type": "image_url", "image_url": {"url": "x"}},
           {"type": "text", "text": "[]}"}]),
     Answer('{"results": []}', "stop", raw='[{"type":"text","text":"{\\"results\\": "},'
            '{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"[]}"}]')),
    (chat([{"type": "thinking", "thinking": "hm"}, "text", {"type": "text", "text": 7}]),
     Answer("", "stop", raw='[{"type":"thinking","thinking":"hm"},"text",{"type":"text","text":7}]')),
    (chat({"results": []}), Answer(None, "stop", raw='{"results":[]}',
                                   problem='the answer\'s content is not text but {"results":[]}')),
    (chat({"score": float("nan")}), Answer(None, "stop", raw='{"score":NaN}',
                                           problem="the answer's content is not text but {\"score\":NaN}")),
    (chat(42, finish_reason=1), Answer(None, None, raw="42", problem="the answer's content is not text but 42")),
    (chat(None, finish_reason="content_filter"), Answer(None, "content_filter", raw="null")),
    ({"choices": []}, Answer(None)),
    ({"choices": [{"message": "hi"}]}, Answer(None)),
    ("not a body", Answer(None)),
])
def test_an_answer_is_the_text_of_its_content_and_keeps_the_content_as_received(
    body: Any, expected: Answer
) -> None:
    assert answer_of(body) == expected


def test_an_answer_a_handler_gives_as_text_is_its_own_raw() -> None:
    assert Answer('{"results": []}').raw == '{"results": []}'


RESULTS = '{"results": [{"id": "1", "label": "a"}]}'


@pytest.mark.parametrize("content", [
    f"```json\n{RESULTS}\n```",
    f"```\n{RESULTS}\n```",
    f"```JSON {RESULTS}```",
    f"Here are the results:\n\n```json\n{RESULTS}\n```\n\nLet me know if you need more.",
    f"```python\nprint('not it')\n```\nand the answer:\n```json\n{RESULTS}\n```",
])
def test_json_inside_a_markdown_code_fence_is_read_as_json(content: str) -> None:
    assert protocol.parse_results(content, ["1"]) == protocol.ParsedBatch({"1": {"id": "1", "label": "a"}}, None)


def test_a_code_fence_quoted_inside_the_fenced_json_does_not_end_it() -> None:
    quoted = {"results": [{"id": "1", "label": "```pip install x```"}]}
    content = f"```json\n{json.dumps(quoted)}\n```"
    assert protocol.parse_results(content, ["1"]) == protocol.ParsedBatch({"1": quoted["results"][0]}, None)


@pytest.mark.parametrize("content, problem", [
    ("```json\n{\"results\": [\n```", "answer is not JSON, nor is its code fence (Expecting value at char 14 of the fence)"),
    ("```json\n" + RESULTS, "answer is not JSON (Expecting value at char 0)"),  # cut before the fence closed
    ('{"results": [{"id": "1", "score": NaN}]}', "answer is not JSON (NaN is not a JSON number)"),
    ('{"results": [{"id": "1", "score": -1e999}]}', "answer is not JSON (-1e999 is not a JSON number)"),
    ({"results": []}, "answer is not text but dict"),
    (["results"], "answer is not text but list"),
    (7, "answer is not text but int"),
    (None, "empty answer"),
])
def test_an_answer_that_cannot_be_read_says_why_and_raises_nothing(content: object, problem: str) -> None:
    assert protocol.parse_results(content, ["1"]) == protocol.ParsedBatch({}, problem)


def test_disagreeing_results_for_one_id_are_a_contradiction_not_a_result() -> None:
    content = json.dumps({"results": [
        {"id": "p001", "label": "a"}, {"id": "p002", "label": "b"}, {"id": "p001", "label": "c"},
        {"id": "p003", "label": "d"}, {"id": "p003", "label": "d"},  # copies agree: one result
        {"id": 4, "label": "e"}, {"id": "4", "label": "f"},  # a numeric id is the same id
        {"id": "p009", "label": "g"}, {"id": "p009", "label": "h"},  # not in the batch: dropped as ever
    ]})
    parsed = protocol.parse_results(content, ["p001", "p002", "p003", "4"])
    assert parsed.problem is None
    assert parsed.results == {"p002": {"id": "p002", "label": "b"}, "p003": {"id": "p003", "label": "d"}}
    assert parsed.contradictions == {
        "p001": 'the answer gave 2 results for id "p001" that disagree',
        "4": 'the answer gave 2 results for id "4" that disagree',
    }


def test_a_batch_read_from_the_store_is_sent_as_if_encoded_again() -> None:
    payloads = [protocol.item_payload("p1", {"text": "héllo \u2028 \"q\"", "n": 1.5, "tags": ["a", None]}),
                protocol.item_payload("p2", {"text": "", "deep": {"x": [1, 2e300]}})]
    stored = protocol.BatchItems.of(payloads)
    assert stored.payloads() == payloads
    assert stored.array() == protocol.encode(payloads)


def test_a_handler_that_changes_its_payloads_changes_nothing_sent() -> None:
    stored = protocol.BatchItems.of([{"id": "p1", "text": "kept"}])
    stored.payloads()[0]["text"] = "changed"
    assert stored.payloads() == [{"id": "p1", "text": "kept"}] and "changed" not in stored.array()


@pytest.mark.parametrize("number", [float("nan"), float("inf"), -float("inf")])
def test_nan_and_infinities_are_never_encoded_as_invalid_json(number: float) -> None:
    with pytest.raises(ValueError, match="not JSON compliant"):
        protocol.encode({"id": "p1", "score": number})
