"""The notebooks, executed top to bottom in a real kernel as ``notebooks/execute.py`` does; the checks are here.

The notebooks show and explain; these tests execute them (their run stores
in ``tmp_path``, their kernel's temp folder an empty folder of ``tmp_path``)
and check what they did in the stores they left, read through the read
model, and in what their cells printed. The committed notebooks carry their
outputs; a test checks that those are clean (no error, no machine's path).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest
from notebook_scripts import execute
from support import ROOT

from runner import export
from runner.store import Store, views
from runner.store.answers import STATES
from runner.teaching import FOLDER_ENV

NOTEBOOKS = ROOT / "notebooks"
NAMES, PICTURE, WIDGET_STATE, WIDGET_VIEW = execute.NAMES, execute.PICTURE, execute.WIDGET_STATE, execute.WIDGET_VIEW
STALE = "the committed notebook shows other texts: re-execute it (python notebooks/execute.py) and look at the diff"
#: What each notebook's run ends with: the panel it saved shows these counts, no item left on its way.
ENDS = {
    "01-quickstart": {"completed": 2400},
    "02-exploring-failures": {"completed": 29, "failed": 1},
    "03-step-by-step-recovery": {"completed": 40},
    "04-pipeline-with-review": {"completed": 2399, "failed": 1},
}


def executed(name: str, tmp_path: Path) -> Any:
    """The notebook, executed with its run stores in ``tmp_path/runs`` and its temp folder ``tmp_path/tmp``."""
    (tmp_path / "tmp").mkdir()
    return execute.executed(name, env={FOLDER_ENV: str(tmp_path / "runs"), "TMPDIR": str(tmp_path / "tmp")})


def stored(tmp_path: Path, folder: str, run: str) -> dict[str, Any]:
    """The status of ``run`` in the store the notebook left, and its rows as ``runner export`` gives them."""
    with Store(tmp_path / "runs" / folder / "runs.db", read_only=True) as store:
        status = views.status(store, run, now=time.time())
        rows = {row["key"]: export.flat(row) for row in export.rows(store, run, state="all")}
    return {**status, "rows": rows}


def tagged(notebook: Any, tag: str) -> Any:
    (cell,) = [c for c in notebook.cells if tag in c.metadata.get("tags", [])]
    return cell


def printed(cell: Any) -> list[str]:
    return "".join(o.text for o in cell.outputs if o.output_type == "stream" and o.name == "stdout").splitlines()


def panel_counts(notebook: Any) -> dict[str, int]:
    """The seven numbers of the panel as the notebook saved them (its widget state), in the panel's order."""
    models = notebook.metadata["widgets"][WIDGET_STATE]["state"].values()
    return {
        m["state"]["description"]: int(m["state"]["value"])
        for m in models if m["model_name"] == "HTMLModel" and m["state"].get("description") in STATES
    }


def texts(notebook: Any, runs: Path | None = None) -> list[list[str]]:
    """What each code cell showed as text (printed, or its value as text; not a widget).

    ``runs``, the folder of a test's run stores, is read as the notebooks' own ``runs``.
    """
    shown = [
        [o.text if o.output_type == "stream" else o.data["text/plain"]
         for o in cell.outputs if WIDGET_VIEW not in o.get("data", {})]
        for cell in notebook.cells if cell.cell_type == "code"
    ]
    return [[text.replace(str(runs), "runs") if runs else text for text in cell] for cell in shown]


def committed_texts(name: str) -> list[list[str]]:
    """What the committed notebook shows as text: a fresh execution shows the same, nothing varies."""
    return texts(nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4))


def shows_the_panel_and_its_picture(cell: Any) -> bool:
    return any(WIDGET_VIEW in o.get("data", {}) and "image/png" in o.data for o in cell.outputs)


def left_no_temp_files(tmp_path: Path) -> bool:
    return list((tmp_path / "tmp").iterdir()) == []


@pytest.mark.parametrize("name", NAMES)
def test_notebooks_are_committed_executed_with_clean_outputs_their_panel_at_the_end_and_no_assertions(
    name: str,
) -> None:
    path = NOTEBOOKS / f"{name}.ipynb"
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    assert notebook.metadata.kernelspec.name == "python3"
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1))
    assert not [c.source for c in code if "assert " in c.source]
    outputs = [o for c in code for o in c.outputs]
    assert len(outputs) >= len(code) // 2
    assert not [o for o in outputs if o.output_type == "error" or o.get("name") == "stderr"]
    assert shows_the_panel_and_its_picture(tagged(notebook, "panel"))
    text = path.read_text()
    assert str(ROOT) not in text and "/tmp/" not in text
    # no time of day, not even in the panel's saved item history (an input's own timestamp, 2025-12-01T12:54:23Z, is data)
    assert not re.search(r"(?<!T)\d\d:\d\d:\d\d(?!Z)", text)
    assert panel_counts(notebook) == {**dict.fromkeys(STATES, 0), **ENDS[name]}
    model_ids = list(notebook.metadata["widgets"][WIDGET_STATE]["state"])
    assert model_ids == [f"{n:032x}" for n in range(1, len(model_ids) + 1)]


def test_quickstart_runs_the_sample_job_in_the_background_to_the_end_and_a_second_run_pays_nothing(
    tmp_path: Path,
) -> None:
    notebook = executed("01-quickstart", tmp_path)
    run = stored(tmp_path, "quickstart", "posts")
    assert run["counts"] == {**dict.fromkeys(STATES, 0), "completed": 2400}
    assert len(run["groups"]) == 12 and run["breaker"]["state"] == "closed" and not run["engine"]["alive"]
    assert {row["paid_calls"] for row in run["rows"].values()} == {1}
    assert all(row["label"] for row in run["rows"].values())
    assert printed(tagged(notebook, "again"))[-1].endswith("and the second run made 0")
    assert shows_the_panel_and_its_picture(tagged(notebook, "panel"))
    assert panel_counts(notebook) == run["counts"]
    assert texts(notebook, tmp_path / "runs") == committed_texts("01-quickstart"), STALE
    assert left_no_temp_files(tmp_path)


