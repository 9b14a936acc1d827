"""How runner's messages spell what a person reads: counts, near matches, and the commands they copy.

A command in a hint is copied into a shell as it is, so it is spelt here
once: quoted for the shell, and with ``--db`` whenever the store is not the
default one, so that the copy reads the store the hint came from.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .location import given_by_environment, is_url, named
from .plurals import plural as plural

if TYPE_CHECKING:
    from .model import Retried
    from .jobs import Job

#: The store every command reads and writes without ``--db``.
DEFAULT_DB = "runs.db"


def archived(count: int) -> str:
    """``1,200 archived``: how many of a run's items its archive holds (counted in its items); "" for none."""
    return f"{count:,} archived" if count else ""


def with_workers(alive: int) -> str:
    """`` (3 workers)`` after "engine alive" when several work the run together; nothing for one."""
    return f" ({alive:,} workers)" if alive > 1 else ""


def others_at_work(alive: int) -> str:
    """After "engine alive", as a worker's own run ends while others still work the run: who still does."""
    return ": another worker still runs it" if alive == 1 else f": {alive:,} other workers still run it"


def retried(done: Retried, what: str = "failed item", *, of: str = "") -> str:
    """A retry's outcome in words: ``3 failed items{of} pending again``; those that went back to a decide stage
    apart (``1 failed item{of} waiting again for a person's decision``; both: ``3 failed items{of} sent again: 2
    pending, 1 waiting for a person's decision``)."""
    items = plural(done.again, what) + of
    if not done.deciding:
        return f"{items} pending again"
    if not done.pending:
        return f"{items} waiting again for a person's decision"
    return f"{items} sent again: {done.pending:,} pending, {done.deciding:,} waiting for a person's decision"


def duration(seconds: float) -> str:
    """``45s``, ``3m 05s``, ``2h 10m``, ``3d 4h``: how every view writes a span of time."""
    s = max(int(seconds), 0)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    return f"{s // 86400}d {s % 86400 // 3600}h"


def clock(at: float, *, now: float | None = None) -> str:
    """A time of day (local), with its date when that is not ``now``'s day (today's, by default)."""
    shown, today = time.localtime(at), time.localtime(time.time() if now is None else now)
    return time.strftime("%H:%M:%S" if shown[:3] == today[:3] else "%Y-%m-%d %H:%M:%S", shown)


def scheduled_for(at: float, *, now: float | None = None) -> str:
    """One item's (or an add's) time, as every view says it: ``scheduled for 14:52:03`` (with its date when that
    is not today's)."""
    return f"scheduled for {clock(at, now=now)}"


def few(keys: Sequence[str], *, most: int = 5, total: int | None = None) -> str:
    """``p001, p002 and 3 more``: the first ``most`` keys, then how many more (of ``total``, when ``keys`` are
    only the first of them)."""
    named = min(most, len(keys))
    more = (len(keys) if total is None else total) - named
    return ", ".join(keys[:most]) + (f" and {more} more" if more > 0 else "")


def unknown(what: str, word: str, known: Iterable[str]) -> str:
    """``unknown key 'max_item': did you mean 'max_items'?``, or the known words when none is near."""
    import difflib  # only for a mistake

    known = list(known)
    near = difflib.get_close_matches(word, known, n=1)
    return f"unknown {what} {word!r}" + (f": did you mean {near[0]!r}?" if near else f" (known: {', '.join(known)})")


def command(*words: str, db: str | Path) -> str:
    """``runner WORDS``, with ``--db PATH`` unless a command run here finds the store ``db`` without it: it is the
    one ``RUNNER_DB`` names, or (``RUNNER_DB`` unset) the directory's default store."""
    given = ["runner", *words]
    if not found_here(db):
        given += ["--db", named(db)]
    return shlex.join(given)


def found_here(db: str | Path) -> bool:
    """Whether a command run here finds the store ``db`` with no ``--db``."""
    if os.environ.get("RUNNER_DB"):
        return given_by_environment(db)
    return not is_url(db) and Path(db).absolute() == Path(DEFAULT_DB).absolute()


def resume(name: str, open_queue: str | None, *, db: str | Path) -> str:
    """What lifts a held run: ``runner queue resume QUEUE`` while its shared queue's breaker is open (a run's own
    resume cannot lift that), else ``runner resume NAME``."""
    return command("queue", "resume", open_queue, db=db) if open_queue else command("resume", name, db=db)


def from_python(job: Job) -> bool:
    """The run goes on only from Python: it was defined with a Python handler or a Python check (the store keeps
    neither function)."""
    from .jobs import PYTHON

    return job.provider.kind == PYTHON or job.checked_in_python


def python_go_on(job: Job, db: str | Path, *, handlers: str = "") -> str:
    """The notebook call that continues a run defined in Python (``runner run`` cannot), given what the store does
    not keep: its handler, its check, its python stages' functions (``handlers``, spelt)."""
    from .jobs import PYTHON

    given = [f"handlers={handlers}"] if handlers else []
    given += ["provider=<that handler>"] if job.provider.kind == PYTHON else []
    given += ["check=<its check>"] if job.checked_in_python else []
    return f"await runner.notebook.Run.attach({job.name!r}, db={named(db)!r}, {', '.join(given)}).go()"


def go_on(job: Job, db: str | Path) -> str:
    """What continues the run: ``runner run NAME`` (with its ``--db``), the Python call for a Python-defined run, or
    ``runner demo`` for the demo's run (its simulator stopped with it)."""
    if job.provider.demo:
        return command("demo", *(["--pipeline"] if job.staged else []), db=db)
    return python_go_on(job, db) if from_python(job) else command("run", job.name, db=db)
