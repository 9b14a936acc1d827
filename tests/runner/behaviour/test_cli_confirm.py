"""`runner confirm` as a person and a script meet it: what each case does, a question, and --yes; on each backend."""

from __future__ import annotations

import json
import os
import pty
import subprocess
from pathlib import Path

from support import KillAtFirstCall, commands_given, make_job, posts, runner_cli, write_jsonl

from runner import lease, runs
from runner.sim import Simulator
from runner.store import Store


def held_run(store: Store, tmp_path: Path) -> None:
    """The run ``test`` of five posts whose first three an engine sent before it died: held for a person."""
    run_id = runs.prepare(store, make_job(tmp_path, "http://127.0.0.1:9/v1", posts(5)), now=1.0)
    lease.acquire(store, "test", token="dead", now=1.0)
    batch = store.claim_batch(run_id, max_items=3, max_chars=10**6, now=2.0, owner="dead")
    assert batch is not None
    store.start_batch(batch.id, lease=("test", "dead"), max_attempts=3, now=3.0)
    lease.release(store, "test", token="dead")
    store.recover(run_id, now=5.0)


def answered(answer: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``runner *args`` on a terminal where a person typed ``answer`` and Enter."""
    person, terminal = pty.openpty()
    try:
        os.write(person, answer.encode() + b"\n")
        return runner_cli(*args, cwd=cwd, stdin=terminal)
    finally:
        os.close(terminal)
        os.close(person)


def held(tmp_path: Path) -> int:
    status = runner_cli("status", "test", "--json", cwd=tmp_path)
    return int(json.loads(status.stdout)["needs_confirmation"])


def test_confirm_shows_what_each_case_does_and_releases_only_after_a_yes(tmp_path: Path, store: Store) -> None:
    held_run(store, tmp_path)
    confirmed = answered("y", "confirm", "test", "--all", cwd=tmp_path)
    assert confirmed.returncode == 0, confirmed.stderr
    assert confirmed.stdout == (
        "plan: 3 items · 0 charge-safe · 3 may be billed again (cost unknown)\n"
        "resubmit: 3 (p000, p001, p002): sends the items again: the first call may have run, "
        "so this may run and charge twice\n"
        "release 3 held items of 'test'? [y/N]: "
        "3 items: sends the items again: the first call may have run, so this may run and charge twice\n"
        "released 3 items; to go on:\nrunner run test\n"
    )
    assert held(tmp_path) == 0


def test_confirm_answered_no_or_enter_releases_nothing_and_exits_1(tmp_path: Path, store: Store) -> None:
    held_run(store, tmp_path)
    declined = answered("n", "confirm", "test", "p001", cwd=tmp_path)
    entered = answered("", "confirm", "test", "--all", cwd=tmp_path)
    assert (declined.returncode, entered.returncode) == (1, 1)
    assert declined.stderr == entered.stderr == "error: nothing was released\n"
    assert "release 1 held item of 'test'? [y/N]" in declined.stdout
    assert held(tmp_path) == 3
    assert commands_given(store) == []


def test_confirm_without_a_terminal_refuses_on_one_line_naming_yes_and_changes_nothing(
    tmp_path: Path, store: Store
) -> None:
    held_run(store, tmp_path)
    refused = runner_cli("confirm", "test", "--all", cwd=tmp_path)
    assert (refused.returncode, refused.stdout) == (1, "plan: 3 items · 0 charge-safe · 3 may be billed again "
                                                       "(cost unknown)\n")
    assert refused.stderr == ("error: runner confirm asks before it releases held items; in a script add --yes: "
                              "runner confirm test --all --yes\n")
    assert held(tmp_path) == 3


def test_confirm_yes_releases_at_once_and_says_what_each_case_does(tmp_path: Path, store: Store) -> None:
    held_run(store, tmp_path)
    confirmed = runner_cli("confirm", "test", "p000", "p002", "--yes", cwd=tmp_path)
    assert confirmed.returncode == 0, confirmed.stderr
    assert confirmed.stdout == (
        "plan: 2 items · 0 charge-safe · 2 may be billed again (cost unknown)\n"
        "2 items: sends the items again: the first call may have run, so this may run and charge twice\n"
        "released 2 items; to go on:\nrunner run test\n"
    )
    assert held(tmp_path) == 1


def test_confirm_names_a_key_the_run_does_not_have_before_asking(tmp_path: Path, store: Store) -> None:
    held_run(store, tmp_path)
    refused = answered("y", "confirm", "test", "p001", "p404", cwd=tmp_path)
    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr == "error: run 'test' has no item 'p404': nothing was changed\n"
    assert held(tmp_path) == 3


def test_confirm_after_a_killed_engine_says_its_items_were_left_running_and_the_next_run_holds_them(
        tmp_path: Path, store: Store) -> None:
    write_jsonl(tmp_path / "posts.jsonl", posts(10))
    with Simulator(on_request=(crash := KillAtFirstCall())).start() as sim:
        (tmp_path / "job.toml").write_text(f'name = "test"\ninput = "posts.jsonl"\n[batch]\nmax_items = 5\n'
                                           f'concurrency = 1\n[provider]\nbase_url = "{sim.base_url}"\n')
        crash.run("run", "job.toml", cwd=tmp_path)
    confirmed = runner_cli("confirm", "test", "--all", "--yes", cwd=tmp_path)
    assert confirmed.returncode == 0, confirmed.stderr
    assert confirmed.stdout == ("nothing to release yet: 5 items of run 'test' were left running by an engine that is "
                                "gone; the next run holds for confirmation those whose call may have been billed:\n"
                                "runner run test\n")
