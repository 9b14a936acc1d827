"""The rules of fan-out and join: a table of results and sub-items' ends, no I/O."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from runner.rules import fanout
from runner.rules.fanout import Settled


@dataclass(frozen=True)
class St:
    name: str
    kind: str = "openai-chat"
    fan_out: str = ""
    max_fan_out: int = 1_000
    max_state_bytes: int = 1_000_000
    allow_failures: bool = False


SPLIT = St("split", fan_out="chunks", max_fan_out=3, max_state_bytes=200)
STAGES = [St("classify"), SPLIT, St("note"), St("check"), St("gather", kind="join"), St("after")]


def test_a_fan_out_makes_each_element_a_sub_items_input_under_chunk_and_keeps_the_result_without_the_list() -> None:
    fan = fanout.fanned(SPLIT, {"id": "p1", "body": "b"}, {"split": {"chunks": ["x", {"y": 1}], "n": 2}})
    assert isinstance(fan, fanout.Fan)
    assert [json.loads(text) for text in fan.inputs] == [
        {"id": "p1", "body": "b", "_chunk": "x"}, {"id": "p1", "body": "b", "_chunk": {"y": 1}}]
    assert json.loads(fan.result) == {"n": 2}


@pytest.mark.parametrize("result, message", [
    ({"chunks": "x"}, "'chunks', which is not a list"),
    ({}, "'chunks', which is not a list"),
    ({"chunks": [1, 2, 3, 4]}, "fans out to 4 sub-items, over max_fan_out (3)"),
    ({"chunks": ["x" * 300]}, "over max_state_bytes (200)"),
], ids=["not a list", "missing", "over max_fan_out", "over max_state_bytes"])
def test_a_fan_out_past_a_guard_or_without_its_list_fails_with_the_reason(
    result: dict[str, object], message: str
) -> None:
    failure = fanout.fanned(SPLIT, {"id": "p1"}, {"split": result})
    assert isinstance(failure, str) and message in failure


def test_a_fan_out_of_an_empty_list_makes_no_sub_item() -> None:
    assert fanout.fanned(SPLIT, {"id": "p1"}, {"split": {"chunks": []}}) == fanout.Fan((), "{}")


def test_the_sub_items_start_after_the_fan_out_and_the_stages_between_it_and_its_join_are_inside() -> None:
    assert fanout.span(STAGES, "split") == ("note", "gather")
    assert [stage.name for stage in STAGES if fanout.inside(STAGES, stage.name)] == ["note", "check"]


DONE = Settled("p1/0", "completed", '{"id": "p1/0", "note": "a"}', None, None)
FAILED = Settled("p1/1", "failed", '{"id": "p1/1"}', "item_invalid", "no note")


def test_a_join_gives_each_sub_items_last_result_in_order_and_lists_the_failed() -> None:
    result, failure = fanout.joined(St("gather", kind="join", allow_failures=True), [DONE, FAILED])
    assert failure is None
    assert result == {"results": [{"id": "p1/0", "note": "a"}, None],
                      "failed": [{"key": "p1/1", "kind": "item_invalid", "message": "no note"}]}


def test_a_failed_sub_item_fails_the_join_without_allow_failures() -> None:
    _, failure = fanout.joined(St("gather", kind="join"), [DONE, FAILED])
    assert failure is not None and failure.startswith("1 of 2 sub-items failed (first: p1/1, item_invalid: no note)")


def test_a_join_of_no_sub_item_passes_with_empty_lists() -> None:
    assert fanout.joined(St("gather", kind="join"), []) == ({"results": [], "failed": []}, None)
