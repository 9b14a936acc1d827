"""Scenes no store verb makes, set up in the store's own SQL: the one place tests write SQL.

A test elsewhere asks for a scene by name (a dead engine's lease, a create
never sent, a disk that fails, a store of an older schema, another program's
database) and reads what follows through :mod:`runner.store.views`. The raw
tallies that the invariant fixture compares (what the events tell, what the
items hold, what the counts keep) are here too: they read the tables beneath
the read model, in SQL both backends take; so do the scenes written through
``store.write()``. Those that reach a SQLite file itself are SQLite's alone.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from runner.jobs import Job
from runner.store import Store, schema

def engine_row(store: Store, run: str, token: str, *, pid: int, host: str, started_at: float, heartbeat_at: float) -> None:
    """The worker row an engine of ``host`` and ``pid`` writes for ``run``."""
    with store.write() as conn:
        conn.execute(
            "INSERT INTO workers (run, token, pid, host, started_at, heartbeat_at) VALUES (?, ?, ?, ?, ?, ?)",
            [run, token, pid, host, started_at, heartbeat_at],
        )


def live_engine(store: Store, run: str, token: str, *, started_at: float, heartbeat_at: float) -> None:
    """The lease of an engine of this process, on this host, that beat at ``heartbeat_at``."""
    engine_row(store, run, token, pid=os.getpid(), host=socket.gethostname(), started_at=started_at,
               heartbeat_at=heartbeat_at)


def engine_elsewhere(store: Store, run: str, token: str) -> None:
    """The lease of an engine that no heartbeat proves alive: another host's, that last beat at time 0."""
    engine_row(store, run, token, pid=999_999, host="elsewhere", started_at=0.0, heartbeat_at=0.0)


def no_engine(store: Store, run: str) -> None:
    """The engine of ``run`` is gone, and its lease row with it."""
    with store.write() as conn:
        conn.execute("DELETE FROM workers WHERE run = ?", [run])


@contextmanager
def dead_engine(store: Store, run: str, token: str = "dead") -> Iterator[tuple[str, str]]:
    """Inside the block, ``run`` is held by an engine elsewhere (its lease, to pass to store verbs); then it is gone."""
    engine_elsewhere(store, run, token)
    yield run, token
    no_engine(store, run)


def given_unchecked(store: Store, job: Job) -> None:
    """The run ``job.name`` given ``job`` with none of its saved outputs checked against its output schema: what a
    runner before the revalidation at each start left (reading the input gave the run a changed schema at once)."""
    with store.write() as conn:
        conn.execute("UPDATE runs SET job = ? WHERE name = ?", [job.to_json(), job.name])


def create_never_sent(store: Store, batch_id: int) -> None:
    """A batch whose create was never sent: no time is kept by which it could land upstream."""
    with store.write() as conn:
        conn.execute("UPDATE batches SET lands_by = NULL WHERE id = ?", [batch_id])


def received_writes_fail(store: Store, *, key: str | None = None) -> None:
    """From now on the disk fails every write that would make an item (of ``key`` alone, if given) ``received``."""
    when = "NEW.state = 'received'" + ("" if key is None else f" AND NEW.key = '{key}'")
    if store.dialect == "sqlite":
        with sqlite3.connect(store.path) as conn:
            conn.execute(f"CREATE TRIGGER simulated_disk_failure BEFORE UPDATE OF state ON items WHEN {when} "
                         "BEGIN SELECT RAISE(ABORT, 'disk I/O error (simulated)'); END")
        conn.close()
        return
    with reopened(store) as other, other.write() as conn:
        conn.execute("CREATE FUNCTION simulated_disk_failure() RETURNS trigger LANGUAGE plpgsql AS "
                     "$$ BEGIN RAISE EXCEPTION 'disk I/O error (simulated)'; END $$")
        conn.execute(f"CREATE TRIGGER simulated_disk_failure BEFORE UPDATE OF state ON items FOR EACH ROW "
                     f"WHEN ({when}) EXECUTE FUNCTION simulated_disk_failure()")


