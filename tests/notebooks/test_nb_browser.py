"""The panel is a web page: notebook 01 served by Voila, opened in Debian's chromium, steered by a click.

Needs the system's chromium (``apt-get install -y chromium``): without it
the test fails and says so. ``-m "not browser"`` leaves it out.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from notebook_scripts import voila_page
from support import until

from runner.store import Store, views
from runner.store.answers import STATES, Standing
from runner.teaching import FOLDER_ENV

COUNTS_JS, counts_on, opened = voila_page.COUNTS_JS, voila_page.counts_on, voila_page.opened
private, served, trimmed = voila_page.private, voila_page.served, voila_page.trimmed
TOTAL = 2400  # the sample job's posts
WAIT = 120_000  # ms: a loaded machine starts a kernel and a browser slowly


def standing(db: Path) -> Standing:
    with Store(db, read_only=True) as store:
        return views.standing(store, "posts", now=time.time())


def no_call_in_flight(now: Standing) -> bool:
    """Paused, the batches sent have come back."""
    return not now.counts["running"] and not now.counts["received"]


@pytest.mark.browser
def test_the_quickstart_panel_in_chromium_shows_the_run_live_and_its_pause_button_pauses_the_run(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs" / "quickstart" / "runs.db"
    # One second per simulated call: the run takes a minute, so Pause comes while it goes on.
    env = {**private(tmp_path), FOLDER_ENV: str(tmp_path / "runs"), "RUNNER_SIM_LATENCY": "1"}
    try:
        with served(trimmed(tmp_path / "site"), env) as url, opened(url, tmp_path) as page:
            page.wait_for_function(f"() => ({COUNTS_JS})().completed > 0", timeout=WAIT)  # live: the page moved
            assert sorted(counts_on(page)) == sorted(STATES)
            page.wait_for_function("() => /breaker\\s+closed/.test(document.body.innerText)", timeout=WAIT)
            page.get_by_role("button", name="Pause").click()
            page.wait_for_function("() => /breaker\\s+closed\\s+paused/.test(document.body.innerText)", timeout=WAIT)
            assert standing(db).control.paused  # the click wrote the command into the store
            held = until(db, "posts", no_call_in_flight)
            assert held.counts["completed"] < TOTAL, "the run ended before the click: the simulator is too fast"
            shows = f"(want) => {{ const shown = ({COUNTS_JS})(); return Object.keys(want).every(s => shown[s] === want[s]); }}"
            page.wait_for_function(shows, arg=dict(held.counts), timeout=WAIT)  # the page shows what the store says
            assert standing(db).counts == held.counts  # paused: nothing moved since
    except RuntimeError as exc:  # no chromium, or voila could not serve the notebook
        pytest.fail(str(exc), pytrace=False)
