"""A run in a terminal waits for a person while it is held; a script gets exit 4.

Real processes throughout: ``runner run`` on a pseudo-terminal (or none)
against the simulator on loopback, steered by ``runner pause``, ``resume``
and ``confirm`` run as other processes, the store read by a connection of
the test's own; on each backend.
"""

from __future__ import annotations

import os
import pty
import re
import signal
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest
from scenes import location_of
from support import PATIENCE, ROOT, KillAtFirstCall, posts, runner_cli, until, write_jsonl

from runner.model import ItemState
from runner.sim import Simulator
from runner.store import Store, views
from runner.store.answers import Standing

pytestmark = pytest.mark.slow

ESCAPES = re.compile(r"\x1b(\[[0-9;?]*[ -/]*[@-~]|[()][0-9A-Za-z]|[=>])")


class Terminal:
    """``runner ARGS`` on a pseudo-terminal of 120 columns (stdin, stdout and stderr), its output read as it comes."""

    def __init__(self, *args: str, cwd: Path) -> None:
        self._fd, terminal = pty.openpty()
        termios.tcsetwinsize(terminal, (40, 120))
        env = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm-256color"}
        self.process = subprocess.Popen([sys.executable, "-m", "runner", *args], cwd=cwd, env=env, stdin=terminal,
                                        stdout=terminal, stderr=terminal, start_new_session=True)
        os.close(terminal)
        self._raw, self._closed = b"", False
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self._fd, 65536)
            except OSError:  # the process has ended and closed the terminal
                chunk = b""
            with self._changed:
                self._raw += chunk
                self._closed = not chunk
                self._changed.notify_all()
            if not chunk:
                return

    def shown(self) -> str:
        """Everything written so far, without the terminal's control sequences."""
        return ESCAPES.sub("", self._raw.decode(errors="replace"))

    def wait_for(self, text: str) -> None:
        """Read the terminal until ``text`` appears; fail if the process ends, or time passes, first."""
        with self._changed:
            self._changed.wait_for(lambda: text in self.shown() or self._closed, timeout=PATIENCE)
        assert text in self.shown(), f"{text!r} never showed; the terminal's end:\n{self.shown()[-3000:]}"

    def wait(self) -> int:
        """The exit code, once the process ended and all it wrote was read."""
        code = self.process.wait(timeout=PATIENCE)
        self._reader.join(timeout=PATIENCE)
        os.close(self._fd)
        return code


class PauseAtFirstCall:
    """The simulator's hook: the first call is held while ``runner pause test`` runs in a process of its own.

    Calls beside it wait until the pause is written: the batches in flight
    then finish, and no other batch may start.
    """

    def __init__(self, folder: Path) -> None:
        self.folder, self.lock, self.paused = folder, threading.Lock(), False

    def __call__(self, ids: list[str]) -> None:
        with self.lock:
            if not self.paused:
                self.paused = runner_cli("pause", "test", cwd=self.folder).returncode == 0


def job_file(folder: Path, sim: Simulator, count: int, **retry: float) -> None:
    """``job.toml``, the run ``test`` over ``count`` posts in batches of 5 against ``sim``."""
    write_jsonl(folder / "posts.jsonl", posts(count))
    limits = "".join(f"{key} = {value}\n" for key, value in retry.items())
    (folder / "job.toml").write_text(f'name = "test"\ninput = "posts.jsonl"\n[batch]\nmax_items = 5\n'
                                     f'[provider]\nbase_url = "{sim.base_url}"\n[retry]\nbackoff = 0.01\n{limits}')


def standing(store: Store) -> Standing:
    return views.standing(store, "test", now=time.time())


def test_a_run_in_a_terminal_paused_from_another_process_waits_then_goes_on_after_resume(
    tmp_path: Path, store: Store
) -> None:
    with Simulator(on_request=PauseAtFirstCall(tmp_path)).start() as sim:
        job_file(tmp_path, sim, 60)
        terminal = Terminal("run", "job.toml", cwd=tmp_path)
        terminal.wait_for("test: paused by a person")
        terminal.wait_for("to go on: runner resume test (or r in runner tui); Ctrl-C to leave")
        paused = until(location_of(store), "test", lambda now: now.counts[ItemState.RUNNING] == 0)
        alive = terminal.process.poll() is None
        resumed = runner_cli("resume", "test", cwd=tmp_path)
        code = terminal.wait()
    assert (alive, paused.control.paused, paused.engine_alive) == (True, True, True)
    assert paused.counts[ItemState.COMPLETED] <= 10, "no batch started after the pause (two were in flight at most)"
    assert resumed.returncode == 0, resumed.stderr
    assert code == 0, terminal.shown()[-3000:]
    assert standing(store).counts[ItemState.COMPLETED] == 60


def test_a_ctrl_c_while_paused_says_that_going_on_needs_a_resume(tmp_path: Path, store: Store) -> None:
    with Simulator(on_request=PauseAtFirstCall(tmp_path)).start() as sim:
        job_file(tmp_path, sim, 60)
        terminal = Terminal("run", "job.toml", cwd=tmp_path)
        terminal.wait_for("to go on: runner resume test (or r in runner tui); Ctrl-C to leave")
        terminal.process.send_signal(signal.SIGINT)
        code = terminal.wait()
    assert code == 4, terminal.shown()[-3000:]
    assert "to go on:\r\nrunner resume test\r\nrunner run test" in terminal.shown()


