"""The tables of ``runner status`` and ``runner failures``: plain columns, as wide as their data (in terminal
cells: a Chinese character or an emoji takes two, a Thai vowel sign or a joiner none), numbers to the right,
long text wrapped under its own column (at words, and between any two Chinese characters), a word cut only
when it alone is wider than its column, a header never; the rows wider than the terminal only when a wrapped
column would be narrower than its floor; and no styles in a pipe.

Widths are checked against lines written out here, never against a width computed as the code computes it."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click
from support import KillAtFirstCall, StepClock, make_job, posts, runner_cli, write_jsonl
from unwritable import small_store

from runner import runs, tables
from runner.columns import cells, table
from runner.model import ItemState
from runner.rules.breaker import Control
from runner.sim import Simulator
from runner.store import Store
from runner.store.answers import STATES, Standing

#: Three posts keyed and grouped in Chinese and Russian, as the seeds' users key theirs.
CHINESE_AND_RUSSIAN = [{"id": "帖子-000", "month": "二〇二六年一月", "body": "第一条"},
                       {"id": "帖子-001", "month": "二〇二六年一月", "body": "第二条"},
                       {"id": "пост-002", "month": "二〇二六年二月", "body": "Третий"}]
#: A failure's message as a Chinese model might give it.
CHINESE_MESSAGE = "模型没有给出标签，请检查提示词里的标签列表 (нет метки)"


def test_status_columns_are_as_wide_as_their_data_with_numbers_aligned_right(tmp_path: Path) -> None:
    small_store(tmp_path)
    lines = runner_cli("status", "posts", cwd=tmp_path).stdout.splitlines()
    assert lines[0].strip() == "run posts: 3 items"
    header, rule, group, total, caption, cost = lines[1:]
    assert cost.startswith("cost unknown: ")  # the run's cost line under the table (issue 18): sim-model has no price
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
    wide = runner_cli("failures", "posts", cwd=tmp_path).stdout.splitlines()[:-1]  # no calls' line
    narrow = runner_cli("failures", "posts", cwd=tmp_path, columns=44).stdout.splitlines()[:-1]  # no calls' line
    assert wide[1:] == ["kind          items  retryable  example",
                        "─" * 58,
                        "item_invalid      1          1  p001 (1 attempt): no label"]
    assert narrow == ["          run posts: 1 failed item",
                      "kind          items  retryable  example",
                      "─" * 44,
                      "item_invalid      1          1  p001 (1",
                      "                                attempt): no",
                      "                                label"]


def test_a_terminal_too_narrow_for_a_wrapped_column_keeps_its_header_and_words_whole_the_rows_wider(
        tmp_path: Path) -> None:
    small_store(tmp_path)
    for columns in (36, 30):
        lines = runner_cli("failures", "posts", cwd=tmp_path, columns=columns).stdout.splitlines()[:-1]
        assert lines[1:] == ["kind          items  retryable  example",  # the header whole
                             "─" * 42,  # the example column at its floor of ten cells, past the terminal
                             "item_invalid      1          1  p001 (1",
                             "                                attempt):",
                             "                                no label"]
        assert lines[0] == "run posts: 1 failed item".center(columns).rstrip()  # the title on the terminal


def test_a_wrapped_column_is_never_narrower_than_its_header() -> None:
    lines = table(("n", "a wider header"), [["1", "one two three four five six"]], numbers={0}, wraps={1}, within=12)
    assert [click.unstyle(line) for line in lines] == ["n  a wider header", "─" * 17, "1  one two three",
                                                      "   four five six"]


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
    held = lines[lines.index("waiting for a person".center(80).rstrip()):]
    assert held[1].split() == ["case", "items", "what", "confirming", "does", "keys"]
    assert held[3].split()[:2] == ["resubmit", "5"] and all(len(line) <= 80 for line in held)
    start, keys = held[1].index("what confirming does"), held[1].index("keys")
    assert " ".join(line[start:keys].strip() for line in held[3:-2]).split() == (
        "sends the items again: the first call may have run, so this may run and charge twice".split())
    assert " ".join(line[keys:].strip() for line in held[3:-2]).split() == ", ".join(crash.ids).split()
    assert held[-2:] == ["release them (all, or the KEYS given):", "runner confirm test --all"]


def test_chinese_and_russian_failures_wrap_between_characters_within_the_terminal_aligned_by_cells(
        tmp_path: Path) -> None:
    small_store(tmp_path, records=CHINESE_AND_RUSSIAN, message=CHINESE_MESSAGE)
    lines = runner_cli("failures", "posts", cwd=tmp_path, columns=42).stdout.splitlines()[:-1]  # no calls' line
    assert lines[1:] == ["kind          items  retryable  example",
                         "─" * 42,
                         "item_invalid      1          1  帖子-001",
                         "                                (1",
                         "                                attempt):",
                         "                                模型没有给",  # ten cells: five Chinese characters
                         "                                出标签，请",  # never a line starting with "，"
                         "                                检查提示词",
                         "                                里的标签列",
                         "                                表 (нет",
                         "                                метки)"]


def test_status_with_chinese_groups_lines_its_counts_up_under_their_states_by_cells(tmp_path: Path) -> None:
    small_store(tmp_path, records=CHINESE_AND_RUSSIAN)
    lines = runner_cli("status", "posts", cwd=tmp_path).stdout.splitlines()
    assert lines[1:-2] == [  # a group of seven Chinese characters is fourteen cells wide (then caption, cost)
        "group           pending  queued  waiting  running  received  completed  failed",
        "─" * 78,
        "二〇二六年一月                                                       1       1",
        "二〇二六年二月        1",
        "total                 1       0        0        0         0          1       1"]


def test_a_word_wider_than_its_column_is_cut_only_then_and_every_line_fits() -> None:
    rows = [["1", "a supercalifragilistic word"], ["22", "短句子 and words that fit"]]
    narrow = [click.unstyle(line) for line in table(("n", "text"), rows, numbers={0}, wraps={1}, within=20)]
    assert narrow == [" n  text", "─" * 20, " 1  a", "    supercalifragili", "    stic word", "22  短句子 and words",
                      "    that fit"]
    wide = [click.unstyle(line) for line in table(("n", "text"), rows, numbers={0}, wraps={1}, within=24)]
    assert wide[2:5] == [" 1  a", "    supercalifragilistic", "    word"]


def test_a_display_width_counts_wide_characters_two_cells_and_marks_and_joiners_none() -> None:
    assert cells("二〇二六年一月") == 14  # Chinese: wide (W)
    assert cells("ｆｕｌｌ") == 8  # fullwidth Latin (F)
    assert cells("пост-002") == 8  # Cyrillic: one each
    assert cells("สวัสดีครับ") == 7  # Thai: ten code points, three of them vowel signs above (Mn) over the consonants
    assert cells("e\u0301") == 1  # a combining accent
    assert cells("👍") == 2 and cells("👍\ufe0f") == 2  # an emoji is wide; variation selector 16 takes nothing
    assert cells("👩\u200d💻") == 2  # a zero-width joiner sequence is drawn as one emoji
    assert cells("a\u200bb") == 2  # a zero-width space (Cf)


def test_thai_emoji_chinese_and_cyrillic_line_up_and_wrap_without_splitting_an_emoji_sequence() -> None:
    rows = [["กรุงเทพ", "3", "สวัสดีครับ 👩\u200d💻 ok"], ["東京", "12", "写代码的人 👍\ufe0f fine"], ["Москва", "7", "Привет"]]
    lines = [click.unstyle(line) for line in table(("city", "n", "note"), rows, numbers={1})]
    assert lines == ["city     n  note",
                     "─" * 30,
                     "กรุงเทพ   3  สวัสดีครับ 👩\u200d💻 ok",  # กรุงเทพ: seven code points, six cells
                     "東京    12  写代码的人 👍\ufe0f fine",
                     "Москва   7  Привет"]
    narrow = [click.unstyle(line) for line in table(("city", "n", "note"), rows, numbers={1}, wraps={2}, within=22)]
    assert narrow[2:] == ["กรุงเทพ   3  สวัสดีครับ 👩\u200d💻",  # ten cells: the column's floor, full
                          "            ok",
                          "東京    12  写代码的人",
                          "            👍\ufe0f fine",
                          "Москва   7  Привет"]
    coders = [click.unstyle(line) for line in table(("n", "note"), [["1", "👩\u200d💻" * 6]], wraps={1}, within=12)]
    assert coders[2:] == ["1  " + "👩\u200d💻" * 5, "   👩\u200d💻"]  # five to the ten cells, each whole


def test_status_counts_are_written_with_thousands_separators_as_the_title_is() -> None:
    counts = {state: 0 for state in STATES} | {ItemState.COMPLETED: 2_400, ItemState.FAILED: 12}
    run = Standing("demo", counts, {"2026-01": counts}, Control(), 0, engine_alive=False, duplicate_tasks=0,
                   idle_for=None)
    title, _, _, group, total, _ = (click.unstyle(line) for line in tables.status_table(run))
    assert title.strip() == "run demo: 2,412 items"
    assert group.split() == ["2026-01", "2,400", "12"]
    assert total.split() == ["total", "0", "0", "0", "0", "0", "2,400", "12"]


async def test_failures_of_one_kind_are_listed_item_by_item(
    tmp_path: Path, sim: Simulator, store: Store, clock: StepClock
) -> None:
    sim.set_faults({"rules": [{"fault": "http_400", "keys": ["p001", "p003"]}]})
    job = make_job(tmp_path, sim.base_url, posts(5), max_items=1, concurrency=1)
    assert (await runs.execute(store, job, clock=clock)).exit_code == 3
    by_kind = runner_cli("failures", "test", cwd=tmp_path).stdout.splitlines()
    assert by_kind[-2:] == ["every item of a kind:", "runner failures test --kind bad_request"]
    listed = [click.unstyle(line) for line in runner_cli("failures", "test", "--kind", "bad_request", cwd=tmp_path,
                                                         columns=120).stdout.splitlines()[:-2]]  # no calls or note lines
    assert listed[0].strip() == "run test: 2 failed items of kind bad_request"
    assert [line.split()[:4] for line in listed[3:]] == [["p001", "2026-01", "1", "no"], ["p003", "2026-01", "1", "no"]]
    as_json = json.loads(runner_cli("failures", "test", "--kind", "bad_request", "--json", cwd=tmp_path).stdout)
    assert sorted(item["key"] for item in as_json) == ["p001", "p003"]
    none = runner_cli("failures", "test", "--kind", "auth", cwd=tmp_path).stdout
    assert none.strip() == "no failed items of kind 'auth' in run 'test'"
    mistyped = runner_cli("failures", "test", "--kind", "bad_requests", cwd=tmp_path)
    assert mistyped.returncode == 2 and "'bad_requests' is not one of" in mistyped.stderr


def test_status_says_under_its_counts_until_when_a_rate_limit_holds_batches_back() -> None:
    counts = {state: 0 for state in STATES} | {ItemState.WAITING: 5, ItemState.PENDING: 20}
    run = Standing("demo", counts, {"2026-01": counts}, Control(), 0, engine_alive=True, duplicate_tasks=0,
                   idle_for=None, rate_limited_until=1_800_000_030.0, read_at=1_800_000_000.0)
    shown = " ".join(" ".join(click.unstyle(line).split()) for line in tables.status_table(run))
    until = time.strftime("%H:%M:%S", time.localtime(1_800_000_030.0))  # the day it was read: no date
    assert f"breaker closed · rate limited by the upstream: no batch starts before {until} · engine alive" in shown
