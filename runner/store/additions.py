"""Adding a run's items, in chunks: each chunk one short transaction, the run marked prepared by the last.

A large input is added a chunk at a time (:meth:`Additions.add_items`), so
that the write lock is let go between chunks: other runs in the store save
their batches, and a person's commands are written, in between. Until the
last chunk's transaction the run is marked ``preparing``: an engine that dies
part way leaves a run that is not taken for prepared (its input is read
again, and the items already added are found unchanged). Each chunk renews
the engine's lease in the same transaction, so the engine shows alive while
it adds; and one event per prepare counts the items it added, moved by each
chunk with its items.

An item whose input fingerprint changed takes the new input: if it had
already been sent or answered it becomes ``failed`` (input_changed), so that
an old result is never taken for the new input and no new call is made
without a person's retry; if it waited for a person's decision, or one was
kept for it, the decision is for its old input: it starts again at the first
stage, the decision forgotten; if it had failed, the fix is tried, with a fresh
attempt budget; if it was in a formed, unsent batch, it leaves it for pending
(the batch was sized, and grouped, for the old input). A parent of a fan-out
loses its sub-items (:func:`runner.store.fanout.remove_sub_items`). An item in
the run's archive (``runner archive``) is left there, whatever its input is
now: it is never added again (``runner restore`` brings it back).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import InputChanged, RunError
from . import fanout, items
from .archive import ARCHIVED_KEYS
from .base import StoreBase
from .items import move
from .settling import LISTED_SOURCE
from .database import Conn

if TYPE_CHECKING:
    from ..inputs import Fingerprint
    from ..item_rows import ItemRow
    from ..jobs import Job

#: Rows given to one ``executemany`` (inside a chunk's transaction).
INSERT_CHUNK = 1_000

#: The items of a JSON list of ids ``:ids``.
LISTED = "items.id IN (@ints(:ids))"

#: The run, made or given its job again, marked as being prepared (an input that was read is forgotten); a
#: person's budget is kept unless the job's ``[budget]`` changed (the file is the newer word).
PREPARING = """
INSERT INTO runs (name, job, nonce, created_at, updated_at, preparing) VALUES (:name, :job, :nonce, :now, :now, 1)
ON CONFLICT (name) DO UPDATE SET job = excluded.job, updated_at = excluded.updated_at, preparing = 1,
    budget = CASE WHEN @field(runs.job, '$.budget') IS NOT DISTINCT FROM @field(excluded.job, '$.budget')
                  THEN runs.budget END,
    input_path = NULL, input_size = NULL, input_mtime_ns = NULL, input_hash = NULL, input_read_at = NULL
RETURNING id
"""

#: The run prepared: the input file its items were just read from, and when (path NULL: an input always read).
PREPARED = """
UPDATE runs SET preparing = 0, input_path = :path, input_size = :size, input_mtime_ns = :mtime_ns,
    input_hash = :digest, input_read_at = :now WHERE id = :run
