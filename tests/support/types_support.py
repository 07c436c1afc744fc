"""Shared helpers for the tests/types/test_*.py files: building an OutputSpec and
validating a model's answer the way pydantic-ai does, so that each test states only
the request and the expected schema or value."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from struckdown.types import OutputSpec, TypeRegistry, TypeRequest, build_output

NULL = {"type": "null"}
NON_NULL_JSON = {
    "anyOf": [
        {"type": "object"},
        {"type": "array"},
        {"type": "string"},
        {"type": "number"},
        {"type": "boolean"},
    ]
}


#: The registry (and so the spec cache) the helpers share when a test names none.
BUILTINS = TypeRegistry()


def spec_of(
    type_name: str,
    *positional: str,
    quantifier: tuple[int, int | None] | None = None,
    required: bool = False,
    registry: TypeRegistry | None = None,
    **options: Any,
) -> OutputSpec:
    req = TypeRequest(type_name, tuple(positional), options, quantifier, required)
    return build_output(req, BUILTINS if registry is None else registry)


def value(spec: OutputSpec, response: Any) -> Any:
    """Validate like pydantic-ai does (from JSON-ish data) and unwrap."""
    return spec.to_value(spec.output_type.model_validate({"response": response}))


def value_json(spec: OutputSpec, raw_json: str) -> Any:
    return spec.to_value(spec.output_type.model_validate_json(raw_json))


def rejects(spec: OutputSpec, response: Any) -> str:
    with pytest.raises(ValidationError) as info:
        spec.output_type.model_validate({"response": response})
    return str(info.value)


def nullable(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"anyOf": [schema, NULL], "description": description}