@contextmanager
def write_lock_held(db: Path) -> Iterator[None]:
    """Another process holds the store's write lock, with the breaker opened but not committed, until the block ends."""
    code = (
        "import sqlite3, sys\n"
        "conn = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "conn.execute('BEGIN IMMEDIATE')\n"
        "conn.execute(\"UPDATE runs SET breaker = 'open', breaker_reason = 'not committed'\")\n"
        "print('held', flush=True)\n"
        "sys.stdin.read()\n"
        "conn.execute('ROLLBACK')\n"
    )
    with subprocess.Popen([sys.executable, "-c", code, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          text=True) as holder:
        assert holder.stdin is not None and holder.stdout is not None
        assert holder.stdout.readline() == "held\n"
        try:
            yield
        finally:
            holder.stdin.close()
            assert holder.wait() == 0


def another_programs_database(db: Path, *, user_version: int) -> None:
    """At ``db``, a SQLite database of another program (notes and tags) with ``user_version`` set."""
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        conn.execute("CREATE TABLE tags (note_id INTEGER, tag TEXT)")
        conn.execute("INSERT INTO notes (body) VALUES ('buy milk')")
        conn.execute(f"PRAGMA user_version = {user_version}")
    conn.close()


def v4_store(path: Path) -> None:
    """A store as runner wrote it at schema 4: one event per item and change, a batch left running."""
    conn = sqlite3.connect(path, isolation_level=None)
    for statements in schema.MIGRATIONS[:4]:
        for statement in statements:
            conn.execute(statement)
    conn.execute("PRAGMA user_version = 4")
    conn.execute("INSERT INTO runs (name, job, created_at, updated_at) VALUES ('old', '{}', 1, 1)")
    conn.executemany(
        "INSERT INTO items (run_id, key, grp, seq, input, chars, fingerprint, updated_at) VALUES (1, ?, 'g', ?, ?, 12, ?, 1)",
        [(f"k{i}", i, f'{{"id":"k{i}"}}', f"f{i}") for i in range(3)],
    )
    conn.execute("INSERT INTO batches (run_id, grp, state, size, chars, created_at, intent_at) VALUES (1, 'g', 'running', 3, 6, 2, 2)")
    for state, at in (("queued", 2), ("running", 3)):
        conn.execute("UPDATE items SET state = ?, batch_id = 1, updated_at = ?", (state, at))
    conn.execute("UPDATE items SET state = 'received', updated_at = 4 WHERE key != 'k2'")
    conn.execute("UPDATE items SET state = 'completed', updated_at = 5 WHERE key != 'k2'")
    conn.close()


def schema_version(db: Path) -> int:
    """The schema version the store at ``db`` is at."""
    with sqlite3.connect(db) as conn:
        (version,) = conn.execute("PRAGMA user_version").fetchone()
    conn.close()
    return int(version)


def dump(db: Path) -> list[str]:
    """Every table and row of the store at ``db``, as SQL text: equal dumps, an unchanged store."""
    with sqlite3.connect(db) as conn:
        lines = list(conn.iterdump())
    conn.close()
    return lines


#: Every table of a store at the current schema.
TABLES = ["runs", "batches", "items", "inputs", "events", "commands", "workers", "setups", "counts", "duplicates",
          "decisions", "results", "passes", "ledger", "queues", "queue_holds", "archives", "archived_items", "archived_inputs",
          "archived_results", "archived_decisions", "archived_events"]


def every_row(store: Store) -> dict[str, list[str]]:
    """Every row of every table of the store, as text, in order (either backend): equal, an unchanged store."""
    return {table: sorted(repr(sorted(row.items())) for row in store.rows(f"SELECT * FROM {table}"))
            for table in TABLES}


def location_of(store: Store) -> str:
    """Where the store is, to open it again or give it to ``runner --db`` (``store.path`` is how a person is shown
    it: a PostgreSQL URL without its password)."""
    return str(getattr(store.database, "url", store.path))


def db_named(store: Store) -> str:
    """The test's store as the CLI names it in its folder: ``runs.db``, or its URL without the password."""
    return "runs.db" if store.dialect == "sqlite" else str(store.path)


def reopened(store: Store, *, read_only: bool = False) -> Store:
    """Another connection to the same store (another process's, say, or a view's), on either backend."""
    return Store(location_of(store), read_only=read_only)


def an_archived_sub_item(store: Store) -> str:
    """The key of a sub-item in a run's archive."""
    return str(store.rows("SELECT key FROM archived_items WHERE parent_id IS NOT NULL ORDER BY id LIMIT 1")[0]["key"])


# The raw tallies the invariant fixture compares: an item in its run's archive (``runner archive``) counts as one
# in the run, its rows with it.

ITEMS = "(SELECT * FROM items UNION ALL SELECT * FROM archived_items)"
EVENTS = "(SELECT * FROM events UNION ALL SELECT * FROM archived_events)"
RESULTS = "(SELECT * FROM results UNION ALL SELECT * FROM archived_results)"


def states_told_by_events(store: Store) -> dict[tuple[int, str, str], int]:
    """Items per run, stage and state as the events tell it: every move into a state (at the stage moved to),
    less every move out of it (at the stage moved from)."""
    return {(r["run_id"], r["stage"], r["state"]): r["n"] for r in store.rows(
        "SELECT run_id, stage, state, sum(n) AS n FROM ("
        f"SELECT run_id, coalesce(to_stage, stage) AS stage, to_state AS state, items AS n FROM {EVENTS} AS events "
        f"UNION ALL SELECT run_id, stage, from_state, -items FROM {EVENTS} AS events WHERE from_state IS NOT NULL"
        ") AS moves GROUP BY run_id, stage, state HAVING sum(n) != 0"
    )}


def states_of_items(store: Store) -> dict[tuple[int, str, str], int]:
    """Items per run, stage and state as the items table holds them."""
    return {(r["run_id"], r["stage"], r["state"]): r["n"] for r in store.rows(
        f"SELECT run_id, stage, state, count(*) AS n FROM {ITEMS} AS items GROUP BY run_id, stage, state"
    )}


def counts_kept(store: Store) -> dict[tuple[int, str, str, str], int]:
    """Items per run, stage, group and state as the ``counts`` table keeps them."""
    return {(r["run_id"], r["stage"], r["grp"], r["state"]): r["n"] for r in store.rows(
        "SELECT run_id, stage, grp, state, n FROM counts WHERE n != 0"
    )}


def passes_kept(store: Store) -> dict[tuple[int, str], tuple[int, int]]:
    """Per run and stage, the results saved and the items that skipped it, as the ``passes`` table keeps them."""
    return {(r["run_id"], r["stage"]): (r["passed"], r["skipped"]) for r in store.rows(
        "SELECT run_id, stage, passed, skipped FROM passes WHERE passed != 0 OR skipped != 0"
    )}


def passes_of_results(store: Store) -> dict[tuple[int, str], tuple[int, int]]:
    """Per run and stage, the results saved (counted from the results, a sub-item's inherited ones left out) and
    the items that skipped it (from the events: each item once)."""
    counted: dict[tuple[int, str], tuple[int, int]] = {}
    for r in store.rows(f"SELECT items.run_id, results.stage, count(*) AS n FROM {RESULTS} AS results "
                        f"JOIN {ITEMS} AS items ON items.id = results.item_id WHERE results.inherited = 0 "
                        "GROUP BY items.run_id, results.stage"):
        counted[(r["run_id"], r["stage"])] = (r["n"], 0)
    for r in store.rows(f"SELECT run_id, stage, count(DISTINCT item_id) AS n FROM {EVENTS} AS events WHERE kind = 'skipped' "
                        "GROUP BY run_id, stage"):
        counted[(r["run_id"], r["stage"])] = (counted.get((r["run_id"], r["stage"]), (0, 0))[0], r["n"])
    return counted


def counts_of_items(store: Store) -> dict[tuple[int, str, str, str], int]:
    """Items per run, stage, group and state, counted from the items table."""
    return {(r["run_id"], r["stage"], r["grp"], r["state"]): r["n"] for r in store.rows(
        f"SELECT run_id, stage, grp, state, count(*) AS n FROM {ITEMS} AS items GROUP BY run_id, stage, grp, state"
    )}


@contextmanager
def reader_mid_read(db: Path) -> Iterator[None]:
    """Inside the block, a reader (a TUI's connection, say) is in the middle of a read of the store at ``db``."""
    conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None)
    try:
        conn.execute("BEGIN")
        conn.execute("SELECT count(*) FROM runs").fetchone()
        yield
        conn.execute("COMMIT")
    finally:
        conn.close()


