"""The tables of ``runner status`` and ``runner failures``: plain columns, as wide as their data, numbers to the
right, long text wrapped at words under its own column and never cut, and no styles in a pipe."""

from __future__ import annotations

from pathlib import Path

from support import runner_cli
from unwritable import small_store


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
