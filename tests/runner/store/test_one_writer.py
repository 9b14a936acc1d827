"""The one writer of item state: every move by the transition table, nothing else moved, nothing else written."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from runner.model import MOVES, Hold, ItemState
from runner.store import Store, schema
from runner.store.items import move

RUN_AND_ITEM = [
    "INSERT INTO runs (id, name, job, created_at, updated_at) VALUES (1, 'r', '{}', 0, 0)",
    "INSERT INTO items (id, run_id, key, grp, seq, chars, fingerprint, updated_at) VALUES (1, 1, 'k', '', 0, 1, 'f', 0)",
]
#: An expression for each field a move may set, whatever it means.
ANY_VALUE = {
    "batch_id": "batch_id = 7", "attempts": "attempts = attempts + 1", "output": "output = '{}'",
    "paid_calls": "paid_calls = paid_calls + 1", "refused_streak": "refused_streak = 0",
    "error_kind": "error_kind = 'transport'", "error": "error = 'e'", "retryable": "retryable = 1",
    "not_before": "not_before = 5", "retry_base": "retry_base = attempts", "stage": "stage = 'next'",
    "sub_items_left": "sub_items_left = 2", "tokens_in": "tokens_in = 1", "tokens_out": "tokens_out = 1",
    "cost": "cost = 0.5", "work": "work = 'w'", "reused": "reused = reused + 1",
}


def one_item(tmp_path: Path, state: ItemState, hold: Hold) -> Store:
    store = Store(tmp_path / "runs.db")
    with store.write() as conn:
        for statement in RUN_AND_ITEM:
            conn.execute(statement)
        conn.execute("INSERT INTO batches (id, run_id, grp, state, size, chars, created_at) "
                     "VALUES (7, 1, '', 'running', 1, 1, 0)")
        conn.execute("UPDATE items SET state = ?, hold = ?, batch_id = 7", (state, hold))
    return store


def item(store: Store) -> tuple[str, str]:
    (row,) = store.rows("SELECT state, hold FROM items")
    return row["state"], row["hold"]


def make(store: Store, name: str) -> None:
    the_move = MOVES[name]
    values = {field: ANY_VALUE[field] for field in the_move.sets}
    with store.write() as conn:
        move(conn, name, where="items.id = 1", values=values, params={"now": 1.0, "batch": 7},
             logged_for="batch")


#: Each move from every state, in the hold it asks for, and from its own origins in every other hold.
CASES = [(name, state, the_move.from_hold or Hold.NONE) for name, the_move in MOVES.items() for state in ItemState] + [
    (name, state, hold) for name, the_move in MOVES.items() if the_move.from_hold is not None
    for state in sorted(the_move.origins) for hold in Hold if hold is not the_move.from_hold
]


@pytest.mark.parametrize("name, state, hold", CASES)
def test_a_move_takes_only_items_in_its_origin_states_and_hold(
    tmp_path: Path, name: str, state: ItemState, hold: Hold
) -> None:
    the_move = MOVES[name]
    store = one_item(tmp_path, state, hold)
    make(store, name)
    allowed = state in the_move.origins and the_move.from_hold in (None, hold)
    expected = (the_move.to, the_move.to_hold or hold) if allowed else (state, hold)
    assert item(store) == expected


@pytest.mark.parametrize("name", sorted(MOVES))
def test_a_move_clears_the_fields_the_table_says_and_keeps_the_others(tmp_path: Path, name: str) -> None:
    the_move = MOVES[name]
    origin = sorted(the_move.origins)[0]
    store = one_item(tmp_path, origin, the_move.from_hold or Hold.NONE)
    kept = {"error_kind": "'auth'", "error": "'was'", "retryable": "0", "not_before": "3", "output": "'[]'",
            "work": "'w'"}
    with store.write() as conn:
        conn.execute(f"UPDATE items SET {', '.join(f'{field} = {value}' for field, value in kept.items())}")
    make(store, name)
    (row,) = store.rows(f"SELECT batch_id, {', '.join(kept)} FROM items")
    for field in the_move.clears:
        assert row[field] is None, field
    untouched = set(kept) - the_move.clears - the_move.sets
    assert all(row[field] is not None for field in untouched)


def test_a_move_setting_a_field_the_table_does_not_list_is_refused(tmp_path: Path) -> None:
    store = one_item(tmp_path, ItemState.QUEUED, Hold.NONE)
    with pytest.raises(ValueError, match="sets"), store.write() as conn:
        move(conn, "start", where="items.id = 1", values={"attempts": "attempts = 9", "output": "output = 'x'"},
             params={"now": 1.0, "batch": 7}, logged_for="batch")
    assert item(store) == ("queued", "none")


def test_a_move_from_a_state_the_table_does_not_list_is_refused(tmp_path: Path) -> None:
    store = one_item(tmp_path, ItemState.FAILED, Hold.NONE)
    with pytest.raises(ValueError, match="no move from"), store.write() as conn:
        move(conn, "claim", where="items.id = 1", values={"batch_id": "batch_id = 7"}, origin=ItemState.FAILED,
             params={"now": 1.0, "batch": 7}, logged_for="batch")
    assert item(store) == ("failed", "none")


def test_the_table_names_only_fields_an_item_has(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "fresh.db") as conn:
        for statements in schema.MIGRATIONS:
            for statement in statements:
                conn.execute(statement)
        columns = {row[1] for row in conn.execute("PRAGMA table_info(items)")}
    named = set().union(*(the_move.sets | the_move.clears for the_move in MOVES.values()))
    assert named <= columns
