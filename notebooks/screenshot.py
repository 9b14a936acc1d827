"""Render the quickstart's panel in a real browser, live, and save it as docs/notebook-panel.png.

Voila serves the first cells of ``01-quickstart.ipynb`` (up to the panel) on
127.0.0.1, with the simulator slowed down so that the run is still going;
Debian's chromium, driven by Playwright's Python package, opens the page,
waits until the counts in the browser have moved (the panel's refreshes
reach the page), and takes a picture of the panel. No browser is downloaded:
Playwright launches the system's ``chromium``.

Run it from the repository root (about 30 seconds)::

    apt-get install -y chromium          # Debian's browser, once
    pip install voila playwright         # not in the test extra: this is not part of the suite
    python notebooks/screenshot.py       # writes docs/notebook-panel.png

Options: ``--out PATH``, ``--latency SECONDS`` (per simulated call, default
0.4), ``--port N``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
NOTEBOOK = HERE / "01-quickstart.ipynb"


def trimmed(folder: Path) -> Path:
    """The quickstart's code up to its panel cell, beside a link to sample_data (the notebook's ../)."""
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    cells = []
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cells.append(cell)
        if "panel" in cell.metadata.get("tags", []):
            break
    # The panel alone on the page: the other cells run, their outputs are not shown.
    for cell in cells[:-1]:
        cell.source += ";" if not cell.source.rstrip().endswith(";") else ""
    notebook.cells = [nbformat.v4.new_markdown_cell("## runner: the sample job, live"), *cells]
    (folder / "notebooks").mkdir()
    (folder / "sample_data").symlink_to(ROOT / "sample_data")
    path = folder / "notebooks" / "panel.ipynb"
    nbformat.write(notebook, path)
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_server(port: int, voila: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if voila.poll() is not None:
            raise SystemExit(f"voila exited with {voila.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit("voila did not start listening")


def counts_on(page: object) -> dict[str, int]:
    """The seven numbers as the browser shows them."""
    text: str = page.inner_text(".widget-vbox")  # type: ignore[attr-defined]
    found = re.findall(r"(pending|queued|waiting|running|received|completed|failed)\s*\n?\s*(\d+)", text)
    return {state: int(n) for state, n in found}


def shoot(url: str, out: Path, chromium: str) -> dict[str, int]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium)
        page = browser.new_page(viewport={"width": 1100, "height": 900}, device_scale_factor=1)
        page.goto(url, timeout=120_000)
        page.wait_for_selector("text=breaker", timeout=120_000)
        first = counts_on(page)
        deadline = time.monotonic() + 60
        while True:  # live: the numbers in the page move while the run goes on
            page.wait_for_timeout(500)
            now = counts_on(page)
            if now.get("completed", 0) >= 400 and now != first:
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"the counts in the page did not move: {first} then {now}")
        out.parent.mkdir(parents=True, exist_ok=True)
        box = page.locator(".widget-vbox").first.bounding_box()
        assert box is not None
        margin = 12
        page.screenshot(path=str(out), clip={
            "x": max(box["x"] - margin, 0), "y": max(box["y"] - margin, 0),
            "width": box["width"] + 2 * margin, "height": box["height"] + 2 * margin,
        })
        browser.close()
    return now


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "notebook-panel.png")
    parser.add_argument("--latency", type=float, default=0.4)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("no chromium on PATH: apt-get install -y chromium")
    port = args.port or free_port()
    with tempfile.TemporaryDirectory(prefix="runner-screenshot-") as tmp:
        notebook = trimmed(Path(tmp))
        env = {**os.environ, "RUNNER_SIM_LATENCY": str(args.latency)}
        voila = subprocess.Popen(
            [sys.executable, "-m", "voila", str(notebook), "--no-browser", f"--port={port}",
             "--Voila.ip=127.0.0.1", "--theme=light"],
            cwd=notebook.parent, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        try:
            wait_for_server(port, voila)
            shown = shoot(f"http://127.0.0.1:{port}/", args.out, chromium)
        finally:
            voila.terminate()
            try:
                voila.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                voila.kill()
                voila.communicate()
    print(f"{args.out}: the panel, live, showing {json.dumps(shown)}")


if __name__ == "__main__":
    main()
