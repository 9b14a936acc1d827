"""The quickstart's panel as a web page: Voila serves notebook 01 up to its panel, Debian's chromium opens it.

Shared by ``screenshot.py`` (the picture in docs/) and the browser test
(tests/notebooks/test_nb_browser.py). Nothing is downloaded: Playwright's
Python package drives the system's chromium (``apt-get install -y chromium``),
headless, with a fresh profile and no network of its own. Every file the
server, the kernel and the browser write goes under the folder given.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import nbformat

from runner.store.answers import STATES

HERE = Path(__file__).resolve().parent
NOTEBOOK = HERE / "01-quickstart.ipynb"
CHROMIUM = "/usr/bin/chromium"
NO_CHROMIUM = f"no chromium at {CHROMIUM}: apt-get install -y chromium (Debian's browser, the one system package the tests need)"
ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
#: The seven numbers as the page shows them (each state's first number), read by the browser itself.
COUNTS_JS = (
    "() => [...document.body.innerText.matchAll("
    f"/({'|'.join(STATES)})\\s*(\\d+)/g)].reduce((o, m) => m[1] in o ? o : {{...o, [m[1]]: Number(m[2])}}, {{}})"
)


def trimmed(folder: Path) -> Path:
    """The quickstart's code up to its panel cell, in ``folder/notebooks/`` beside a link to sample_data."""
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    cells = []
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
            cells.append(cell)
        if "panel" in cell.metadata.get("tags", []):
            break
    # The panel alone on the page: the other cells run, their outputs are not shown.
    for cell in cells[:-1]:
        cell.source += ";" if not cell.source.rstrip().endswith(";") else ""
    notebook.cells = [nbformat.v4.new_markdown_cell("## runner: the sample job, live"), *cells]
    notebook.metadata.pop("widgets", None)
    (folder / "notebooks").mkdir(parents=True)
    (folder / "sample_data").symlink_to(HERE.parent / "sample_data")
    path = folder / "notebooks" / "panel.ipynb"
    nbformat.write(notebook, path)
    return path


def private(folder: Path) -> dict[str, str]:
    """The environment that keeps a server's, a kernel's or a browser's own files in ``folder``."""
    (folder / "tmp").mkdir(parents=True, exist_ok=True)
    return {"TMPDIR": str(folder / "tmp"), "JUPYTER_RUNTIME_DIR": str(folder / "runtime")}


@contextmanager
def served(notebook: Path, env: Mapping[str, str], *, timeout: float = 120.0) -> Iterator[str]:
    """Voila serving ``notebook`` on 127.0.0.1 (``env`` added for its kernel); the page's URL."""
    port = free_port()
    voila = subprocess.Popen(
        [sys.executable, "-m", "voila", str(notebook), "--no-browser", f"--port={port}",
         "--Voila.ip=127.0.0.1", "--theme=light"],
        cwd=notebook.parent, env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True,
    )
    said: list[str] = []
    listening = threading.Event()

    def read() -> None:  # voila says on stderr when it listens; the rest is kept for a failure's message
        assert voila.stderr is not None
        for line in voila.stderr:
            said.append(line)
            if f"127.0.0.1:{port}/" in line:  # "Voilà is running at:", then the URL
                listening.set()
        listening.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        if not listening.wait(timeout) or voila.poll() is not None:
            raise RuntimeError(f"voila did not start serving {notebook.name}:\n{''.join(said[-20:])}")
        yield f"http://127.0.0.1:{port}/"
    finally:
        voila.terminate()
        try:
            voila.wait(timeout=15)
        except subprocess.TimeoutExpired:
            voila.kill()
            voila.wait()
        reader.join(timeout=15)
        assert voila.stderr is not None
        voila.stderr.close()


@contextmanager
def opened(url: str, folder: Path, *, viewport: Mapping[str, int] | None = None) -> Iterator[Any]:
    """A chromium page on ``url``, its profile in ``folder``; RuntimeError without chromium.

    Chromium keeps its own temp files in the system's temp folder (a UNIX socket's path must be short)
    and removes them when it closes.
    """
    if not Path(CHROMIUM).exists():
        raise RuntimeError(NO_CHROMIUM)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(folder / "profile"), executable_path=CHROMIUM, headless=True, args=ARGS,
            viewport=dict(viewport or {"width": 1100, "height": 900}),
        )
        try:
            page = context.new_page()
            page.goto(url, timeout=120_000)
            yield page
        finally:
            context.close()


def counts_on(page: Any) -> dict[str, int]:
    """The seven numbers as the page shows them."""
    found: dict[str, int] = page.evaluate(COUNTS_JS)
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
