"""Building output specs from slot options: bad combinations fail at build time,
which options each type takes, the build cache, and the import cost of
struckdown.types."""

from __future__ import annotations

import subprocess
import sys

import pytest

from struckdown.types import (
    BUILTIN_TYPES,
    TypeBuildError,
    TypeRegistry,
    TypeRequest,
    allowed_type_options,
    build_output,
    takes_positional,
)
from types_support import spec_of


# ---------------------------------------------------------------- bad combinations


@pytest.mark.parametrize(
    ("req", "message"),
    [
        (TypeRequest("pick"), "needs at least one choice"),
        (TypeRequest("pick", ("a", " ")), "must not be empty"),
        (TypeRequest("int", ("a",)), "takes no positional options"),
        (TypeRequest("int", options={"min": 5, "max": 1}), "min=5 is greater than max=1"),
        (TypeRequest("int", options={"min": "abc"}), "must be a number"),
        (TypeRequest("int", options={"min": 1.5}), "must be a whole number"),
        (TypeRequest("int", options={"min": True}), "must be a number"),
        (TypeRequest("number", options={"max": float("nan")}), "finite"),
        (TypeRequest("respond", options={"pattern": "(unclosed"}), "invalid regular expression"),
        (TypeRequest("respond", options={"min_length": 5, "max_length": 2}), "greater than"),
        (TypeRequest("respond", options={"min_length": -1}), "must not be negative"),
        (TypeRequest("respond", options={"max_length": 0}, required=True), "max_length=0"),
        (TypeRequest("nosuchtype"), "unknown type 'nosuchtype'"),
        (TypeRequest("int", options={"colour": 1}), "unknown option(s) colour"),
        (TypeRequest("bool", options={"pattern": "x"}), "does not accept option(s) pattern"),
        (TypeRequest("date", options={"min_length": 1}), "does not accept option(s) min_length"),
        (TypeRequest("date", options={"min": "yesterday"}), "not a valid ISO 8601 date"),
        (TypeRequest("date", options={"min": "2024-02-01", "max": "2024-01-01"}), "greater than"),
        (
            TypeRequest("duration", options={"min": "PT2H", "max": "PT1H"}),
            "min=PT2H is greater than max=PT1H",
        ),
        (TypeRequest("halt", quantifier=(0, None)), "does not take a quantifier"),
        (TypeRequest("score", ("a", "b"), {"max": 3}), "cannot be combined with named levels"),
        (TypeRequest("score", ("a", "a")), "levels must be distinct"),
        (TypeRequest("score", options={"min": 11}), "greater than max (default)=10"),
        (TypeRequest("int", quantifier=(3, 1)), "minimum 3 is greater than maximum 1"),
        (TypeRequest("int", quantifier=(0, 0)), "at least one item"),
        (TypeRequest("int", quantifier=(-1, None)), ">= 0"),
    ],
)
def test_bad_combinations_raise(req: TypeRequest, message: str) -> None:
    with pytest.raises(TypeBuildError) as info:
        build_output(req)
    assert message in str(info.value)
    assert isinstance(info.value, ValueError)


def test_numeric_options_given_as_strings_are_parsed() -> None:
    assert spec_of("int", min="1", max=" 3 ").answer_schema["anyOf"][0] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 3,
    }
    assert spec_of("int", min=2.0).answer_schema["anyOf"][0]["minimum"] == 2


def test_required_in_options_is_tolerated() -> None:
    spec = build_output(TypeRequest("int", options={"required": True}))
    assert spec.answer_schema == {"type": "integer", "description": "Whole number"}


# ---------------------------------------------------------------- parser helpers


def test_allowed_options_and_positional() -> None:
    assert BUILTIN_TYPES == {
        "respond", "extract", "think", "speak", "pick", "bool", "int", "number", "date",
        "datetime", "time", "duration", "json", "record", "score", "halt",
        "default", "boolean", "poem", "decide", "date_rule", "chunked_conversation",  # 0.x's names
    }  # fmt: skip
    text = frozenset({"min_length", "max_length", "pattern"})
    bounds = frozenset({"min", "max"})
    expected = {
        "respond": text, "extract": text, "think": text, "speak": text,
        "pick": frozenset(), "bool": frozenset(), "json": frozenset(), "record": frozenset(),
        "halt": frozenset(), "int": bounds, "number": bounds, "score": bounds, "date": bounds,
        "datetime": bounds, "time": bounds, "duration": bounds,
        "default": text, "poem": text, "boolean": frozenset(), "decide": frozenset(),
        "date_rule": frozenset(), "chunked_conversation": frozenset(),
    }  # fmt: skip
    assert {name: allowed_type_options(name) for name in BUILTIN_TYPES} == expected
    assert {name for name in BUILTIN_TYPES if takes_positional(name)} == {"pick", "score", "decide"}
    with pytest.raises(TypeBuildError, match="unknown type"):
        allowed_type_options("nope")
    with pytest.raises(TypeBuildError, match="unknown type"):
        takes_positional("nope")


# ---------------------------------------------------------------- caching


def test_builds_are_cached() -> None:
    registry = TypeRegistry()  # the cache belongs to the registry (one per Environment)
    first = build_output(TypeRequest("pick", ("a", "b"), {}, (1, None), True), registry)
    again = build_output(TypeRequest("pick", ("a", "b"), {}, (1, None), True), registry)
    assert first is again
    assert spec_of("int", min=0, max=5) is spec_of("int", max=5, min=0)
    assert spec_of("int", min=0).output_type is not spec_of("int", min=1).output_type
    assert spec_of("number", min=1) is not spec_of("number", min=1.5)


def test_registering_clears_the_cache() -> None:
    registry = TypeRegistry()
    registry.register_preset("colour", "pick", choices=["red"])
    before = build_output(TypeRequest("colour"), registry)
    registry.register_preset("colour", "pick", choices=["red", "blue"])
    after = build_output(TypeRequest("colour"), registry)
    assert before is not after
    assert after.answer_schema["anyOf"][0]["enum"] == ["red", "blue"]


def test_import_is_light() -> None:
    # Import struckdown.types on its own (the parent package's __init__ is not ours
    # and may import the engine): a stub parent with the real __path__.
    import struckdown

    code = (
        "import sys, types; pkg = types.ModuleType('struckdown'); "
        f"pkg.__path__ = {list(struckdown.__path__)!r}; sys.modules['struckdown'] = pkg; "
        "import struckdown.types; "
        "print(sorted(m for m in ('yaml', 'pydantic_ai', 'httpx') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
