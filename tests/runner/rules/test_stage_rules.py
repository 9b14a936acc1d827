"""Where an item goes between stages: a table of cases for ``when``, the next stage, and where a re-run resumes."""

from __future__ import annotations

from typing import Any

import pytest

from runner.job_stages import When
from runner.model import Skip
from runner.rules.stages import Next, Onward, from_gone_stage, holds, next_stage, onward, resume_at, sent_fields


class S:
    def __init__(self, name: str, when: When | None = None, kind: str = "openai-chat", fan_out: str = "") -> None:
        self.name, self.when, self.kind, self.fan_out = name, when, kind, fan_out


BUGS = When("classify.label", in_=("bug", "complaint"))
PIPELINE = [S("classify"), S("extract", BUGS), S("summarize")]

WHEN_CASES: list[tuple[str, When | None, dict[str, Any], bool]] = [
    ("no when: always", None, {}, True),
    ("in: a listed value", BUGS, {"classify": {"label": "bug"}}, True),
    ("in: another value", BUGS, {"classify": {"label": "praise"}}, False),
    ("in: the stage not passed", BUGS, {}, False),
    ("in: a list is never in", BUGS, {"classify": {"label": ["bug"]}}, False),
    ("equals: the value", When("lang", equals="en", has_equals=True), {"lang": "en"}, True),
    ("equals: another", When("lang", equals="en", has_equals=True), {"lang": "fr"}, False),
    ("equals false: false", When("c.ok", equals=False, has_equals=True), {"c": {"ok": False}}, True),
    ("equals false: missing", When("c.ok", equals=False, has_equals=True), {"c": {}}, False),
    ("exists: present", When("c.version", exists=True), {"c": {"version": "1.2"}}, True),
    ("exists: null is absent", When("c.version", exists=True), {"c": {"version": None}}, False),
    ("exists false: absent", When("c.version", exists=False), {"c": {}}, True),
    ("a path through a non-object", When("c.a.b", exists=True), {"c": {"a": 3}}, False),
    ("equals 1: true is not 1", When("c.n", equals=1, has_equals=True), {"c": {"n": True}}, False),
    ("equals false: 0 is not false", When("c.ok", equals=False, has_equals=True), {"c": {"ok": 0}}, False),
    ("equals 1: 1.0 is 1", When("c.n", equals=1, has_equals=True), {"c": {"n": 1.0}}, True),
    ("in: true is not 1", When("c.n", in_=(1, 2)), {"c": {"n": True}}, False),
    ("in: 0 is not false", When("c.n", in_=(False,)), {"c": {"n": 0}}, False),
    ("in: true is true", When("c.n", in_=(True,)), {"c": {"n": True}}, True),
]


@pytest.mark.parametrize("when, state, expected", [c[1:] for c in WHEN_CASES], ids=[c[0] for c in WHEN_CASES])
def test_when_reads_the_state_of_input_fields_and_earlier_results(
    when: When | None, state: dict[str, Any], expected: bool
) -> None:
    assert holds(when, state) == expected


NEXT_CASES = [
    ("a bug goes on to extract", "classify", {"classify": {"label": "bug"}}, Next("extract")),
    ("praise skips extract", "classify", {"classify": {"label": "praise"}}, Next("summarize", (Skip("extract"),))),
    ("after extract, summarize", "extract", {"classify": {"label": "bug"}}, Next("summarize")),
    ("after the last, completed", "summarize", {}, Next(None)),
]


@pytest.mark.parametrize("after, state, expected", [c[1:] for c in NEXT_CASES], ids=[c[0] for c in NEXT_CASES])
def test_the_next_stage_is_the_first_whose_when_holds(after: str, state: dict[str, Any], expected: Next) -> None:
    assert next_stage(PIPELINE, after, state) == expected


#: A fan-out for bugs alone: the others skip it, with its sub-items' stage and its join, on to summarize.
FANNED_BUGS = [S("classify"), S("split", BUGS, fan_out="chunks"), S("note"), S("gather", kind="join"),
               S("summarize")]
SKIPPED_FAN_OUT_CASES = [
    ("praise skips the fan-out (its when), its stages and its join (with the fan-out)", "classify",
     {"classify": {"label": "praise"}},
     Next("summarize", (Skip("split"), Skip("note", "split"), Skip("gather", "split")))),
    ("a bug fans out", "classify", {"classify": {"label": "bug"}}, Next("split")),
]


@pytest.mark.parametrize("after, state, expected", [c[1:] for c in SKIPPED_FAN_OUT_CASES],
                         ids=[c[0] for c in SKIPPED_FAN_OUT_CASES])
def test_a_fan_out_skipped_skips_the_stages_up_to_its_join_and_the_join(
    after: str, state: dict[str, Any], expected: Next
) -> None:
    assert next_stage(FANNED_BUGS, after, state) == expected


def test_a_rerun_passes_over_a_fan_out_skipped_and_its_stages_up_to_its_join() -> None:
    fingerprints = {"classify": "c1", "split": "f1", "note": "n1", "gather": "g1", "summarize": "s1"}
    saved = {"classify": ({"label": "praise"}, "c1"), "summarize": ({"s": "x"}, "s1")}
    assert resume_at(FANNED_BUGS, fingerprints, {"title": "t"}, saved) is None
    assert resume_at(FANNED_BUGS, fingerprints, {"title": "t"}, {"classify": saved["classify"]}) == "summarize"


