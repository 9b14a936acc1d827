"""A notebook run's items in and out: records added to it, finished items archived and restored.

Part of :class:`runner.notebook.Run` (a mixin, as :mod:`runner.notebook_controls`); each method calls the
core function its command calls (``runner add``, ``runner archive``, ``runner restore``)::

    run.add(late_posts, at="2026-12-24T09:00:00Z")   # records (or a JSONL/CSV file); new keys only
    run.archive(older="30d", state="completed")      # {"completed": 2400}; vacuum=True shrinks the file
    run.restore(["p017"])                            # or run.restore() for every archived item
    run.results(state="all", archived=True)          # what the archive holds, in the columns of results()
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from . import adding, archiving, records, retention
from .errors import InputError, RunError
from .job_queue import parse_time
from .notebook_decisions import _Run


class Items:
    """``add()``, ``archive()`` and ``restore()`` of a notebook run."""

    def add(self: _Run, items: object, *, at: str | float | datetime | None = None) -> adding.Added:
        """Add records to the run, as ``runner add`` does: a list of dicts, a DataFrame, or a JSONL or CSV file.

        They are read as the run's input is (its key, group and fields) and
        checked whole first. A key the run already has is skipped and its
        item left as it is, so adding the same records again adds nothing.
        ``at``: when the new items may be sent (ISO 8601 with an offset,
        epoch seconds, ``"in 10m"``, or an aware datetime), unless their
        record names a time (``[schedule] field``). Records given in Python
        are written beside the store (``<db>.inputs/added/<run>.jsonl``).
        """
        now = self.clock.now()
        when = None if at is None else parse_time(
            at.isoformat() if isinstance(at, datetime) else str(at), "add(at=...)", now=now)
        path = records.added_input(items, self.name, self.db, self.job.key)
        with self._store() as store:
            return adding.add(store, self.name, path, at=when, now=now)

    def archive(
        self: _Run, *, older: str | None = None, state: str | None = None, vacuum: bool = False
    ) -> dict[str, int]:
        """Move the run's finished items, whole, to its archive (``runner archive``); how many, by state.

        ``older``: finished longer ago than this (``30d``, ``12h``, ``90m``);
        ``state``: ``completed`` or ``failed`` alone. Neither given: the job's
        ``[retention]`` says. The run's counts and cost stay as they were;
        ``vacuum`` then shrinks the store file (it holds the store meanwhile).
        """
        if older is not None:
            retention.seconds(older, "archive(older=...)")
        if state is not None and state not in retention.FINISHED:
            raise InputError(f"archive(state=...): {state!r} is not a finished state "
                             f"(one of {', '.join(retention.FINISHED)})")
        with self._store() as store:
            ages = retention.ages(store.job(self.name).retention, older=older, state=state)
            if not ages:
                raise RunError(f"run {self.name!r}: its job has no [retention]; say which items: older= or state=")
            moved = archiving.archive(store, self.name, ages=ages, now=self.clock.now())
            if vacuum:
                store.vacuum()
        return dict(moved)

    def restore(self: _Run, keys: Sequence[str] | None = None) -> int:
        """Bring archived items back into the run, each as it was (``runner restore``); how many.

        ``keys`` (a sub-item brings its parent's whole fan-out), or every
        archived item when None; ``keys=[]`` restores nothing. A key the
        archive does not hold is named, and nothing comes back.
        """
        if keys is not None and not keys:
            return 0
        with self._store() as store:
            return archiving.restore(store, self.name, keys=keys, now=self.clock.now())