"""

#: The last place in the run's order (-1: it has no items).
LAST_SEQ = "SELECT coalesce(max(seq), -1) FROM items WHERE run_id = ?"

#: How many items the run has.
TOTAL = "SELECT coalesce(sum(n), 0) FROM counts WHERE run_id = ?"

INPUT_CHANGED = {
    "error_kind": "error_kind = 'input_changed'",
    "error": "error = 'input changed after it was sent; its old result does not apply (retry to send the new input)'",
    "retryable": "retryable = 1",
}


@dataclass
class Preparing:
    """A prepare under way: its run, and the event counting the items it added (given to each chunk)."""

    run_id: int = 0
    event_id: int | None = None
    #: The run had no items when the prepare began (set by its first chunk): every key is new.
    fresh: bool | None = None


class Additions(StoreBase):
    """The verb that adds a run's items."""

    def add_items(
        self, job: Job, rows: Iterable[ItemRow], preparing: Preparing, *, now: float,
        lease: tuple[str, str] | None = None, last: bool = False, source: Fingerprint | None = None,
    ) -> None:
        """Add one chunk of the run ``job.name``'s items, in one transaction; ``last`` marks the run prepared.

        The first chunk makes the run (or gives it the job again) and marks
        it ``preparing``; ``preparing`` carries it to the next chunk. New keys
        are added as pending, unchanged items kept as they are, changed ones
        moved (see the module). With ``lease`` (run name, token) nothing is
        added unless the engine still holds the run, and its heartbeat is
        renewed. ``last`` keeps ``source``, the input file's fingerprint taken
        before reading (``input_unchanged_since``), and checkpoints a -wal that
        the writes grew.
        """
        import secrets  # here: the light commands do without its import (hashlib, hmac: 2.5 ms of a cold start)

        with self.write() as conn:
            if lease is not None and not _beat(conn, lease, now):
                raise RunError(f"run {job.name!r} was taken over by another engine while its input was added")
            (run_id,) = conn.execute(
                PREPARING, {"name": job.name, "job": job.to_json(), "nonce": secrets.token_hex(4), "now": now}
            ).fetchone()
            (before,) = conn.execute(TOTAL, (run_id,)).fetchone()
            if preparing.fresh is None:
                preparing.fresh = before == 0
            rows, added = iter(rows), 0
            while chunk := list(itertools.islice(rows, INSERT_CHUNK)):
                try:
                    added += _add_chunk(conn, run_id, chunk, now, fresh=preparing.fresh, first=job.stages[0].name,
                                        at=job.schedule.at, field=bool(job.schedule.field))
                except self.database.integrity_error as exc:  # a key twice: the input, checked without, changed since
                    raise InputChanged(job.input.describe()) from exc
            event_id = _count_added(conn, run_id, preparing.event_id, added, now, job.stages[0].name)
            if last:
                conn.execute(PREPARED, _prepared(run_id, source, now))
        preparing.run_id, preparing.event_id = int(run_id), event_id
        if last:
            self._shrink_wal()

    def add_new(
        self, run_id: int, rows: list[ItemRow], preparing: Preparing, *, first: str, at: float | None, now: float
    ) -> list[str]:
        """Add, in one transaction, the rows whose key the run does not have (``runner add``); the keys
        it had, their items left as they are. The new items start at the ``first`` stage, after the run's own in
        its order, pending, or waiting for their time (their record's, else ``at``); ``preparing`` carries the
        add's one event to the next chunk. The run's job and input are not touched."""
        with self.write() as conn:
            keys = json.dumps([row.key for row in rows])
            known = {key for key, _, _ in conn.execute(items.KNOWN_KEYS, {"run": run_id, "keys": keys})}
            (after,) = conn.execute(LAST_SEQ, (run_id,)).fetchone()
            new = [row._replace(seq=after + 1 + row.seq) for row in rows if row.key not in known]
            try:
                added = _add_chunk(conn, run_id, new, now, fresh=True, first=first, at=at)
            except self.database.integrity_error as exc:  # a key twice: the file, checked without, changed since
                raise InputChanged("the file added") from exc
            preparing.event_id = _count_added(conn, run_id, preparing.event_id, added, now, first)
            conn.execute("UPDATE runs SET updated_at = ? WHERE id = ?", (now, run_id))
        preparing.run_id = run_id
        return [row.key for row in rows if row.key in known]

    def preparing(self, name: str) -> bool:
        """Whether the run ``name`` is being prepared, or was cut short while it was (no such run: False)."""
        rows = self.rows("SELECT preparing FROM runs WHERE name = ?", [name])
        return bool(rows and rows[0]["preparing"])


def _beat(conn: Conn, lease: tuple[str, str], now: float) -> bool:
    """Renew the worker's heartbeat in the caller's transaction; False when it is no longer one of the run's."""
    held = conn.execute(
        "UPDATE workers SET heartbeat_at = ? WHERE run = ? AND token = ? RETURNING run", (now, *lease)
    ).fetchone()
    return held is not None


def _count_added(
    conn: Conn, run_id: int, event_id: int | None, added: int, now: float, first: str
) -> int | None:
    """The prepare's one event, made by its first chunk to add items, moved by each chunk after."""
    if not added:
        return event_id
    if event_id is not None:
        conn.execute("UPDATE events SET items = items + ? WHERE id = ?", (added, event_id))
        return event_id
    (made,) = conn.execute(
        "INSERT INTO events (run_id, at, to_state, items, stage) VALUES (?, ?, 'pending', ?, ?) RETURNING id",
        (run_id, now, added, first),
    ).fetchone()
    return int(made)


def _prepared(run_id: int, seen: Fingerprint | None, now: float) -> dict[str, Any]:
    """The parameters of ``PREPARED``."""
    if seen is None:
        return {"run": run_id, "path": None, "size": None, "mtime_ns": None, "digest": None, "now": now}
    return {"run": run_id, **dataclasses.asdict(seen), "now": now}


