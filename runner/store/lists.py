"""Whole lists of a run, read when a person (or a test) asks, never polled: results, history, items, batches, holds.

Part of the read model (:mod:`runner.store.views` answers with these too).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .sqlite import Store

#: A completed item's result (JSON text): its validated output.
RESULT = "CASE WHEN state = 'completed' THEN output END"
#: Each passed stage's result, as a JSON object ``{stage: result}``, in the order they were saved.
STAGES = ("(SELECT coalesce(@object_agg(stage, @json(result)), '{}') FROM "
          "(SELECT stage, result FROM results WHERE item_id = items.id ORDER BY at) AS saved)")


# What the notebook API reads when a person asks: whole lists, never polled.


def results(store: Store, run_id: int) -> list[dict[str, Any]]:
    """Completed items with their saved result (JSON text), in input order."""
    return store.rows(
        f"SELECT key, grp AS \"group\", {RESULT} AS result FROM items WHERE run_id = ? AND state = 'completed' "
        "ORDER BY seq",
        [run_id],
    )


def history(store: Store, run_id: int) -> list[dict[str, Any]]:
    """Every event of a run, oldest first: ``items`` moved, an item's own with its key, a batch's without."""
    return store.rows(
        "SELECT e.at, i.key, e.batch_id, e.from_state, e.to_state, e.kind, e.message, e.items FROM events e "
        "LEFT JOIN items i ON i.id = e.item_id WHERE e.run_id = ? ORDER BY e.id",
        [run_id],
    )


# A run's items page by page, for an export of any size: each page a read of its own.

#: The states an export may keep, by its ``--state``: every item's, or one state's.
EXPORT_STATES = {"all": None, "completed": "completed", "failed": "failed"}

#: Before a read of items: the archive's tables under the names of the live ones (``runner export --archived``).
ARCHIVED = ("WITH items AS NOT MATERIALIZED (SELECT * FROM archived_items), "
            "inputs AS NOT MATERIALIZED (SELECT * FROM archived_inputs), "
            "results AS NOT MATERIALIZED (SELECT * FROM archived_results) ")


def staged(store: Store, run_id: int) -> bool:
    """Whether the run's job has ``[[stage]]`` tables (its export has a column group per stage)."""
    (row,) = store.rows("SELECT @flag(job, '$.staged') AS staged FROM runs WHERE id = ?", [run_id])
    return bool(row["staged"])


def stage_kinds(store: Store, run_id: int) -> list[tuple[str, str]]:
    """The run's stages in order, each (name, kind), read from its saved job (without loading the job)."""
    return [(row["name"], row["kind"]) for row in store.rows(
        "SELECT @field(listed.value, '$.name') AS name, @field(listed.value, '$.kind') AS kind "
        "FROM runs, @list_of_json(runs.job, listed, '$.stages') WHERE runs.id = ? ORDER BY listed.key", [run_id])]


def export_page(
    store: Store, run_id: int, *, state: str, after: int, limit: int, staged: bool = False, archived: bool = False
) -> list[dict[str, Any]]:
    """Up to ``limit`` items after item id ``after``, in the order they were added: what an export writes.

    ``state`` is a key of :data:`EXPORT_STATES`. Each row has the item's ``id``
    (the next page starts after the last), key, group, state, the input sent
    and the result (JSON text), and its failure's kind and message, attempts
    and charges (:data:`runner.export.TAIL`). A pipeline's (``staged``) has its ``stage`` and ``stages``, each
    passed stage's result
    (a JSON object ``{stage: result}``), and a sub-item its ``parent``'s key (else None). ``archived``: the
    items of the run's archive.
    """
    wanted = EXPORT_STATES[state]
    return store.rows(
        f"{ARCHIVED if archived else ''}"
        'SELECT id, key, grp AS "group", state, (SELECT input FROM inputs WHERE item_id = items.id) AS input, '
        f"{RESULT} AS result, error_kind AS kind, error AS message, attempts, paid_calls, maybe_paid, not_billed, "
        "reused, tokens_in, tokens_out, cost, stage, "
        f"{STAGES if staged else 'NULL'} AS stages, (SELECT key FROM items AS p WHERE p.id = items.parent_id) AS parent "
        "FROM items WHERE run_id = ? AND id > ? AND (CAST(? AS TEXT) IS NULL OR state = ?) ORDER BY id LIMIT ?",
        [run_id, after, wanted, wanted, limit],
    )


# A whole run row by row, for scripts and tests: every item, every batch, who holds what.


def items(store: Store, run_id: int) -> list[dict[str, Any]]:
    """Every item of a run in input order: its state, tries, charges, batch, saved output and error."""
    return store.rows(
        'SELECT id, key, grp AS "group", state, attempts, refused, paid_calls, maybe_paid, batch_id, not_before, '
        "output, error_kind AS kind, error AS message, retryable FROM items WHERE run_id = ? ORDER BY seq",
        [run_id],
    )


def batches(store: Store, run_id: int) -> list[dict[str, Any]]:
    """Every batch of a run, oldest first: its group, state, size, the batch it was split from, upstream id, answer
    and owner (the token of the worker that formed it)."""
    return store.rows(
        'SELECT id, parent_id, grp AS "group", state, size, round, retries, upstream_id, answer, created_at, '
        "started_at, lands_by, owner FROM batches WHERE run_id = ? ORDER BY id",
        [run_id],
    )


def stage_passes(store: Store, run_id: int) -> dict[str, dict[str, int]]:
    """Per stage of a pipeline: the items that passed it (``passed``: their result saved there) and those that
    skipped it (``skipped``: its ``when`` false), as the ``passes`` table keeps them (a row per stage, no scan)."""
    return {row["stage"]: {"passed": row["passed"], "skipped": row["skipped"]}
            for row in store.rows("SELECT stage, passed, skipped FROM passes WHERE run_id = ?", [run_id])}


def holds(store: Store, run_id: int) -> dict[str, int]:
    """A run's items by what they wait for from a person: ``confirm`` (held), ``confirmed`` (released), ``none``."""
    rows = store.rows(
        "SELECT hold, count(*) AS n FROM items WHERE run_id = ? GROUP BY hold",
        [run_id],
    )
    return {row["hold"]: row["n"] for row in rows}


def failures(store: Store, name: str, *, kind: str | None = None) -> list[dict[str, Any]]:
    """Failed items (of ``kind``, or all) with their reason, as the failures contract lists them, their
    charges (calls billed, unknown, not billed; cost, None when unknown), and the stage it failed at (where
    ``runner retry`` sends it again)."""
    run_id = store.run_id(name)
    return [
        {**row, "retryable": bool(row["retryable"])}
        for row in store.rows(
            'SELECT key, grp AS "group", error_kind AS kind, error AS message, attempts, retryable, paid_calls, '
            "maybe_paid, not_billed, cost, stage FROM items "
            "WHERE run_id = ? AND state = 'failed' AND (CAST(? AS TEXT) IS NULL OR error_kind = ?) "
            "ORDER BY error_kind, seq",
            [run_id, kind, kind],
        )
    ]
