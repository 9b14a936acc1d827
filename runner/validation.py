"""Checking one item's result: its id belongs to the batch, and it fits the job's schema.

Schemas are JSON Schema draft 2020-12, checked by ``jsonschema_rs`` (compiled
once per job; a result takes well under a microsecond, where the pure-Python
``jsonschema`` took about 20, as much per batch as a store commit).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jsonschema_rs

from .errors import JobError


def compile_schema(schema: dict[str, Any], where: str) -> jsonschema_rs.Draft202012Validator:
    """The validator for an output schema; refuses one that is not valid JSON Schema or has a ``$ref`` to nothing.

    Building it checks the schema against the meta-schema and resolves every
    ``$ref``, so a job file is checked whole when it is loaded.
    """
    try:
        return jsonschema_rs.Draft202012Validator(schema, retriever=_no_remote_schemas)
    except jsonschema_rs.ValidationError as exc:
        if isinstance(exc.kind, jsonschema_rs.ValidationErrorKind.Referencing):
            raise JobError(f"{where}: the output schema has a $ref that leads nowhere: {exc.message}") from exc
        at = "/".join(str(p) for p in exc.instance_path)
        raise JobError(f"{where}: the output schema is not valid JSON Schema: at /{at}: {exc.message}") from exc
    except ValueError as exc:  # jsonschema-rs' other refusals, such as "Recursion limit reached"
        raise JobError(f"{where}: the output schema cannot be used: {exc}") from exc


def _no_remote_schemas(uri: str) -> Any:
    """A ``$ref`` to another address is not fetched: a job runs on what its files say, with no surprise request."""
    raise ValueError(f"{uri} is not fetched (put the schema it names in the job's own schema, under $defs)")


class ResultCheck:
    """Validates results against the job's output schema and its Python check, if any."""

    def __init__(
        self,
        schema: dict[str, Any] | None,
        check: Callable[[dict[str, Any]], str | None] | None = None,
    ) -> None:
        self._validator = compile_schema(schema, "Job(output_schema=...)") if schema else None
        self._check = check

    def problem(self, result: Any) -> str | None:
        """What is wrong with one result, or None when it is valid."""
        if not isinstance(result, dict):
            return "result is not a JSON object"
        if self._validator is not None:
            for error in self._validator.iter_errors(result):  # the first one says enough
                path = "/".join(str(p) for p in error.instance_path)
                return f"result does not fit the output schema at /{path}: {error.message}"
        return self._check(result) if self._check else None
