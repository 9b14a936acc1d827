"""Checking one item's result: its id belongs to the batch, and it fits the job's schema."""

from __future__ import annotations

from typing import Any

import jsonschema

from .errors import JobError


def check_schema(schema: dict[str, Any], where: str) -> None:
    """Refuse an output schema that is not itself a valid JSON Schema."""
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise JobError(f"{where}: the output schema is not valid JSON Schema: {exc.message}") from exc


class ResultCheck:
    """Validates results against the job's output schema (no schema: any object passes)."""

    def __init__(self, schema: dict[str, Any] | None) -> None:
        self._validator = jsonschema.Draft202012Validator(schema) if schema else None

    def problem(self, result: Any) -> str | None:
        """What is wrong with one result, or None when it is valid."""
        if not isinstance(result, dict):
            return "result is not a JSON object"
        if self._validator is None:
            return None
        error = jsonschema.exceptions.best_match(self._validator.iter_errors(result))
        if error is None:
            return None
        path = "/".join(str(p) for p in error.absolute_path)
        return f"result does not fit the output schema at /{path}: {error.message}"
