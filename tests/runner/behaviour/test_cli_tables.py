"""The tables of ``runner status`` and ``runner failures``: plain columns, as wide as their data, numbers to the
right, long text wrapped at words under its own column and never cut, and no styles in a pipe."""

from __future__ import annotations

from pathlib import Path

import click

from support import KillAtFirstCall, posts, runner_cli, write_jsonl
from unwritable import small_store

from runner import tables
from runner.model import ItemState
from runner.rules.breaker import Control
from runner.sim import Simulator
from runner.store.answers import STATES, Standing


def test_status_columns_are_as_wide_as_their_data_with_numbers_aligned_right(tmp_path: Path) -> None:
    small_store(tmp_path)
    lines = runner_cli("status", "posts", cwd=tmp_path).stdout.splitlines()
    assert lines[0].strip() == "run posts: 3 items"
    header, rule, group, total, caption = lines[1:]
    assert header.split() == ["group", "pending", "queued", "waiting", "running", "received", "completed", "failed"]
    assert set(rule) == {"─"} and len(rule) == len(header)
    assert total.split() == ["total", "1", "0", "0", "0", "0", "1", "1"]
    for state in header.split()[1:]:  # each count ends where its state's name ends
        end = header.index(state) + len(state)
        assert total[end - 1] != " " and total[end:end + 1] in ("", " ")
    assert group.split() == ["2026-01", "1", "1", "1"]
    assert caption.strip() == "breaker closed · engine not running"


def test_a_table_wider_than_the_terminal_wraps_its_text_at_words_never_cutting_one(tmp_path: Path) -> None:
    small_store(tmp_path)
    wide = runner_cli("failures", "posts", cwd=tmp_path).stdout.splitlines()
    narrow = runner_cli("failures", "posts", cwd=tmp_path, columns=36).stdout.splitlines()
    assert wide[3].split() == ["item_invalid", "1", "1", "p001", "(1", "attempt):", "no", "label"]
    start = wide[1].index("example")
    rows = narrow[3:]
    assert len(rows) > 1  # wrapped
    assert all(not row[:start].strip() for row in rows[1:])  # each further line under the example column
    assert " ".join(row[start:].strip() for row in rows) == "p001 (1 attempt): no label"  # every word whole


def test_tables_in_a_pipe_carry_no_terminal_styles(tmp_path: Path) -> None:
    small_store(tmp_path)
    for command in ("status", "failures"):
        assert "\x1b[" not in runner_cli(command, "posts", cwd=tmp_path).stdout


def test_status_lists_held_items_by_case_wrapped_at_words_then_the_command_that_releases_them(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "posts.jsonl", posts(10))
    with Simulator(on_request=(crash := KillAtFirstCall())).start() as sim:
        (tmp_path / "job.toml").write_text(f'name = "test"\ninput = "posts.jsonl"\n[batch]\nmax_items = 5\n'
                                           f'concurrency = 1\n[provider]\nbase_url = "{sim.base_url}"\n')
        crash.run("run", "job.toml", cwd=tmp_path)
        assert runner_cli("run", "test", "--no-wait", cwd=tmp_path).returncode == 4  # its calls held for a person
    lines = runner_cli("status", "test", cwd=tmp_path, columns=80).stdout.splitlines()
    table = lines[lines.index("waiting for a person".center(80).rstrip()):]
    assert table[1].split() == ["case", "items", "what", "confirming", "does", "keys"]
    assert table[3].split()[:2] == ["resubmit", "5"] and all(len(line) <= 80 for line in table)
    start, keys = table[1].index("what confirming does"), table[1].index("keys")
    assert " ".join(line[start:keys].strip() for line in table[3:-2]).split() == (
        "sends the items again: the first call may have run, so this may run and charge twice".split())
    assert " ".join(line[keys:].strip() for line in table[3:-2]).split() == ", ".join(crash.ids).split()
    assert table[-2:] == ["release them (all, or the KEYS given):", "runner confirm test --all"]


def test_status_counts_are_written_with_thousands_separators_as_the_title_is() -> None:
    counts = {state: 0 for state in STATES} | {ItemState.COMPLETED: 2_400, ItemState.FAILED: 12}
    run = Standing("demo", counts, {"2026-01": counts}, Control(), 0, engine_alive=False, duplicate_tasks=0,
                   idle_for=None)
    title, _, _, group, total, _ = (click.unstyle(line) for line in tables.status_table(run))
    assert title.strip() == "run demo: 2,412 items"
    assert group.split() == ["2026-01", "2,400", "12"]
    assert total.split() == ["total", "0", "0", "0", "0", "0", "2,400", "12"]
