"""Free-text slots without options get their spec without pydantic (types/output.py,
SPEC §28); it must be the spec pydantic builds for them, for every text type."""

from __future__ import annotations

import pytest

from struckdown.types import TypeRegistry, TypeRequest, build_output
from struckdown.types.build import build_spec
from struckdown.types.output import plain_text_spec
from struckdown.types.table import TEXT_TYPES


@pytest.mark.parametrize("required", [False, True])
@pytest.mark.parametrize("name", sorted(TEXT_TYPES))
def test_the_plain_text_spec_is_the_one_pydantic_builds(name: str, required: bool) -> None:
    request = TypeRequest(name, required=required)
    registry = TypeRegistry()
    plain = plain_text_spec(request, registry)
    built = build_spec(request, registry)
    assert plain is not None
    assert (plain.output_type, plain.is_text) == (built.output_type, built.is_text) == (str, True)
    assert list(plain.answer_schema.items()) == list(built.answer_schema.items())  # same keys, same order
    assert plain.answer_schema_json == built.answer_schema_json
    assert plain._text_rules == built._text_rules
    assert plain.to_value("hi") == built.to_value("hi") == "hi"
    if required:
        with pytest.raises(ValueError, match="must not be empty"):
            plain._text_rules.check(" ")  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "request_",
    [
        TypeRequest("respond", options={"max_length": 5}),
        TypeRequest("respond", quantifier=(1, 3)),
        TypeRequest("int"),
        TypeRequest("pick", positional=("a", "b")),
    ],
)
def test_anything_else_is_built_by_pydantic(request_: TypeRequest) -> None:
    registry = TypeRegistry()
    assert plain_text_spec(request_, registry) is None
    spec = build_output(request_, registry)
    assert spec.answer_schema_json == build_spec(request_, registry).answer_schema_json


def test_a_plain_text_spec_is_cached_like_any_other() -> None:
    registry = TypeRegistry()
    first = build_output(TypeRequest("think"), registry)
    assert build_output(TypeRequest("think"), registry) is first
    assert first.answer_schema == {"description": "Your reasoning, step by step", "type": "string"}