FP = {"classify": "c1", "extract": "e1", "summarize": "s1"}
BUG = {"classify": ({"label": "bug"}, "c1"), "extract": ({"v": "1"}, "e1"), "summarize": ({"s": "x"}, "s1")}
PRAISE = {"classify": ({"label": "praise"}, "c1"), "summarize": ({"s": "x"}, "s1")}
RESUME_CASES = [
    ("every result stands", FP, BUG, None),
    ("a skipped stage needs no result", FP, PRAISE, None),
    ("the last stage's prompt changed", {**FP, "summarize": "s2"}, BUG, "summarize"),
    ("a middle stage changed", {**FP, "extract": "e2"}, BUG, "extract"),
    ("a changed stage the item skips", {**FP, "extract": "e2"}, PRAISE, None),
    ("the first stage changed", {**FP, "classify": "c2"}, BUG, "classify"),
    ("a stage added at the end", {**FP, "translate": "t1"}, BUG, "translate"),
]


@pytest.mark.parametrize("fingerprints, saved, expected", [c[1:] for c in RESUME_CASES], ids=[c[0] for c in RESUME_CASES])
def test_a_rerun_resumes_at_the_first_stage_whose_result_is_missing_or_stale(
    fingerprints: dict[str, str], saved: dict[str, tuple[Any, str]], expected: str | None
) -> None:
    stages = [*PIPELINE, *([S("translate")] if "translate" in fingerprints else [])]
    assert resume_at(stages, fingerprints, {"title": "t"}, saved) == expected


def test_a_stage_sends_its_fields_under_their_dotted_names() -> None:
    results = {"classify": {"label": "bug"}}
    state = {"id": "1", "title": "t", "body": "b", **results}
    assert sent_fields(["title", "classify.label"], state, results) == {"title": "t", "classify.label": "bug"}
    assert sent_fields([], state, results) == {"id": "1", "title": "t", "body": "b"}


#: The job once ``extract`` is removed: items left at it (waiting, answered, held, failed) go on from there.
WITHOUT_EXTRACT = [S("classify"), S("summarize")]
CLASSIFIED = {"classify": ({"label": "bug"}, "c1")}
GONE_CASES = [
    ("on to the next stage it needs", CLASSIFIED, False, Onward("rewind", "summarize")),
    ("a person's failure stands, at that stage", CLASSIFIED, True, Onward("restage", "summarize")),
    ("every stage it needs has its result: completed", BUG, False, Onward("finish", "summarize")),
    ("a person's failure with nothing left to do: kept", BUG, True, Onward("keep")),
    ("a stage before it changed: sent back there", {"classify": ({"label": "bug"}, "c0")}, False,
     Onward("rewind", "classify")),
]


@pytest.mark.parametrize("saved, by_a_person, expected", [c[1:] for c in GONE_CASES], ids=[c[0] for c in GONE_CASES])
def test_an_item_left_at_a_stage_gone_goes_on_to_the_next_stage_it_needs(
    saved: dict[str, tuple[Any, str]], by_a_person: bool, expected: Onward
) -> None:
    assert from_gone_stage(WITHOUT_EXTRACT, FP, {"title": "t"}, saved, failed_by_a_person=by_a_person) == expected


#: Items at a stage the job still has, their results not standing (classify's fingerprint now c2).
CLASSIFY_CHANGED = {**FP, "classify": "c2"}
AT_A_STAGE_CASES = [
    ("completed: back to the stage changed", CLASSIFY_CHANGED, BUG, "completed", "summarize",
     Onward("rewind", "classify")),
    ("pending after it: back there too", CLASSIFY_CHANGED, CLASSIFIED, "pending", "extract",
     Onward("rewind", "classify")),
    ("waiting at the stage it lacks: kept", FP, CLASSIFIED, "waiting", "extract", Onward("keep")),
    ("failed after it: failed still, there", CLASSIFY_CHANGED, CLASSIFIED, "failed", "extract",
     Onward("restage", "classify")),
    ("failed at it: kept", CLASSIFY_CHANGED, {}, "failed", "classify", Onward("keep")),
    ("pending at a stage it no longer needs: completed", FP, PRAISE, "pending", "extract",
     Onward("finish", "summarize")),
    ("completed, every result standing: kept", FP, PRAISE, "completed", "summarize", Onward("keep")),
]


@pytest.mark.parametrize("fingerprints, saved, state, at, expected", [c[1:] for c in AT_A_STAGE_CASES],
                         ids=[c[0] for c in AT_A_STAGE_CASES])
def test_an_item_whose_results_do_not_stand_goes_to_the_first_stage_it_needs_again_a_failed_one_failed_still(
    fingerprints: dict[str, str], saved: dict[str, tuple[Any, str]], state: str, at: str, expected: Onward
) -> None:
    assert onward(PIPELINE, fingerprints, {"title": "t"}, saved, state=state, at=at,
                  failed_by_a_person=False) == expected


def test_an_item_at_a_stage_gone_goes_where_the_rule_for_a_stage_gone_says() -> None:
    assert onward(WITHOUT_EXTRACT, FP, {"title": "t"}, CLASSIFIED, state="failed", at="extract",
                  failed_by_a_person=True) == Onward("restage", "summarize")
