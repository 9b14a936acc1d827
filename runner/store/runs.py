"""A run as the store keeps it: its job, its items added or given a new input, and the input they were read from.

A run is a job by name. Preparing it adds its items (``additions``); an
item given a new input moves as that module says, by the one writer of item
state.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ..errors import RunError
from .additions import Additions

if TYPE_CHECKING:
    from ..inputs import Fingerprint
    from ..jobs import Job


class Runs(Additions):
    """The verbs of a run: find it, read its job, tell whether its input changed (adding its items: ``add_items``)."""

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
