"""Archiving a run's finished items and restoring them: ``runner archive``, ``runner restore``, and a run's end.

A chunk of items at a time (:data:`CHUNK`), each chunk one transaction of
its own (:mod:`runner.store.archive`), so that a large archive never holds the
store's write lock for long: an engine or a person's command writes between
two chunks, and an archive cut short leaves every chunk before it whole. The
CLI and a run's end say what moved in one line (:func:`said`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from . import retention
from .store import Store
from .words import command, plural

#: Units (an item and its sub-items) moved per transaction.
CHUNK = 500


def archive(store: Store, name: str, *, ages: Mapping[str, str], now: float, chunk: int = CHUNK) -> Counter[str]:
    """Move run ``name``'s finished items older than ``ages`` (by state) to its archive; how many, by state."""
    run_id = store.run_id(name)
    before = retention.before(dict(ages), now=now)
    moved: Counter[str] = Counter()
    last = 0
    while before and (done := store.archive_chunk(run_id, before=before, after=last, limit=chunk, now=now)).moved:
        moved.update(done.moved)
        last = done.last
    return moved


def restore(store: Store, name: str, *, keys: Sequence[str] | None, now: float, chunk: int = CHUNK) -> int:
    """Bring back run ``name``'s archived items (those of ``keys``, with their sub-items; None: all); how many.

    A key the archive does not hold is refused (``RunError``) before any comes back."""
    run_id = store.run_id(name)
    if keys is not None:
        store.refuse_not_archived(run_id, name, keys)
    count = 0
    while done := store.restore_chunk(run_id, keys=keys, limit=chunk, now=now):
        count += done
    return count


def said(name: str, moved: Mapping[str, int], ages: Mapping[str, str], source: str) -> str:
    """One line: what was archived from run ``name``, and by what (``source``: ``--older``, ``[retention]``)."""
    rule = ", ".join(_aged(state, age) for state, age in ages.items())
    if not sum(moved.values()):
        return f"nothing to archive in run {name!r} ({source}: {rule})"
    what = " and ".join(plural(n, state, state) for state, n in moved.items() if n)
    return f"archived {what} {'item' if sum(moved.values()) == 1 else 'items'} of run {name!r} ({source}: {rule})"


def _aged(state: str, age: str) -> str:
    """Which items of ``state`` an age takes: ``completed older than 30d``, or ``completed of any age`` (0)."""
    return f"{state} of any age" if retention.seconds(age, state) == 0 else f"{state} older than {age}"


def vacuum_command(name: str, *, older: str | None, state: str | None, db: str) -> str:
    """The archive again with ``--vacuum``, with the flags that chose its items (a run whose job has no
    ``[retention]`` needs them); its items already moved, it moves none and shrinks the file."""
    chosen = [*(["--older", older] if older else []), *(["--state", state] if state else [])]
    return command("archive", name, *chosen, "--vacuum", db=db)


def at_run_end(store: Store, name: str, kept: retention.Retention, *, now: float) -> str | None:
    """What the job's ``[retention]`` archived once its run stopped, in one line (None: the job has none)."""
    ages = kept.given()
    if not ages:
        return None
    return said(name, archive(store, name, ages=ages, now=now), ages, "[retention]")
