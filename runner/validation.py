"""Checking one item's result: its id belongs to the batch, and it fits the job's schema."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .errors import JobError

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

# jsonschema is imported where a schema is used, not with this module: with its
# optional format packages installed it can take a second to import, which every
# CLI command and engine start would pay even for jobs without a schema.


def check_schema(schema: dict[str, Any], where: str) -> None:
    """Refuse an output schema that is not itself a valid JSON Schema."""
    import jsonschema

    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise JobError(f"{where}: the output schema is not valid JSON Schema: {exc.message}") from exc


class ResultCheck:
    """Validates results against the job's output schema and its Python check, if any."""

    def __init__(
        self,
        schema: dict[str, Any] | None,
        check: Callable[[dict[str, Any]], str | None] | None = None,
    ) -> None:
        self._validator: Draft202012Validator | None = None
        if schema:
            from jsonschema import Draft202012Validator

            self._validator = Draft202012Validator(schema)
        self._check = check

    def problem(self, result: Any) -> str | None:
        """What is wrong with one result, or None when it is valid."""
        if not isinstance(result, dict):
            return "result is not a JSON object"
        if self._validator is not None and not self._validator.is_valid(result):
            from jsonschema.exceptions import best_match

            error = best_match(self._validator.iter_errors(result))
            if error is not None:
                path = "/".join(str(p) for p in error.absolute_path)
                return f"result does not fit the output schema at /{path}: {error.message}"
        return self._check(result) if self._check else None