def test_exploring_failures_finds_two_kinds_and_retrying_one_after_the_fix_leaves_the_other(
    tmp_path: Path,
) -> None:
    notebook = executed("02-exploring-failures", tmp_path)
    assert printed(tagged(notebook, "kinds"))[0] == str({"bad_request": 1, "item_invalid": 4})
    assert printed(tagged(notebook, "item"))[-1] == "kind: item_invalid | attempts: 2 | paid calls: 2"
    run = stored(tmp_path, "failures", "feedback")
    assert (run["counts"]["completed"], run["counts"]["failed"]) == (29, 1)
    failed = [row for row in run["rows"].values() if row["state"] == "failed"]
    assert [(row["key"], row["kind"]) for row in failed] == [("p013", "bad_request")]
    assert printed(tagged(notebook, "billed")) == ["p002 billed 3 times; p000 1"]
    assert panel_counts(notebook) == run["counts"]
    assert texts(notebook, tmp_path / "runs") == committed_texts("02-exploring-failures"), STALE
    assert left_no_temp_files(tmp_path)


def test_step_by_step_recovery_ends_completed_after_the_breaker_a_crash_and_a_confirmation(
    tmp_path: Path,
) -> None:
    notebook = executed("03-step-by-step-recovery", tmp_path)
    died = printed(tagged(notebook, "crash"))[0]
    assert died.startswith("the engine died with -9 while sending ['p")
    cut_off = json.loads(died.split("while sending ")[1].replace("'", '"'))
    assert len(cut_off) == 5
    held = printed(tagged(notebook, "held"))
    assert held[0] == "exit code 4 | 5 items need a confirmation"
    assert [line.split()[:2] for line in held[1:]] == [[key, "resubmit"] for key in cut_off]
    shown, released, ended = printed(tagged(notebook, "status"))[:3]
    assert shown.startswith("plan: 5 items · 0 charge-safe · 5 may be billed again")  # the plan, before yes=True
    assert released == str({"poll": 0, "adopt": 0, "resubmit": 5})
    assert ended == f"exit code 0 | billed twice: {sorted(cut_off)}"
    run = stored(tmp_path, "recovery", "steps")
    assert run["counts"] == {**dict.fromkeys(STATES, 0), "completed": 40}
    assert run["breaker"] == {"state": "closed", "reason": None} and run["needs_confirmation"] == 0
    assert panel_counts(notebook) == run["counts"]
    assert texts(notebook, tmp_path / "runs") == committed_texts("03-step-by-step-recovery"), STALE
    assert left_no_temp_files(tmp_path)


def test_pipeline_stops_at_the_review_a_person_decides_each_stage_saves_its_result_a_changed_one_alone_goes_again(
    tmp_path: Path,
) -> None:
    notebook = executed("04-pipeline-with-review", tmp_path)
    run = stored(tmp_path, "pipeline", "pipeline")
    assert run["counts"] == {**dict.fromkeys(STATES, 0), "completed": 2399, "failed": 1}
    assert list(run["stages"]) == ["classify", "extract", "review", "summarize"]
    extracted = sum(row["state"] == "completed" and "extract.version" in row for row in run["rows"].values()) + 1
    assert printed(tagged(notebook, "stages")) == [
        "counts: {'waiting': 2400} | needs_decision: 2400",
        "classify   passed 2,400 · skipped     0 · here now: nobody",
        f"extract    passed {extracted:5,} · skipped {2400 - extracted:5,} · here now: nobody",
        "review     passed     0 · skipped     0 · here now: {'waiting': 2400}",
        "summarize  passed     0 · skipped     0 · here now: nobody",
    ]
    rejected = [row for row in run["rows"].values() if row["state"] == "failed"]
    assert [row["kind"] for row in rejected] == ["rejected"] and "extract.version" in rejected[0]
    assert printed(tagged(notebook, "decisions"))[0].startswith(f"2400 waiting; the first extraction: {rejected[0]['key']}")
    assert printed(tagged(notebook, "decided")) == ["exit code 3 | {'rejected': 1}"]
    done = [row for row in run["rows"].values() if row["state"] == "completed"]
    bugs = [row for row in done if row["classify.label"] in {"bug_report", "complaint"}]
    assert all("extract.version" in row for row in bugs)
    assert all(row["review.reviewer"] == "ana" and row["summarize.summary"] for row in done)
    assert printed(tagged(notebook, "results"))[1] == f"{len(bugs)} extracted, all of them bug reports or complaints: True"
    again = printed(tagged(notebook, "again"))
    assert again[0] == "exit code 3 | sent again from: {'summarize': 2399}"
    assert again[1].endswith("calls for 2399 posts")
    saved = [m["state"].get("value", "") for m in notebook.metadata["widgets"][WIDGET_STATE]["state"].values()]
    assert [value for value in saved if "<th>stage</th>" in str(value)]  # the panel's row per stage, as the run ended
    assert panel_counts(notebook) == run["counts"]
    assert texts(notebook, tmp_path / "runs") == committed_texts("04-pipeline-with-review"), STALE
    assert left_no_temp_files(tmp_path)


def test_the_notebooks_folder_holds_only_the_four_notebooks() -> None:
    assert sorted(p.stem for p in Path(NOTEBOOKS).glob("*.ipynb")) == NAMES
    assert PICTURE.stat().st_size > 0
