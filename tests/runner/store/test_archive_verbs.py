"""The archive's verbs (issue 19): finished items moved whole and back, the run's totals kept, one chunk at a time."""

from __future__ import annotations

from pathlib import Path

import pytest
from scenes import every_row
from support import StepClock, add_all, make_job, posts

from runner import archiving, runs
from runner.errors import RunError
from runner.model import ItemState
from runner.providers.handler import PythonHandler
from runner.store import Store, views
from support import label_all_but_p001

START = 1_800_000_000.0
DAY = 86_400.0
#: Every finished item, whatever its age.
EVERY = {"completed": "0m", "failed": "0m"}
#: The tables of an item's own rows, each with its archive table.
OWN = ("items", "inputs", "results", "decisions", "events")


async def four_posts(store: Store, tmp_path: Path, *, count: int = 4, at: float = START) -> None:
    """The run ``test`` over ``count`` posts, run at ``at`` by a handler that labels all but p001 (failed)."""
    job = make_job(tmp_path, "http://127.0.0.1:9/v1", posts(count), max_attempts=1, schema={"required": ["label"]})
    await runs.execute(store, job, provider=PythonHandler(label_all_but_p001), clock=StepClock(at))


def test_each_archive_table_has_the_columns_of_its_table(store: Store) -> None:
    for table in OWN:
        columns = [store.rows("@columns_of(?)", [name]) for name in (table, f"archived_{table}")]
        assert columns[0] == columns[1], table


async def test_archive_then_restore_keeps_every_row_and_every_count(store: Store, tmp_path: Path) -> None:
    await four_posts(store, tmp_path)
    before = every_row(store)
    moved = archiving.archive(store, "test", ages=EVERY, now=START + DAY, chunk=1)
    assert moved == {"completed": 3, "failed": 1}
    assert store.rows("SELECT count(*) AS n FROM items")[0]["n"] == 0
    assert archiving.restore(store, "test", keys=None, now=START + DAY, chunk=1) == 4
    assert every_row(store) == before


async def test_status_totals_are_unchanged_by_an_archive_which_it_counts(store: Store, tmp_path: Path) -> None:
    await four_posts(store, tmp_path)
    before = views.standing(store, "test", now=START + DAY)
    archiving.archive(store, "test", ages=EVERY, now=START + DAY)
    after = views.standing(store, "test", now=START + DAY)
    kept = ("counts", "groups", "paid_calls", "maybe_paid", "cost", "stages", "passes")
    assert [getattr(after, name) for name in kept] == [getattr(before, name) for name in kept]
    assert (before.archived, after.archived, after.status()["archived"]) == (0, 4, 4)


async def test_older_archives_only_the_items_finished_before_that_age(store: Store, tmp_path: Path) -> None:
    await four_posts(store, tmp_path, count=2)
    await four_posts(store, tmp_path, count=4, at=START + 2 * DAY)
    moved = archiving.archive(store, "test", ages={"completed": "1d", "failed": "1d"}, now=START + 2 * DAY + 60)
    assert moved == {"completed": 1, "failed": 1}
    assert [row["key"] for row in store.rows("SELECT key FROM archived_items ORDER BY key")] == ["p000", "p001"]


async def test_state_archives_only_the_items_in_that_state(store: Store, tmp_path: Path) -> None:
    await four_posts(store, tmp_path)
    assert archiving.archive(store, "test", ages={"completed": "0m"}, now=START + DAY, chunk=1) == {"completed": 3}
    assert [row["key"] for row in store.rows("SELECT key FROM items")] == ["p001"]
    assert archiving.archive(store, "test", ages={"failed": "0m"}, now=START + DAY) == {"failed": 1}


async def test_unfinished_items_stay_in_the_run(store: Store, tmp_path: Path) -> None:
    await four_posts(store, tmp_path, count=2)
    add_all(store, make_job(tmp_path, "http://127.0.0.1:9/v1", posts(5)), now=START + DAY)
    archiving.archive(store, "test", ages=EVERY, now=START + 2 * DAY)
    left = {row["key"]: row["state"] for row in store.rows("SELECT key, state FROM items")}
    assert left == {"p002": ItemState.PENDING, "p003": ItemState.PENDING, "p004": ItemState.PENDING}


async def test_an_archived_key_is_not_added_again_when_the_input_is_read(store: Store, tmp_path: Path) -> None:
    await four_posts(store, tmp_path)
    archiving.archive(store, "test", ages={"completed": "0m"}, now=START + DAY)
    add_all(store, make_job(tmp_path, "http://127.0.0.1:9/v1", posts(4)), now=START + DAY)
    assert [row["key"] for row in store.rows("SELECT key FROM items")] == ["p001"]


async def test_a_new_item_never_takes_an_archived_items_id(store: Store, tmp_path: Path) -> None:
    await four_posts(store, tmp_path)
    archiving.archive(store, "test", ages=EVERY, now=START + DAY)
    add_all(store, make_job(tmp_path, "http://127.0.0.1:9/v1", posts(5)), now=START + DAY)
    assert archiving.restore(store, "test", keys=None, now=START + DAY) == 4
    assert [row["key"] for row in store.rows("SELECT key FROM items ORDER BY id")] == [f"p00{i}" for i in range(5)]


async def test_an_archived_event_whose_id_was_taken_since_comes_back_under_a_new_one(
    store: Store, tmp_path: Path
) -> None:
    await four_posts(store, tmp_path)
    (events,) = store.rows("SELECT count(*) AS n FROM events")
    archiving.archive(store, "test", ages=EVERY, now=START + DAY)
    add_all(store, make_job(tmp_path, "http://127.0.0.1:9/v1", posts(5)), now=START + DAY)  # its event: the next id
    (taken,) = store.rows("SELECT count(*) AS n FROM archived_events WHERE id IN (SELECT id FROM events)")
    assert taken["n"] == 1
    archiving.restore(store, "test", keys=None, now=START + DAY)
    assert store.rows("SELECT count(*) AS n FROM events") == [{"n": events["n"] + 1}]


async def test_restore_brings_back_the_keys_given_and_refuses_one_not_archived(store: Store, tmp_path: Path) -> None:
    await four_posts(store, tmp_path)
    archiving.archive(store, "test", ages={"completed": "0m"}, now=START + DAY)
    before = every_row(store)
    with pytest.raises(RunError, match=r"run 'test': 1 of the keys given is not in its archive \('p001': not "
                                        r"archived\); nothing was restored"):
        archiving.restore(store, "test", keys=["p002", "p001"], now=START + DAY)
    assert every_row(store) == before
    assert archiving.restore(store, "test", keys=["p002"], now=START + DAY) == 1
    assert sorted(row["key"] for row in store.rows("SELECT key FROM items")) == ["p001", "p002"]
    assert views.standing(store, "test", now=START + DAY).archived == 2
