"""The notebooks, executed top to bottom in a real kernel, and what their cells produced.

Each notebook asserts on its own cells (among them, that its panel shows
the numbers of ``run.status()``); here we read back the status its
``status`` cell printed, and check in the widget state that nbclient stored
that the panel's models reached the frontend. Their values there are not
the final ones: nbclient records only messages answering the cell being
executed, and the panel's refreshes run in the background.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient
from support import ROOT

from runner.model import ItemState

NOTEBOOKS = ROOT / "notebooks"
NAMES = ["01-quickstart", "02-exploring-failures", "03-step-by-step-recovery"]
STATES = [s.value for s in ItemState]


def execute(name: str, tmp_path: Path) -> Any:
    """Run a notebook from notebooks/ in a fresh python3 kernel; its temporary folders go in ``tmp_path``."""
    notebook = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    client = NotebookClient(
        notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}
    )
    client.execute(env={**os.environ, "TMPDIR": str(tmp_path)})
    return notebook


def tagged(notebook: Any, tag: str) -> Any:
    (cell,) = [c for c in notebook.cells if tag in c.metadata.get("tags", [])]
    return cell


def printed(cell: Any) -> list[str]:
    return "".join(o.text for o in cell.outputs if o.output_type == "stream" and o.name == "stdout").splitlines()


def final_status(notebook: Any) -> dict[str, Any]:
    status: dict[str, Any] = json.loads(printed(tagged(notebook, "status"))[-1])
    return status


def panel_labels(notebook: Any) -> list[str]:
    """The descriptions of the panel's count labels, from the stored widget state."""
    models = notebook.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"].values()
    return [m["state"]["description"] for m in models if m["model_name"] == "HTMLModel" and m["state"].get("description") in STATES]


def shows_a_widget(cell: Any) -> bool:
    return any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in cell.outputs)


@pytest.mark.parametrize("name", NAMES)
def test_notebooks_are_committed_clean_for_the_python3_kernel(name: str) -> None:
    notebook = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    nbformat.validate(notebook)
    assert notebook.metadata.kernelspec.name == "python3"
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert all(c.outputs == [] and c.execution_count is None for c in code)
    assert any("assert " in c.source for c in code)


def test_quickstart_runs_the_sample_job_in_the_background_to_the_end(tmp_path: Path) -> None:
    notebook = execute("01-quickstart", tmp_path)
    status = final_status(notebook)
    assert status["run"] == "posts"
    assert status["counts"] == {**dict.fromkeys(STATES, 0), "completed": 2400}
    assert len(status["groups"]) == 12
    assert shows_a_widget(tagged(notebook, "panel"))
    assert panel_labels(notebook) == STATES


def test_exploring_failures_finds_two_kinds_and_retries_one(tmp_path: Path) -> None:
    notebook = execute("02-exploring-failures", tmp_path)
    assert printed(tagged(notebook, "kinds"))[0] == str({"bad_request": 1, "item_invalid": 4})
    status = final_status(notebook)
    assert (status["counts"]["completed"], status["counts"]["failed"]) == (29, 1)
    assert shows_a_widget(tagged(notebook, "panel"))
    assert panel_labels(notebook) == STATES


def test_step_by_step_recovery_ends_completed_after_the_breaker_a_crash_and_a_confirmation(
    tmp_path: Path,
) -> None:
    notebook = execute("03-step-by-step-recovery", tmp_path)
    status = final_status(notebook)
    released, ended = printed(tagged(notebook, "status"))[:2]
    assert released == str({"poll": 0, "adopt": 0, "resubmit": 5})
    assert ended.startswith("exit code 0 | billed twice: ['p")
    assert len(ended.split("|")[1].split(",")) == 5  # the five items whose call the crash cut off
    assert status["counts"] == {**dict.fromkeys(STATES, 0), "completed": 40}
    assert status["breaker"] == {"state": "closed", "reason": None}
    assert status["needs_confirmation"] == 0
    assert panel_labels(notebook) == STATES


def test_the_notebooks_folder_holds_only_the_three_notebooks() -> None:
    assert sorted(p.stem for p in Path(NOTEBOOKS).glob("*.ipynb")) == NAMES
