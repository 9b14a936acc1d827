"""Execute the notebooks in place, top to bottom in a fresh python3 kernel, so that a reader sees their outputs.

Run it from anywhere, after changing a notebook or what it shows (about a minute and a half for the four)::

    python notebooks/execute.py                    # all four
    python notebooks/execute.py 01-quickstart      # one

Each notebook runs in notebooks/ (beside sample_data/) and keeps its run
store in notebooks/runs/<name>/ (not committed; ``runner.teaching.scratch``).
Then, so that executing again changes only what the runs did:

- the panel cell's output also carries the panel's picture
  (docs/notebook-panel.png, made by ``screenshot.py``), which a page that
  cannot run widgets, such as GitHub's, shows in its place;
- the widgets' model ids (random uuids) are numbered in the order the widgets were made,
  the times of day in the widgets' saved state (an item's history in the panel) read
  ``hh:mm:ss``, no timings are recorded, and what a cell printed is one output however
  the kernel cut it.
"""

from __future__ import annotations

import argparse
import base64
import os
import re
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent
NAMES = ["01-quickstart", "02-exploring-failures", "03-step-by-step-recovery", "04-pipeline-with-review"]
PICTURE = HERE.parent / "docs" / "notebook-panel.png"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
#: A time of day alone in a table cell of a widget's HTML (the panel's item history).
TIME_OF_DAY = re.compile(r"(<td[^>]*>)\d\d:\d\d:\d\d(</td>)")


def executed(name: str, env: dict[str, str] | None = None) -> Any:
    """The notebook ``name`` of notebooks/, executed (not written); ``env`` for its kernel."""
    notebook = nbformat.read(HERE / f"{name}.ipynb", as_version=4)
    client = NotebookClient(
        notebook, timeout=180, kernel_name="python3", record_timing=False, coalesce_streams=True,
        resources={"metadata": {"path": str(HERE)}},
    )
    client.execute(env={**os.environ, **(env or {})})
    return steady(pictured(notebook))


def pictured(notebook: Any) -> Any:
    """The panel's picture beside the panel's widget, in the output of the cell tagged ``panel``."""
    picture = base64.b64encode(PICTURE.read_bytes()).decode()
    for cell in notebook.cells:
        if "panel" in cell.metadata.get("tags", []):
            for output in cell.outputs:
                if WIDGET_VIEW in output.get("data", {}):
                    output.data["image/png"] = picture
    return notebook


def steady(notebook: Any) -> Any:
    """The notebook with its widget model ids numbered 1, 2, ... in the order the widgets were made, no time of day."""
    made = notebook.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    for model in made.values():
        for trait, value in model["state"].items():
            if isinstance(value, str):
                model["state"][trait] = TIME_OF_DAY.sub(r"\1hh:mm:ss\2", value)
    ids = {model_id: f"{n:032x}" for n, model_id in enumerate(made, 1)}
    text = re.sub(r"[0-9a-f]{32}", lambda m: ids.get(m.group(), m.group()), nbformat.writes(notebook))
    renumbered = nbformat.reads(text, as_version=4)
    if made:  # in the order they were made again (the text had them in the order of the old ids)
        state = renumbered.metadata.widgets[WIDGET_STATE]
        state["state"] = dict(sorted(state["state"].items()))
    return renumbered


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"notebooks to execute (default all: {', '.join(NAMES)})")
    names = parser.parse_args().names or NAMES
    unknown = sorted(set(names) - set(NAMES))
    if unknown:
        parser.error(f"no notebook {unknown[0]!r} (notebooks: {', '.join(NAMES)})")
    for name in names:
        nbformat.write(executed(name), HERE / f"{name}.ipynb")
        print(f"notebooks/{name}.ipynb: executed")


if __name__ == "__main__":
    main()