def wal_bytes(db: Path) -> int:
    """The size of the -wal file beside the store at ``db`` (0: none)."""
    wal = Path(f"{db}-wal")
    return wal.stat().st_size if wal.exists() else 0


def paid_kept(store: Store) -> dict[int, tuple[int, int]]:
    """Each run's paid and maybe-paid calls as the run row keeps them."""
    return {r["id"]: (r["paid_calls"], r["maybe_paid"]) for r in store.rows("SELECT id, paid_calls, maybe_paid FROM runs")}


def paid_of_items(store: Store) -> dict[int, tuple[int, int]]:
    """Each run's paid and maybe-paid calls, summed over its items."""
    return {r["id"]: (r["paid"], r["maybe"]) for r in store.rows(
        "SELECT runs.id, coalesce(sum(items.paid_calls), 0) AS paid, coalesce(sum(items.maybe_paid), 0) AS maybe "
        f"FROM runs LEFT JOIN {ITEMS} AS items ON items.run_id = runs.id GROUP BY runs.id"
    )}


def charges_kept(store: Store) -> dict[int, tuple[int, int, int]]:
    """Each run's billed, unknown and not billed charges as its ledger keeps them (summed over its stages)."""
    return {r["id"]: (r["billed"], r["unknown"], r["not_billed"]) for r in store.rows(
        "SELECT runs.id, coalesce(sum(billed), 0) AS billed, coalesce(sum(unknown), 0) AS unknown, "
        "coalesce(sum(not_billed), 0) AS not_billed FROM runs LEFT JOIN ledger ON ledger.run_id = runs.id "
        "GROUP BY runs.id"
    )}


