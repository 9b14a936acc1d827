"""The CLI's words as a user reads them: whole help, empty results said, right plurals, hints to copy as they are."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from scenes import engine_elsewhere, live_engine
from support import posts, python_run, runner_cli, write_jsonl
from test_cli_confirm import held_run

from runner.cli import main
from runner.sim import FAULTS, Simulator, validate_plan
from runner.store import Store

ORDER_A_USER_MEETS = ["demo", "run", "status", "failures", "export", "tui", "pause", "resume", "step", "retry",
                      "confirm", "cancel", "decide", "revalidate", "prioritize", "add", "queue", "budget", "archive", "restore",
                      "copy", "sim"]


def help_of(*args: str) -> str:
    """``runner ARGS`` as a person reads it in an 80-column terminal."""
    result = CliRunner().invoke(main, list(args), terminal_width=80)
    assert result.exit_code == 0, result.output
    return result.output


def held_in_file(folder: Path) -> None:
    """:func:`test_cli_confirm.held_run` in the folder's ``runs.db``: these tests are of a file's name in the hints."""
    with Store(folder / "runs.db") as store:
        held_run(store, folder)


def test_help_lists_the_commands_in_the_order_a_user_meets_them_each_summary_whole(tmp_path: Path) -> None:
    shown = runner_cli("-h", cwd=tmp_path)
    listed = shown.stdout.split("Commands:\n")[1].splitlines()
    assert (shown.returncode, [line.split()[0] for line in listed]) == (0, ORDER_A_USER_MEETS)
    assert max(map(len, shown.stdout.splitlines())) <= 80
    for line in listed:
        name, summary = line.split(maxsplit=1)
        assert summary == main.commands[name].help.splitlines()[0]  # type: ignore[union-attr]


@pytest.mark.parametrize("command", ORDER_A_USER_MEETS)
def test_dash_h_is_help_for_every_command_and_its_example_is_printed_whole(command: str) -> None:
    written = help_of(command, "--help")
    assert help_of(command, "-h") == written
    example = next(line.strip() for line in main.commands[command].help.splitlines() if "Example:" in line)  # type: ignore[union-attr]
    assert f"  {example}\n" in written


def test_sim_help_names_every_fault_itself_with_a_plan_that_the_simulator_accepts(tmp_path: Path) -> None:
    shown = runner_cli("sim", "--help", cwd=tmp_path)
    assert shown.returncode == 0
    assert sorted(set(FAULTS) - set(re.findall(r"\w+", shown.stdout))) == []
    assert "faults.py" not in shown.stdout
    plan = shown.stdout.split("Example plan: ")[1]
    assert validate_plan(json.loads(plan))["rules"][2] == {"fault": "invalid_items", "keys": ["p001"]}


def test_an_empty_store_says_it_holds_no_runs_and_names_itself_but_json_is_an_empty_list(tmp_path: Path) -> None:
    Store(tmp_path / "other.db").close()
    shown = runner_cli("status", "--db", "other.db", cwd=tmp_path)
    as_data = runner_cli("status", "--db", "other.db", "--json", cwd=tmp_path)
    assert (shown.returncode, shown.stdout, shown.stderr) == (0, "no runs in other.db\n", "")
    assert (as_data.returncode, as_data.stdout) == (0, "[]\n")


def test_a_run_without_failures_says_so_and_retry_and_confirm_say_there_is_nothing(tmp_path: Path) -> None:
    held_in_file(tmp_path)
    failures = runner_cli("failures", "test", cwd=tmp_path)
    retried = runner_cli("retry", "test", cwd=tmp_path)
    of_kind = runner_cli("retry", "test", "--kind", "auth", cwd=tmp_path)
    of_keys = runner_cli("retry", "test", "p003", cwd=tmp_path)
    assert runner_cli("confirm", "test", "--all", "--yes", cwd=tmp_path).returncode == 0
    again = runner_cli("confirm", "test", "--all", "--yes", cwd=tmp_path)
    assert (failures.returncode, failures.stdout) == (0, "no failed items in run 'test'\n")
    assert (retried.returncode, retried.stdout) == (0, "nothing to retry: run 'test' has no failed item\n")
    assert of_kind.stdout == "nothing to retry: run 'test' has no failed item of kind auth\n"
    assert of_keys.stdout == "nothing to retry: run 'test' has no failed item among the KEYS given\n"
    assert (again.returncode, again.stdout) == (0, "nothing to release: no item of run 'test' is held for confirmation\n")


def test_confirm_on_another_store_names_it_in_the_command_that_goes_on(tmp_path: Path) -> None:
    held_in_file(tmp_path)
    (tmp_path / "runs.db").rename(tmp_path / "held.db")
    confirmed = runner_cli("confirm", "test", "p001", "--yes", "--db", "held.db", cwd=tmp_path)
    unasked = runner_cli("confirm", "test", "--all", "--db", "held.db", cwd=tmp_path)
    assert confirmed.stdout.splitlines()[-2:] == ["released 1 item; to go on:", "runner run test --db held.db"]
    assert unasked.stderr == ("error: runner confirm asks before it releases held items; in a script add --yes: "
                              "runner confirm test --all --yes --db held.db\n")


async def test_a_run_made_in_python_is_told_to_go_on_from_python_not_with_runner_run(tmp_path: Path) -> None:
    with Store(tmp_path / "runs.db") as store:
        await python_run(store, tmp_path)
    retried = runner_cli("retry", "test", "--yes", cwd=tmp_path)
    assert (retried.returncode, retried.stdout) == (0, (
        "plan: 1 item · 0 charge-safe · 1 may be billed again (cost unknown)\n"
        "1 failed item of run 'test' pending again; to go on (from Python):\n"
        "await runner.notebook.Run.attach('test', db='runs.db', provider=<that handler>).go()\n"))


async def test_status_says_an_engine_died_when_its_lease_was_left_behind(tmp_path: Path) -> None:
    with Store(tmp_path / "runs.db") as store:
        await python_run(store, tmp_path)
        engine_elsewhere(store, "test", "dead")
    shown = runner_cli("status", "test", cwd=tmp_path, columns=200)
    assert "engine died (its lease was left behind)" in shown.stdout, shown.stdout


def test_a_run_on_another_store_ends_with_hints_whose_commands_read_that_store(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "posts.jsonl", posts(12))
    with Simulator(faults={"rules": [{"fault": "invalid_items", "keys": ["p003"]}]}).start() as sim:
        (tmp_path / "job.toml").write_text(
            f'name = "mine"\ninput = "posts.jsonl"\n[batch]\nmax_items = 4\n[provider]\nbase_url = "{sim.base_url}"\n'
            '[output.schema]\nrequired = ["label"]\n[retry]\nmax_attempts = 1\n'
        )
        ran = runner_cli("run", "job.toml", "--db", "my runs.db", cwd=tmp_path)
        failures = runner_cli("failures", "mine", "--db", "my runs.db", cwd=tmp_path)
        retried = runner_cli("retry", "mine", "--yes", "--db", "my runs.db", cwd=tmp_path)
        runner_cli("pause", "mine", "--db", "my runs.db", cwd=tmp_path)
        stopped = runner_cli("run", "mine", "--db", "my runs.db", cwd=tmp_path)
    assert ran.returncode == 3, ran.stderr
    assert ran.stderr.endswith("1 item failed; see why:\nrunner failures mine --db 'my runs.db'\n")
    assert "run mine: 12 items" in ran.stdout and "run mine: 1 failed item" in failures.stdout
    assert "p003 (1 attempt)" in failures.stdout
    assert retried.stdout.endswith("to go on:\nrunner run mine --db 'my runs.db'\n")
    assert stopped.returncode == 4, stopped.stderr
    assert stopped.stderr.endswith("to go on:\nrunner resume mine --db 'my runs.db'\nrunner run mine --db 'my runs.db'\n")


def test_a_hint_is_never_wrapped_mid_command_in_a_narrow_terminal(tmp_path: Path) -> None:
    held_in_file(tmp_path)
    (tmp_path / "runs.db").rename(tmp_path / "a-store-with-a-rather-long-name-indeed.db")
    shown = runner_cli("status", "test", "--db", "a-store-with-a-rather-long-name-indeed.db", cwd=tmp_path,
                       columns=40)
    assert shown.stdout.splitlines()[-2:] == [
        "release them (all, or the KEYS given):",
        "runner confirm test --all --db a-store-with-a-rather-long-name-indeed.db",
    ]


def test_the_retry_plan_names_the_items_the_failures_table_counts_not_retryable(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "posts.jsonl", posts(3))
    with Simulator(faults={"rules": [{"fault": "context_length", "keys": ["p001"]}]}).start() as sim:
        (tmp_path / "job.toml").write_text(f'name = "cl"\ninput = "posts.jsonl"\n[provider]\nbase_url = '
                                           f'"{sim.base_url}"\n', encoding="utf-8")
        assert runner_cli("run", "job.toml", cwd=tmp_path).returncode == 3
        failures = runner_cli("failures", "cl", cwd=tmp_path).stdout.splitlines()
        retried = runner_cli("retry", "cl", cwd=tmp_path)
    assert failures[3].split()[:3] == ["bad_request", "1", "0"]
    assert failures[-1] == ("retryable: may pass if sent again as is; not retryable (1): the upstream refused the "
                            "input itself, and refuses it again until the cause is fixed (runner retry still sends it; "
                            "its plan says so)")
    assert retried.stdout.splitlines()[0].endswith(
        " · 1 not retryable as it is (refused as sent: fix the cause first, or it fails the same way)")


async def test_a_running_engine_is_said_to_take_only_what_a_command_gave_it(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "known.jsonl", posts(2))
    with Store(tmp_path / "runs.db") as store:
        await python_run(store, tmp_path)
        live_engine(store, "test", "live", started_at=0.0, heartbeat_at=4e9)  # this process, beating from now on
    db = ["--db", str(tmp_path / "runs.db")]
    budget = CliRunner().invoke(main, ["budget", "test", "--max-tokens", "1000", *db])
    added = CliRunner().invoke(main, ["add", "test", str(tmp_path / "known.jsonl"), *db])
    assert budget.stdout.endswith("; the running engine goes on within it\n"), budget.output
    assert added.stdout.startswith("added 0 items to run 'test'; skipped 2 keys"), added.output
    assert "engine" not in added.stdout and "to go on" not in added.stdout
