"""Render the quickstart's panel in a real browser, live, and save it as docs/notebook-panel.png.

Voila serves the first cells of ``01-quickstart.ipynb`` (up to the panel) on
127.0.0.1, with the simulator slowed down so that the run is still going;
Debian's chromium, driven by Playwright's Python package, opens the page,
waits until the counts in the browser have moved (the panel's refreshes
reach the page), and takes a picture of the panel (:mod:`voila_page`).
``execute.py`` puts that picture beside the panel in the committed notebook.

Run it from the repository root (about 30 seconds)::

    apt-get install -y chromium          # Debian's browser, once
    pip install -e '.[test]'             # voila and playwright, with the test suite's needs
    python notebooks/screenshot.py       # writes docs/notebook-panel.png

Options: ``--out PATH``, ``--latency SECONDS`` (per simulated call, default 0.4).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from voila_page import COUNTS_JS, HERE, counts_on, opened, private, served, trimmed


def shoot(page: object, out: Path) -> dict[str, int]:
    """The panel's picture once the page shows 400 items completed; the counts it shows."""
    page.wait_for_function(f"() => ({COUNTS_JS})().completed >= 400", timeout=120_000)  # type: ignore[attr-defined]
    box = page.locator(".widget-vbox").first.bounding_box()  # type: ignore[attr-defined]
    margin = 12
    out.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(out), clip={  # type: ignore[attr-defined]
        "x": max(box["x"] - margin, 0), "y": max(box["y"] - margin, 0),
        "width": box["width"] + 2 * margin, "height": box["height"] + 2 * margin,
    })
    return counts_on(page)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE.parent / "docs" / "notebook-panel.png")
    parser.add_argument("--latency", type=float, default=0.4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="runner-screenshot-") as tmp:
        folder = Path(tmp)
        # The run store in runs/quickstart/ beside the served notebook, as the picture's title says.
        env = {**private(folder), "RUNNER_SIM_LATENCY": str(args.latency)}
        try:
            with served(trimmed(folder / "site"), env) as url, opened(url, folder) as page:
                shown = shoot(page, args.out)
        except RuntimeError as exc:
            raise SystemExit(str(exc)) from None
    print(f"{args.out}: the panel, live, showing {json.dumps(shown)}")


if __name__ == "__main__":
    main()
