"""Adding the records of a file to a run that exists (``runner add``), each item new to the run.

The file is read as the run's own input is, with the run's saved job: its
key, group, prompt fields, ``[schedule] field`` and ``[batch]
priority_field``, and the fingerprint rule. It is checked whole first (bad
input leaves the store untouched), then added in chunks, each one
transaction (:meth:`~runner.store.additions.Additions.add_new`): the new
items follow the run's own in its order. A key the run already has is
skipped, its item left as it is whatever the file says: never a second item
for a key, never a saved result lost, nothing sent again. So adding the same
file twice adds nothing the second time, and an add cut short is finished by
adding the file again. A run whose engine is reading its input is refused
(its next chunk could hold a key the file adds). With ``at`` the new items wait for that time, unless
their record names one (``[schedule] field``). The run's job and its input
file are not changed: ``runner run JOB`` reads its own input as before.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from . import item_rows, lease
from .errors import InputError, RunError
from .inputs import InputSpec, format_of
from .preparing import CHUNK_ROWS, chunks, unchanged
from .store.additions import Preparing
from .store.protocol import RunStore

#: Keys named when some were skipped (the count says how many in all).
NAMED_KEYS = 5


@dataclasses.dataclass(frozen=True)
class Added:
    """What an add did: the items added, and the keys skipped (the run had them), the first few by name."""

    added: int
    skipped: int
    first_skipped: tuple[str, ...]


def add(store: RunStore, name: str, path: Path, *, at: float | None, now: float, chunk_rows: int = CHUNK_ROWS
        ) -> Added:
    """Add the records of the JSONL or CSV file ``path`` to the run ``name`` (see the module)."""
    job = store.job(name)
    run_id = store.run_id(name)
    if store.preparing(name) and lease.alive(store, name, now=now):  # its first chunks may yet add the same keys
        raise RunError(f"run {name!r} is reading its input: add to it once that is done")
    spec = InputSpec(path, format_of(path))
    if spec.format == "sqlite":
        raise InputError(f"{path}: runner add reads a JSONL or CSV file (.jsonl, .ndjson, .csv)")
    spec.require()
    job = dataclasses.replace(job, input=spec, schedule=dataclasses.replace(job.schedule, at=at))
    source = spec.fingerprint()
    item_rows.check(job)
    preparing, added, skipped = Preparing(), 0, 0
    first_skipped: list[str] = []
    for chunk in chunks(item_rows.rows(job), chunk_rows):
        unchanged(job, source)
        known = store.add_new(run_id, chunk, preparing, first=job.stages[0].name, at=at, now=now)
        added, skipped = added + len(chunk) - len(known), skipped + len(known)
        first_skipped.extend(known[:NAMED_KEYS - len(first_skipped)])
    return Added(added, skipped, tuple(first_skipped))