def test_a_run_without_a_terminal_paused_from_another_process_exits_4(tmp_path: Path, store: Store) -> None:
    with Simulator(on_request=PauseAtFirstCall(tmp_path)).start() as sim:
        job_file(tmp_path, sim, 60)
        script = runner_cli("run", "job.toml", cwd=tmp_path)
    assert script.returncode == 4, script.stderr
    assert "stopped: paused by a person" in script.stderr
    assert standing(store).counts[ItemState.COMPLETED] <= 10


def test_no_wait_in_a_terminal_exits_4_at_a_pause(tmp_path: Path, store: Store) -> None:
    with Simulator(on_request=PauseAtFirstCall(tmp_path)).start() as sim:
        job_file(tmp_path, sim, 60)
        terminal = Terminal("run", "job.toml", "--no-wait", cwd=tmp_path)
        code = terminal.wait()
    assert code == 4, terminal.shown()[-3000:]
    assert "stopped: paused by a person" in terminal.shown()
    assert standing(store).counts[ItemState.COMPLETED] <= 10


def test_a_run_in_a_terminal_waits_while_its_breaker_is_open_and_says_why(tmp_path: Path, store: Store) -> None:
    with Simulator(faults={"rules": [{"fault": "http_503", "rate": 1.0}]}).start() as sim:
        job_file(tmp_path, sim, 20, request_retries=0)
        terminal = Terminal("run", "job.toml", cwd=tmp_path)
        terminal.wait_for("test: breaker open (transport)")  # its kind: the whole reason and the bar pass 120 columns
        terminal.wait_for("runner step test lets one batch run, runner resume test goes on; Ctrl-C to leave")
        held = until(location_of(store), "test", lambda now: now.counts[ItemState.RUNNING] == 0)
        alive = terminal.process.poll() is None
        sim.set_faults(None)
        resumed = runner_cli("resume", "test", cwd=tmp_path)
        code = terminal.wait()
    assert (alive, held.control.breaker.value, held.counts[ItemState.FAILED]) == (True, "open", 0)
    assert resumed.returncode == 0, resumed.stderr
    assert code == 0, terminal.shown()[-3000:]
    assert standing(store).counts[ItemState.COMPLETED] == 20


def test_a_run_in_a_terminal_labels_its_time_left(tmp_path: Path, store: Store) -> None:
    with Simulator(latency=0.5, jitter=0.0).start() as sim:
        job_file(tmp_path, sim, 100)
        terminal = Terminal("run", "job.toml", cwd=tmp_path)
        terminal.wait_for(" left")
        code = terminal.wait()
    assert code == 0, terminal.shown()[-3000:]
    assert re.search(r"/100 about (\d+m )?\d+s left", terminal.shown()), terminal.shown()[-3000:]


class Log:
    """A process's stderr, read line by line as it comes; ``told`` is set once a line starts with ``wanted``."""

    def __init__(self, process: subprocess.Popen[str], wanted: str) -> None:
        self.lines: list[str] = []
        self.told = threading.Event()
        self._reader = threading.Thread(target=self._read, args=(process, wanted), daemon=True)
        self._reader.start()

    def _read(self, process: subprocess.Popen[str], wanted: str) -> None:
        assert process.stderr is not None
        with process.stderr:
            for line in process.stderr:
                self.lines.append(line)
                if line.startswith(wanted):
                    self.told.set()

    def text(self) -> str:
        """What it wrote so far."""
        return "".join(self.lines)

    def whole(self) -> str:
        """All it wrote, once the process has ended."""
        self._reader.join(timeout=PATIENCE)
        return self.text()


def test_with_wait_a_run_waits_for_its_held_items_until_another_process_confirms_them(
    tmp_path: Path, store: Store
) -> None:
    with Simulator(on_request=(crash := KillAtFirstCall())).start() as sim:
        job_file(tmp_path, sim, 10)
        crash.run("run", "job.toml", cwd=tmp_path)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        waiting = subprocess.Popen([sys.executable, "-m", "runner", "run", "test", "--wait"], cwd=tmp_path, env=env,
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                   text=True)
        log = Log(waiting, "test: waiting for a confirmation")
        assert log.told.wait(timeout=PATIENCE), log.text()  # it says why it waits: confirming then is seen
        held = standing(store)
        alive = waiting.poll() is None
        confirmed = runner_cli("confirm", "test", "--all", "--yes", cwd=tmp_path)
        waiting.wait(timeout=PATIENCE)
        stderr = log.whole()
    assert alive and held.engine_alive and held.held == held.unfinished >= 5
    assert confirmed.returncode == 0, confirmed.stderr
    assert confirmed.stdout.endswith(f"released {held.held} items; the running engine takes them\n")
    assert waiting.returncode == 0, stderr
    said = f"test: waiting for a confirmation of {held.held} items — to go on: runner confirm test --all "
    assert stderr.count(said + "(or c in runner tui); Ctrl-C to leave\n") == 1, "said once, in the log"
    assert standing(store).counts[ItemState.COMPLETED] == 10


def test_a_batch_api_run_in_a_terminal_says_how_many_batches_the_upstream_holds_while_it_waits(
    tmp_path: Path, store: Store
) -> None:
    with Simulator(batch_seconds=3600.0).start() as sim:  # the batches end only when the test moves its clock
        job_file(tmp_path, sim, 10)
        text = (tmp_path / "job.toml").read_text()
        (tmp_path / "job.toml").write_text(text.replace("[provider]\n", '[provider]\nkind = "openai-batch"\n'))
        terminal = Terminal("run", "job.toml", cwd=tmp_path)
        terminal.wait_for("test: running (2 batches upstream)")
        sim.advance(3600.0)
        code = terminal.wait()
    assert code == 0, terminal.shown()[-3000:]
    assert standing(store).counts[ItemState.COMPLETED] == 10