def charges_of_items(store: Store) -> dict[int, tuple[int, int, int]]:
    """Each run's paid, maybe-paid and not billed calls, summed over its items."""
    return {r["id"]: (r["paid"], r["maybe"], r["refused"]) for r in store.rows(
        "SELECT runs.id, coalesce(sum(items.paid_calls), 0) AS paid, coalesce(sum(items.maybe_paid), 0) AS maybe, "
        f"coalesce(sum(items.not_billed), 0) AS refused FROM runs LEFT JOIN {ITEMS} AS items ON items.run_id = runs.id "
        "GROUP BY runs.id"
    )}


def charges(store: Store) -> dict[str, tuple[int, int, int]]:
    """Each item's (billed, unknown, not billed) calls, by key."""
    rows = store.rows("SELECT key, paid_calls, maybe_paid, not_billed FROM items ORDER BY key")
    return {r["key"]: (r["paid_calls"], r["maybe_paid"], r["not_billed"]) for r in rows}


def batch_usages(store: Store) -> list[dict[str, int]]:
    """The usage saved with each batch that has one."""
    return [json.loads(r["usage"]) for r in store.rows("SELECT usage FROM batches WHERE usage IS NOT NULL")]


def item_shares(store: Store) -> tuple[int, int]:
    """The items' shares of input and output tokens, added up."""
    (shares,) = store.rows("SELECT sum(tokens_in) AS tin, sum(tokens_out) AS tout FROM items")
    return shares["tin"], shares["tout"]


def items_of_unknown_cost(store: Store) -> int:
    """How many items have a billed call of unknown cost."""
    return int(store.rows("SELECT count(*) AS n FROM items WHERE cost IS NULL")[0]["n"])



#: The tables of a run's rows: those whose rows name the run, and (``OF_ITEMS``) those whose rows name its items.
RUN_TABLES = ["runs", "batches", "items", "decisions", "events", "commands", "duplicates", "ledger", "counts", "passes",
              "archives", "archived_items", "archived_decisions", "archived_events"]
OF_ITEMS = {"inputs": "items", "results": "items", "archived_inputs": "archived_items",
            "archived_results": "archived_items"}
#: The space of ids a column naming a row is in (``id`` and ``parent_id``: its own table's, an archive's as its table's).
NAMING = {"run_id": "runs", "item_id": "items", "batch_id": "batches"}


def _space(table: str, column: str) -> str | None:
    return table.removeprefix("archived_") if column in ("id", "parent_id") else NAMING.get(column)


def run_rows(store: Store, name: str) -> dict[str, list[str]]:
    """Every row of run ``name`` in every table, as text, each id as its place among the run's ids of its space (an
    item's among the run's items, say): equal in two stores, the same run whatever the ids each store gave it."""
    (run,) = store.rows("SELECT id FROM runs WHERE name = ?", [name])
    rows = {table: store.rows(
        "SELECT * FROM runs WHERE id = :run" if table == "runs"
        else f"SELECT * FROM {table} WHERE item_id IN (SELECT id FROM {OF_ITEMS[table]} WHERE run_id = :run)"
        if table in OF_ITEMS else f"SELECT * FROM {table} WHERE run_id = :run", {"run": run["id"]})
        for table in [*RUN_TABLES, *OF_ITEMS]}
    ids: dict[str | None, set[int]] = {}
    for table, kept in rows.items():
        ids.setdefault(_space(table, "id"), set()).update(row["id"] for row in kept if "id" in row)
    places = {space: {id_: place for place, id_ in enumerate(sorted(each))} for space, each in ids.items()}
    return {table: sorted(repr(sorted(
        (column, value if value is None or _space(table, column) is None else places[_space(table, column)][value])
        for column, value in row.items())) for row in kept) for table, kept in rows.items()}


def event_writes_fail(db: Path) -> None:
    """From now on the disk fails every write of an event to the store at ``db``."""
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TRIGGER simulated_disk_failure BEFORE INSERT ON events "
                     "BEGIN SELECT RAISE(ABORT, 'disk I/O error (simulated)'); END")
    conn.close()