def _move_changed(conn: Conn, ids: list[int], now: float, first: str) -> None:
    """Move the known items given a new input, each from the state it was in: to pending first, then to failed."""
    listed = {"ids": json.dumps(ids), "now": now, "first": first}
    move(conn, "input_fixed", where=LISTED, values=items.FRESH_BUDGET, params=listed)
    # One waiting for a person's decision on its old input waits no more: it starts again at the first stage.
    move(conn, "rewind", where=f"{LISTED} AND items.hold = 'decide'", params=listed,
         values={"stage": "stage = :first", **items.FRESH_BUDGET})
    move(conn, "unqueue", where=LISTED, params=listed)
    move(conn, "input_changed", where=LISTED, values=INPUT_CHANGED, params=listed)
    # A parent waiting for its sub-items was sent, as the others: failed; the sub-items of its old input go.
    move(conn, "input_changed_join", where=LISTED, values=INPUT_CHANGED, params=listed)
    for item_id in ids:
        fanout.remove_sub_items(conn, item_id, now)


def _add_chunk(
    conn: Conn, run_id: int, rows: list[ItemRow], now: float, *, fresh: bool, first: str,
    at: float | None = None, field: bool = False,
) -> int:
    """Add new items, give known ones whose input changed the new one (moving them as the module says); how
    many were added (not the sub-items a changed parent lost: the removal is an event of its own).

    ``fresh``: the run had no items when the prepare began, so every key is
    new (the input was checked for duplicates) and none is looked up. Items
    start at the ``first`` stage; one whose input changed starts there again,
    its results forgotten. ``at`` (``runner run --at``) schedules the new
    items whose record names no time of its own; ``field``: the job names a
    ``[schedule] field`` (see ``_schedule``).
    """
    known: dict[str, tuple[int, str]] = {}
    if not fresh:
        keys = json.dumps([row.key for row in rows])
        known = {key: (item_id, digest) for key, item_id, digest in
                 conn.execute(items.KNOWN_KEYS, {"run": run_id, "keys": keys})}
        archived = {key for (key,) in conn.execute(ARCHIVED_KEYS, {"run": run_id, "keys": keys})}
        rows = [row for row in rows if row.key not in archived]
    changed = [(known[row.key][0], row) for row in rows if row.key in known and known[row.key][1] != row.fingerprint]
    if changed:
        _move_changed(conn, [item_id for item_id, _ in changed], now, first)
        conn.executemany(items.NEW_INPUT, [(row.group, row.seq, row.chars, row.fingerprint, now, first, row.priority,
                                            item_id) for item_id, row in changed])
        conn.executemany(items.FORGET_RESULTS, [(item_id,) for item_id, _ in changed])
        conn.executemany(items.FORGET_DECISIONS, [(item_id,) for item_id, _ in changed])
        conn.executemany(items.SAVE_INPUT, [(item_id, row.input) for item_id, row in changed])
    new = [row for row in rows if row.key not in known]
    added: list[tuple[int, ItemRow]] = []
    if new:
        (last,) = conn.execute(items.LAST_ID).fetchone()
        added = [(last + n, row if row.at is not None else row._replace(at=at)) for n, row in enumerate(new, 1)]
        conn.executemany(items.ADD_ITEM, [(item_id, run_id, row.key, row.group, row.seq, row.chars, row.fingerprint,
                                           now, first, row.priority) for item_id, row in added])
        conn.executemany(items.SAVE_INPUT, [(item_id, row.input) for item_id, row in added])
    _schedule(conn, changed + added, changed, now, field=field)
    return len(new)


def _schedule(
    conn: Conn, rows: list[tuple[int, ItemRow]], changed: list[tuple[int, ItemRow]], now: float, *,
    field: bool,
) -> None:
    """Items whose input names a time ahead wait for it (one scheduled for another time waits for the new one);
    one scheduled whose new input (``changed``) names a time that came, or, the job naming a ``[schedule] field``
    (``field``), no time, is pending. Without the field its time was a person's (``--at``): a new input (a
    changed prompt) keeps it."""
    ahead = [(item_id, row.at) for item_id, row in rows if row.at is not None and row.at > now]
    if ahead:
        move(conn, "schedule", where=items.TO_SCHEDULE, source=LISTED_SOURCE, values=items.SCHEDULED_AT,
             params={"ids": json.dumps([i for i, _ in ahead]), "at": json.dumps([at for _, at in ahead]), "now": now})
    not_ahead = [item_id for item_id, row in changed
                 if (row.at is None and field) or (row.at is not None and row.at <= now)]
    if not_ahead:
        move(conn, "due", where=LISTED, params={"ids": json.dumps(not_ahead), "now": now})
