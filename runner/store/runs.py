"""A run as the store keeps it: its job, its items added or given a new input, and the input they were read from.

A run is a job by name. Preparing it adds its items in one transaction;
an item given a new input moves as :meth:`Runs.prepare_run` says, by the
one writer of item state.
"""

from __future__ import annotations

import dataclasses
import json
import secrets
import sqlite3
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..errors import InputError, RunError
from . import items
from .connection import SQLiteFile
from .items import move

if TYPE_CHECKING:
    from ..inputs import Fingerprint
    from ..jobs import ItemRow, Job

INSERT_CHUNK = 1_000

#: The items of a JSON list of ids ``:ids``.
LISTED = "items.id IN (SELECT value FROM json_each(:ids))"

#: The items a prepare added to the run (counted from ``counts``); no row when none.
LOG_ADDED = """
INSERT INTO events (run_id, at, to_state, items)
SELECT :run, :now, 'pending', sum(n) - :before FROM counts WHERE run_id = :run HAVING sum(n) > :before
"""

#: The input file the run's items were just read from, and when (all NULL: an input always read).
INPUT_READ = """
UPDATE runs SET input_path = :path, input_size = :size, input_mtime_ns = :mtime_ns, input_hash = :digest,
    input_read_at = :now WHERE id = :run
"""

INPUT_CHANGED = {
    "error_kind": "error_kind = 'input_changed'",
    "error": "error = 'input changed after it was sent; its old result does not apply (retry to send the new input)'",
    "retryable": "retryable = 1",
}


class Runs(SQLiteFile):
    """The verbs of a run: prepare it, find it, read its job."""

    def prepare_run(self, job: Job, rows: Iterable[ItemRow], *, now: float) -> int:
        """Create or continue the run ``job.name`` and add its items, in one transaction.

        New keys are added as pending (one event for the run says how many);
        unchanged items are kept as they are.
        An item whose input fingerprint changed takes the new input: if it had
        already been sent or answered it becomes ``failed`` (input_changed), so
        that an old result is never taken for the new input and no new call is
        made without a person's retry; if it had failed, the fix is tried, with
        a fresh attempt budget; if it was in a formed, unsent batch, it leaves
        it for pending (the batch was sized, and grouped, for the old input).
        An input without records, or any error, leaves the store untouched.
        The input file's fingerprint, taken before reading, is kept with when
        it was read (``input_unchanged_since``); a large write is checkpointed
        out of the -wal.
        """
        source = job.input.fingerprint()
        with self.write() as conn:
            (run_id,) = conn.execute(
                "INSERT INTO runs (name, job, nonce, created_at, updated_at) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (name) DO UPDATE SET job = excluded.job, updated_at = excluded.updated_at "
                "RETURNING id",
                (job.name, job.to_json(), secrets.token_hex(4), now, now),
            ).fetchone()
            (before,) = conn.execute("SELECT coalesce(sum(n), 0) FROM counts WHERE run_id = ?", (run_id,)).fetchone()
            chunk: list[ItemRow] = []
            seen = 0
            for row in rows:
                chunk.append(row)
                if len(chunk) == INSERT_CHUNK:
                    _upsert_items(conn, run_id, chunk, now)
                    chunk.clear()
                seen += 1
            _upsert_items(conn, run_id, chunk, now)
            if not seen:
                raise InputError(f"{job.input.describe()}: no records")
            conn.execute(LOG_ADDED, {"run": run_id, "now": now, "before": before})
            conn.execute(INPUT_READ, _input_read(run_id, source, now))
        self._shrink_wal()
        return int(run_id)

    def input_unchanged_since(self, job: Job, seen: Fingerprint | None) -> float | None:
        """When the run's items were last read from its input, if the job is the one saved and ``seen`` as then.

        ``seen`` is the input's fingerprint now; None (no fingerprint, or a
        run never read with one) means it must be read.
        """
        if seen is None:
            return None
        rows = self.rows(
            "SELECT input_read_at FROM runs WHERE name = :name AND job = :job AND input_path = :path "
            "AND input_size = :size AND input_mtime_ns = :mtime_ns AND input_hash = :digest",
            {"name": job.name, "job": job.to_json(), **dataclasses.asdict(seen)},
        )
        return float(rows[0]["input_read_at"]) if rows else None

    def run_id(self, name: str) -> int:
        rows = self.rows("SELECT id FROM runs WHERE name = ?", [name])
        if not rows:
            known = ", ".join(self.run_names()) or "none"
            raise RunError(f"no run named {name!r} in {self.path} (runs: {known})")
        return int(rows[0]["id"])

    def run_names(self) -> list[str]:
        return [r["name"] for r in self.rows("SELECT name FROM runs ORDER BY name")]

    def job(self, name: str) -> Job:
        """The resolved job saved for a run, to continue it by name."""
        from ..jobs import Job  # here: the read-only commands never load the job file's parser

        self.run_id(name)
        (row,) = self.rows("SELECT job FROM runs WHERE name = ?", [name])
        return Job.from_json(row["job"])

    def reference(self, run_id: int) -> str:
        """The run's name and nonce, unique across stores: the prefix of its tasks' references."""
        (row,) = self.rows("SELECT name, nonce FROM runs WHERE id = ?", [run_id])
        return f"{row['name']}:{row['nonce']}"


def _input_read(run_id: int, seen: Fingerprint | None, now: float) -> dict[str, Any]:
    """The parameters of ``INPUT_READ``."""
    if seen is None:
        return {"run": run_id, "path": None, "size": None, "mtime_ns": None, "digest": None, "now": None}
    return {"run": run_id, **dataclasses.asdict(seen), "now": now}


def _move_changed(conn: sqlite3.Connection, ids: list[int], now: float) -> None:
    """Move the known items given a new input, each from the state it was in: to pending first, then to failed."""
    listed = {"ids": json.dumps(ids), "now": now}
    move(conn, "input_fixed", where=LISTED, values=items.FRESH_BUDGET, params=listed)
    move(conn, "unqueue", where=LISTED, params=listed)
    move(conn, "input_changed", where=LISTED, values=INPUT_CHANGED, params=listed)


def _upsert_items(conn: sqlite3.Connection, run_id: int, rows: list[ItemRow], now: float) -> None:
    """Add items, or give known ones their new input (moving them as ``prepare_run`` says); inputs saved."""
    pairs = json.dumps([[row.key, row.fingerprint] for row in rows])
    changed = [item_id for (item_id,) in conn.execute(items.CHANGED_INPUT, {"run": run_id, "rows": pairs})]
    if changed:
        _move_changed(conn, changed, now)
    conn.executemany(
        items.UPSERT_ITEM, [(run_id, row.key, row.group, row.seq, row.chars, row.fingerprint, now) for row in rows]
    )
    conn.executemany(items.UPSERT_INPUT, [(row.input, run_id, row.key) for row in rows])
