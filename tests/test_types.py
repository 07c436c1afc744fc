"""Tests for struckdown.types: schemas sent to the model, values returned, errors."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from collections.abc import Mapping
from typing import Annotated, Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field, ValidationError

from struckdown.types import (
    BUILTIN_TYPES,
    OutputSpec,
    TypeBuildError,
    TypeRegistry,
    TypeRequest,
    allowed_type_options,
    build_output,
    default_registry,
    load_type_file,
    register_type,
    takes_positional,
)
from struckdown.types.options import iso_duration

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


def spec_of(
    type_name: str,
    *positional: str,
    quantifier: tuple[int, int | None] | None = None,
    required: bool = False,
    registry: TypeRegistry | None = None,
    **options: Any,
) -> OutputSpec:
    req = TypeRequest(type_name, tuple(positional), options, quantifier, required)
    return build_output(req, registry)


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


# ---------------------------------------------------------------- schemas


@pytest.mark.parametrize(
    ("type_name", "description"),
    [
        ("respond", "The answer"),
        ("extract", "Text copied verbatim from the input"),
        ("think", "Your reasoning, step by step"),
        ("speak", "What to say, in your own words"),
    ],
)
def test_text_types_are_plain_str(type_name: str, description: str) -> None:
    spec = spec_of(type_name)
    assert spec.output_type is str
    assert spec.is_text
    assert spec.answer_schema == {"type": "string", "description": description}
    assert spec.to_value("hello") == "hello"
    assert spec.check_text("") == ""  # no constraints: no-op


SINGLE_SCHEMAS: list[tuple[TypeRequest, str, dict[str, Any]]] = [
    (
        TypeRequest("pick", ("red", "green", "blue")),
        "PickAnswer",
        nullable({"enum": ["red", "green", "blue"], "type": "string"}, "One of the given choices"),
    ),
    (TypeRequest("bool"), "BoolAnswer", nullable({"type": "boolean"}, "true or false")),
    (TypeRequest("int"), "IntAnswer", nullable({"type": "integer"}, "Whole number")),
    (
        TypeRequest("int", options={"min": 0, "max": 130}, required=True),
        "IntAnswer",
        {"type": "integer", "minimum": 0, "maximum": 130, "description": "Whole number"},
    ),
    (
        TypeRequest("number", options={"min": -1.5, "max": 2}),
        "NumberAnswer",
        nullable({"type": "number", "minimum": -1.5, "maximum": 2}, "Number"),
    ),
    (
        TypeRequest("date"),
        "DateAnswer",
        nullable({"type": "string", "format": "date"}, "ISO 8601 date (YYYY-MM-DD)"),
    ),
    (
        TypeRequest("date", options={"min": "2024-01-01", "max": "2024-12-31"}, required=True),
        "DateAnswer",
        {
            "type": "string",
            "format": "date",
            "description": "ISO 8601 date (YYYY-MM-DD), minimum 2024-01-01, maximum 2024-12-31",
        },
    ),
    (
        TypeRequest("datetime"),
        "DatetimeAnswer",
        nullable(
            {"type": "string", "format": "date-time"},
            "ISO 8601 date and time (YYYY-MM-DDTHH:MM:SS, optional UTC offset)",
        ),
    ),
    (
        TypeRequest("time"),
        "TimeAnswer",
        nullable({"type": "string", "format": "time"}, "ISO 8601 time (HH:MM:SS)"),
    ),
    (
        TypeRequest("duration", options={"min": "PT30M", "max": "P1DT2H"}),
        "DurationAnswer",
        nullable(
            {"type": "string", "format": "duration"},
            "ISO 8601 duration (e.g. PT1H30M, P3D), minimum PT30M, maximum P1DT2H",
        ),
    ),
    # json already admits null, so the optional form is the empty schema
    (TypeRequest("json"), "JsonAnswer", {"description": "Any JSON value"}),
    (TypeRequest("json", required=True), "JsonAnswer", {**NON_NULL_JSON, "description": "Any JSON value"}),
    (TypeRequest("record"), "RecordAnswer", nullable({"type": "object"}, "A JSON object")),
    (
        TypeRequest("record", required=True),
        "RecordAnswer",
        {"type": "object", "description": "A JSON object"},
    ),
    (
        TypeRequest("score", ("poor", "fair", "good")),
        "ScoreAnswer",
        nullable({"type": "integer", "minimum": 0, "maximum": 2}, "0=poor, 1=fair, 2=good"),
    ),
    (
        TypeRequest("score"),
        "ScoreAnswer",
        nullable({"type": "integer", "minimum": 0, "maximum": 10}, "Score from 0 to 10"),
    ),
    (
        TypeRequest("score", options={"min": 1, "max": 5}, required=True),
        "ScoreAnswer",
        {"type": "integer", "minimum": 1, "maximum": 5, "description": "Score from 1 to 5"},
    ),
]


@pytest.mark.parametrize(("req", "model_name", "schema"), SINGLE_SCHEMAS)
def test_single_answer_schema(req: TypeRequest, model_name: str, schema: dict[str, Any]) -> None:
    spec = build_output(req)
    assert not spec.is_text
    assert spec.output_type.__name__ == model_name
    assert list(spec.output_type.model_fields) == ["response"]
    assert spec.answer_schema == schema
    # the object schema pydantic-ai turns into the output tool
    full = spec.output_type.model_json_schema()
    assert full["required"] == ["response"]
    assert full["additionalProperties"] is False


def test_halt_schema_and_value() -> None:
    spec = spec_of("halt")
    assert spec.answer_schema == {
        "$ref": "#/$defs/HaltVerdict",
        "description": "Guard verdict",
        "$defs": {
            "HaltVerdict": {
                "additionalProperties": False,
                "description": "Verdict of a guard check.",
                "properties": {
                    "triggered": {
                        "description": "True if the guard condition is met and processing must stop",
                        "type": "boolean",
                    },
                    "reason": {"description": "Short explanation of the verdict", "type": "string"},
                },
                "required": ["triggered", "reason"],
                "title": "HaltVerdict",
                "type": "object",
            }
        },
    }
    result = value(spec, {"triggered": True, "reason": "asks for a password"})
    assert result == {"triggered": True, "reason": "asks for a password"}
    assert type(result) is dict
    rejects(spec, None)  # a verdict is never null, even without !
    rejects(spec, {"triggered": False})
    assert spec_of("halt", required=True).answer_schema == spec.answer_schema


def test_answer_schema_json_is_canonical() -> None:
    spec = spec_of("int", min=0)
    assert spec.answer_schema_json == (
        '{"anyOf":[{"minimum":0,"type":"integer"},{"type":"null"}],"description":"Whole number"}'
    )


# ---------------------------------------------------------------- values


@pytest.mark.parametrize(
    ("req", "raw_json", "expected"),
    [
        (TypeRequest("pick", ("red", "green")), '"green"', "green"),
        (TypeRequest("bool"), "true", True),
        (TypeRequest("int"), "42", 42),
        (TypeRequest("number"), "3", 3.0),
        (TypeRequest("number"), "2.5", 2.5),
        (TypeRequest("date"), '"2024-05-01"', dt.date(2024, 5, 1)),
        (TypeRequest("datetime"), '"2024-05-01T10:30:00"', dt.datetime(2024, 5, 1, 10, 30)),
        (
            TypeRequest("datetime"),
            '"2024-05-01T10:30:00Z"',
            dt.datetime(2024, 5, 1, 10, 30, tzinfo=dt.UTC),
        ),
        (TypeRequest("time"), '"09:15"', dt.time(9, 15)),
        (TypeRequest("duration"), '"PT1H30M"', dt.timedelta(hours=1, minutes=30)),
        (TypeRequest("duration"), '"P3D"', dt.timedelta(days=3)),
        (TypeRequest("json"), '[1, "a", {"b": null}]', [1, "a", {"b": None}]),
        (TypeRequest("json"), '"just text"', "just text"),
        (TypeRequest("record"), '{"a": [1, 2], "b": {"c": true}}', {"a": [1, 2], "b": {"c": True}}),
        (TypeRequest("score", ("low", "high")), "1", 1),
        (TypeRequest("score"), "7", 7),
    ],
)
def test_values_are_plain_python(req: TypeRequest, raw_json: str, expected: Any) -> None:
    spec = build_output(req)
    result = value_json(spec, f'{{"response": {raw_json}}}')
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(
    "type_name", sorted(BUILTIN_TYPES - {"halt", "respond", "extract", "think", "speak"})
)
def test_optional_single_answers_may_be_null(type_name: str) -> None:
    positional = ("a", "b") if type_name == "pick" else ()
    spec = build_output(TypeRequest(type_name, positional))
    assert value(spec, None) is None
    rejects(build_output(TypeRequest(type_name, positional, required=True)), None)


def test_to_value_replays_a_stored_dict() -> None:
    spec = spec_of("date", quantifier=(0, None))
    assert spec.to_value({"response": ["2024-01-02"]}) == [dt.date(2024, 1, 2)]


def test_near_miss_choices_and_level_labels_are_accepted() -> None:
    pick = spec_of("pick", "red", "green")
    assert value(pick, " Red") == "red"
    score = spec_of("score", "poor", "fair", "good")
    assert value(score, "Good") == 2
    assert value(score, "1") == 1  # digits are always indices
    numeric_levels = spec_of("score", "1", "2", "3")
    assert value(numeric_levels, "2") == 2


# ---------------------------------------------------------------- validation errors


@pytest.mark.parametrize(
    ("req", "bad"),
    [
        (TypeRequest("int", options={"min": 0, "max": 130}), 131),
        (TypeRequest("int", options={"min": 0, "max": 130}), -1),
        (TypeRequest("int"), 2.5),
        (TypeRequest("int"), "many"),
        (TypeRequest("number", options={"max": 1}), 1.01),
        (TypeRequest("pick", ("red", "green")), "purple"),
        (TypeRequest("bool"), "perhaps"),
        (TypeRequest("date"), "01/05/2024"),
        (TypeRequest("date", options={"min": "2024-01-01"}), "2023-12-31"),
        (TypeRequest("date", options={"max": "2024-01-01"}), "2024-01-02"),
        (TypeRequest("datetime", options={"min": "2024-01-01T00:00:00"}), "2023-12-31T23:00:00Z"),
        (TypeRequest("time", options={"min": "09:00", "max": "17:00"}), "18:30"),
        (TypeRequest("duration", options={"max": "PT2H"}), "PT2H1M"),
        (TypeRequest("duration"), "an hour"),
        (TypeRequest("record"), [1, 2]),
        (TypeRequest("score", ("poor", "good")), 2),
        (TypeRequest("score", ("poor", "good")), "excellent"),
        (TypeRequest("score"), 11),
        (TypeRequest("json", required=True), None),
    ],
)
def test_invalid_answers_are_rejected(req: TypeRequest, bad: Any) -> None:
    rejects(build_output(req), bad)


def test_temporal_bound_messages_tell_the_model_what_to_fix() -> None:
    assert "must be 2024-01-01 or later" in rejects(spec_of("date", min="2024-01-01"), "2023-05-05")
    assert "must be at most PT2H" in rejects(spec_of("duration", max="PT2H"), "PT3H")
    aware_bound = spec_of("datetime", min="2024-01-01T00:00:00+02:00")
    assert value(aware_bound, "2024-01-01T00:00:00") == dt.datetime(2024, 1, 1)  # naive = UTC


def test_extra_keys_are_rejected() -> None:
    spec = spec_of("int")
    with pytest.raises(ValidationError):
        spec.output_type.model_validate({"response": 1, "comment": "sure"})


# ---------------------------------------------------------------- quantifiers


@pytest.mark.parametrize(
    ("quantifier", "required", "bounds"),
    [
        ((0, None), False, {}),
        ((1, None), False, {"minItems": 1}),
        ((0, 1), False, {"maxItems": 1}),
        ((3, 3), False, {"minItems": 3, "maxItems": 3}),
        ((2, 5), False, {"minItems": 2, "maxItems": 5}),
        ((0, None), True, {"minItems": 1}),  # ! on a list: at least one item
        ((0, 1), True, {"minItems": 1, "maxItems": 1}),
    ],
)
def test_quantifier_bounds(
    quantifier: tuple[int, int | None], required: bool, bounds: dict[str, int]
) -> None:
    spec = spec_of("date", quantifier=quantifier, required=required)
    assert spec.output_type.__name__ == "DateListAnswer"
    assert not spec.is_text
    assert spec.answer_schema == {
        "type": "array",
        "items": {"type": "string", "format": "date", "description": "ISO 8601 date (YYYY-MM-DD)"},
        **bounds,
    }


def test_quantified_values_and_limits() -> None:
    spec = spec_of("date", quantifier=(1, 2))
    assert value(spec, ["2024-05-01", "2024-06-01"]) == [dt.date(2024, 5, 1), dt.date(2024, 6, 1)]
    assert all(type(item) is dt.date for item in value(spec, ["2024-05-01"]))
    rejects(spec, [])
    rejects(spec, ["2024-05-01"] * 3)
    rejects(spec, [None])  # items are never null
    rejects(spec, None)  # and the list itself is never null


def test_quantified_pick_json_score_and_text() -> None:
    pick = spec_of("pick", "a", "b", quantifier=(0, None))
    assert pick.answer_schema == {
        "type": "array",
        "items": {"enum": ["a", "b"], "type": "string", "description": "One of the given choices"},
    }
    assert value(pick, ["b", "a", "b"]) == ["b", "a", "b"]
    json_list = spec_of("json", quantifier=(0, None))
    assert json_list.answer_schema == {
        "type": "array",
        "items": {**NON_NULL_JSON, "description": "Any JSON value"},
    }
    rejects(json_list, [1, None])
    halts = spec_of("score", "no", "yes", quantifier=(1, None))
    assert value(halts, [0, "yes"]) == [0, 1]
    text = spec_of("extract", quantifier=(1, None), required=True, max_length=10)
    assert text.output_type.__name__ == "ExtractListAnswer"
    assert not text.is_text
    assert text.answer_schema == {
        "type": "array",
        "items": {
            "type": "string",
            "minLength": 1,
            "maxLength": 10,
            "description": "Text copied verbatim from the input",
        },
        "minItems": 1,
    }
    assert value(text, ["a quote"]) == ["a quote"]
    rejects(text, [""])
    rejects(text, ["far too long a quote"])


# ---------------------------------------------------------------- text constraints


def test_text_constraints_in_schema_and_check_text() -> None:
    spec = spec_of("respond", pattern="^[A-Z]+$", min_length=3, max_length=5)
    assert spec.output_type is str
    assert spec.answer_schema == {
        "type": "string",
        "pattern": "^[A-Z]+$",
        "minLength": 3,
        "maxLength": 5,
        "description": "The answer",
    }
    assert spec.check_text("ABCD") == "ABCD"
    with pytest.raises(ValueError, match=r"The answer must match the pattern \^\[A-Z\]\+\$"):
        spec.check_text("abcd")
    with pytest.raises(ValueError, match="must be at least 3 characters"):
        spec.check_text("AB")
    with pytest.raises(ValueError, match="must be at most 5 characters"):
        spec.check_text("ABCDEF")


def test_required_text_must_not_be_empty() -> None:
    spec = spec_of("speak", required=True)
    assert spec.answer_schema == {
        "type": "string",
        "minLength": 1,
        "description": "What to say, in your own words",
    }
    assert spec.check_text(" hi ") == " hi "  # returned unchanged
    for empty in ("", "  \n"):
        with pytest.raises(ValueError, match="The answer must not be empty"):
            spec.check_text(empty)
    assert spec_of("speak").check_text("") == ""


def test_pattern_is_a_search_like_json_schema() -> None:
    spec = spec_of("respond", pattern=r"\d")
    assert spec.check_text("abc 1") == "abc 1"
    listed = spec_of("respond", pattern=r"\d", quantifier=(0, None))
    assert value(listed, ["abc 1"]) == ["abc 1"]
    rejects(listed, ["abc"])
    lookahead = spec_of("respond", pattern=r"^(?=.*\d)", quantifier=(0, None))  # python-re only
    assert value(lookahead, ["a1"]) == ["a1"]


def test_check_text_is_noop_for_structured_specs() -> None:
    assert spec_of("int").check_text("anything") == "anything"


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
    }  # fmt: skip
    text = frozenset({"min_length", "max_length", "pattern"})
    bounds = frozenset({"min", "max"})
    expected = {
        "respond": text, "extract": text, "think": text, "speak": text,
        "pick": frozenset(), "bool": frozenset(), "json": frozenset(), "record": frozenset(),
        "halt": frozenset(), "int": bounds, "number": bounds, "score": bounds, "date": bounds,
        "datetime": bounds, "time": bounds, "duration": bounds,
    }  # fmt: skip
    assert {name: allowed_type_options(name) for name in BUILTIN_TYPES} == expected
    assert {name for name in BUILTIN_TYPES if takes_positional(name)} == {"pick", "score"}
    with pytest.raises(TypeBuildError, match="unknown type"):
        allowed_type_options("nope")
    with pytest.raises(TypeBuildError, match="unknown type"):
        takes_positional("nope")


# ---------------------------------------------------------------- caching


def test_builds_are_cached() -> None:
    first = build_output(TypeRequest("pick", ("a", "b"), {}, (1, None), True))
    again = build_output(TypeRequest("pick", ("a", "b"), {}, (1, None), True))
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


# ---------------------------------------------------------------- custom types


class Address(BaseModel):
    """A postal address."""

    street: str
    city: str


def test_registered_model_type() -> None:
    registry = TypeRegistry()
    registry.register("address", Address, description="Where the person lives")
    assert "address" in registry and "int" in registry and "nope" not in registry
    assert registry.names()[-1] == "address"
    assert allowed_type_options("address", registry) == frozenset()
    assert not takes_positional("address", registry)
    spec = build_output(TypeRequest("address"), registry)
    assert spec.output_type.__name__ == "AddressAnswer"
    assert spec.answer_schema == {
        "anyOf": [{"$ref": "#/$defs/Address"}, NULL],
        "description": "Where the person lives",
        "$defs": {
            "Address": {
                "description": "A postal address.",
                "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
                "required": ["street", "city"],
                "title": "Address",
                "type": "object",
            }
        },
    }
    result = value(spec, {"street": "1 Main St", "city": "Leeds"})
    assert result == Address(street="1 Main St", city="Leeds")
    assert value(spec, None) is None
    many = build_output(TypeRequest("address", quantifier=(1, None)), registry)
    assert value(many, [{"street": "a", "city": "b"}]) == [Address(street="a", city="b")]
    with pytest.raises(TypeBuildError, match="does not accept option"):
        build_output(TypeRequest("address", options={"min": 1}), registry)
    with pytest.raises(TypeBuildError, match="takes no positional"):
        build_output(TypeRequest("address", ("x",)), registry)


def test_registered_factory_type() -> None:
    calls: list[tuple[Mapping[str, Any], Any, bool]] = []

    def even(options: Mapping[str, Any], quantifier: Any, required: bool) -> Any:
        calls.append((dict(options), quantifier, required))
        return Annotated[int, Field(multiple_of=2, ge=options.get("min"), description="An even number")]

    registry = TypeRegistry()
    registry.register("even", even, options=["min"])
    assert allowed_type_options("even", registry) == frozenset({"min"})
    spec = build_output(TypeRequest("even", options={"min": 4}, quantifier=(0, 3), required=True), registry)
    assert calls == [({"min": 4}, (0, 3), True)]
    assert spec.answer_schema == {
        "type": "array",
        "items": {"type": "integer", "multipleOf": 2, "minimum": 4, "description": "An even number"},
        "minItems": 1,
        "maxItems": 3,
    }
    assert value(spec, [4, 8]) == [4, 8]
    rejects(spec, [5])
    rejects(spec, [2])
    with pytest.raises(TypeBuildError, match="does not accept option"):
        build_output(TypeRequest("even", options={"pattern": "x"}), registry)


def test_factory_failures_become_type_build_errors() -> None:
    def broken(options: Mapping[str, Any], quantifier: Any, required: bool) -> Any:
        raise RuntimeError("no can do")

    def not_a_type(options: Mapping[str, Any], quantifier: Any, required: bool) -> Any:
        return object()

    registry = TypeRegistry()
    registry.register("broken", broken)
    registry.register("weird", not_a_type)
    with pytest.raises(TypeBuildError, match="broken: type factory failed: no can do"):
        build_output(TypeRequest("broken"), registry)
    with pytest.raises(TypeBuildError, match="weird: cannot build an output model"):
        build_output(TypeRequest("weird"), registry)


@pytest.mark.parametrize("name", ["int", "pick", "2fast", "has space", "", "class", None])
def test_register_rejects_bad_names(name: Any) -> None:
    with pytest.raises(ValueError):
        TypeRegistry().register(name, Address)


def test_register_rejects_non_types() -> None:
    with pytest.raises(ValueError, match="expected a pydantic model class or a factory"):
        TypeRegistry().register("thing", 42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown type options"):
        TypeRegistry().register("thing", lambda o, q, r: int, options=["colour"])


def test_register_type_and_unregister_on_default_registry() -> None:
    register_type("zz_test_address", Address)
    try:
        assert "zz_test_address" in default_registry
        spec = build_output(TypeRequest("zz_test_address", required=True))
        assert value(spec, {"street": "s", "city": "c"}) == Address(street="s", city="c")
    finally:
        default_registry.unregister("zz_test_address")
    assert "zz_test_address" not in default_registry


def test_preset_of_text_streams_as_text() -> None:
    registry = TypeRegistry()
    registry.register_preset("headline", "respond", options={"max_length": 5}, description="A headline")
    spec = build_output(TypeRequest("headline"), registry)
    assert spec.is_text and spec.output_type is str
    assert spec.answer_schema == {"type": "string", "maxLength": 5, "description": "A headline. The answer"}
    with pytest.raises(ValueError, match="at most 5"):
        spec.check_text("too long")
    overridden = build_output(TypeRequest("headline", options={"max_length": 50}), registry)
    assert overridden.answer_schema["maxLength"] == 50


# ---------------------------------------------------------------- YAML type files

TYPE_FILE = """\
sentiment:
  base: pick
  choices: [positive, negative, neutral]
  description: Overall sentiment of the text
percentage:
  base: number
  options: {min: 0, max: 100}
quality:
  base: score
  levels: [poor, fair, good]
person:
  description: A person mentioned in the text
  fields:
    name: {type: str, description: Full name, required: true}
    age: {type: int, min: 0, max: 130}
    role: {choices: [author, reviewer]}
    born: date
    tags: {type: list, items: str, max_items: 2}
"""


def test_yaml_type_file(tmp_path: Any) -> None:
    path = tmp_path / "types.yaml"
    path.write_text(TYPE_FILE)
    registry = TypeRegistry()
    assert registry.load_yaml(path) == ["sentiment", "percentage", "quality", "person"]
    assert registry.names()[-4:] == ["sentiment", "percentage", "quality", "person"]

    sentiment = build_output(TypeRequest("sentiment", required=True), registry)
    assert sentiment.output_type.__name__ == "SentimentAnswer"
    assert sentiment.answer_schema == {
        "enum": ["positive", "negative", "neutral"],
        "type": "string",
        "description": "Overall sentiment of the text. One of the given choices",
    }
    assert value(sentiment, "neutral") == "neutral"
    assert not takes_positional("sentiment", registry)
    assert allowed_type_options("sentiment", registry) == frozenset()

    percentage = build_output(TypeRequest("percentage", required=True), registry)
    assert percentage.answer_schema == {
        "type": "number",
        "minimum": 0,
        "maximum": 100,
        "description": "Number",
    }
    rejects(percentage, 101)
    narrower = build_output(TypeRequest("percentage", options={"max": 50}, required=True), registry)
    assert narrower.answer_schema["maximum"] == 50

    quality = build_output(TypeRequest("quality"), registry)
    assert quality.answer_schema["description"] == "0=poor, 1=fair, 2=good"
    assert value(quality, "fair") == 1

    person = build_output(TypeRequest("person"), registry)
    schema = person.answer_schema
    assert schema["anyOf"] == [{"$ref": "#/$defs/Person"}, NULL]
    assert schema["$defs"]["Person"] == {
        "additionalProperties": False,
        "description": "A person mentioned in the text",
        "properties": {
            "name": {"description": "Full name", "minLength": 1, "type": "string"},
            "age": {"anyOf": [{"maximum": 130, "minimum": 0, "type": "integer"}, NULL], "default": None},
            "role": {"anyOf": [{"enum": ["author", "reviewer"], "type": "string"}, NULL], "default": None},
            "born": {
                "anyOf": [{"format": "date", "type": "string"}, NULL],
                "default": None,
                "description": "ISO 8601 date (YYYY-MM-DD)",
            },
            "tags": {
                "anyOf": [{"items": {"type": "string"}, "maxItems": 2, "type": "array"}, NULL],
                "default": None,
            },
        },
        "required": ["name"],
        "title": "Person",
        "type": "object",
    }
    result = value_json(person, '{"response": {"name": "Ann", "age": 40, "born": "1984-02-03"}}')
    assert type(result).__name__ == "Person"
    assert (result.name, result.age, result.born, result.role) == ("Ann", 40, dt.date(1984, 2, 3), None)
    rejects(person, {"name": "Ann", "age": 200})
    rejects(person, {"name": ""})
    rejects(person, {"name": "Ann", "tags": ["a", "b", "c"]})


def test_load_type_file_on_default_registry(tmp_path: Any) -> None:
    path = tmp_path / "one.yaml"
    path.write_text("zz_test_mood:\n  base: pick\n  choices: [happy, sad]\n")
    try:
        assert load_type_file(path) == ["zz_test_mood"]
        assert value(build_output(TypeRequest("zz_test_mood")), "sad") == "sad"
    finally:
        default_registry.unregister("zz_test_mood")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "good: {base: pick, choices: [a]}\nbad: {base: nosuch}\n",
            "type 'bad': base must be a builtin type",
        ),
        ("bad: {base: int, choices: [a]}\n", "type 'bad': base type 'int' takes no choices"),
        ("bad: {base: int, options: {pattern: x}}\n", "does not accept option(s) pattern"),
        ("bad: {base: int, options: {min: 3, max: 1}}\n", "min=3 is greater than max=1"),
        ("bad: {base: int, colour: red}\n", "unknown key(s) colour"),
        ("bad: {fields: {x: {type: widget}}}\n", "type 'bad': field 'x': unknown field type 'widget'"),
        ("bad: {fields: {x: {type: int, pattern: a}}}\n", "do not apply to a int field"),
        ("bad: {fields: {x: {type: int, choices: [a]}}}\n", "only applies to str fields"),
        ("bad: {fields: {_x: str}}\n", "field name must be an identifier"),
        ("bad: {fields: {}}\n", "non-empty mapping"),
        ("bad: {base: pick, fields: {x: str}}\n", "not both"),
        ("bad: just a string\n", "must be a mapping"),
        ("int: {base: pick, choices: [a]}\n", "builtin type and cannot be redefined"),
        ("- a list\n", "must map type names"),
        ("bad: [unclosed\n", "invalid YAML"),
    ],
)
def test_yaml_errors_name_file_and_type(tmp_path: Any, text: str, message: str) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(text)
    registry = TypeRegistry()
    with pytest.raises(TypeBuildError) as info:
        registry.load_yaml(path)
    assert str(info.value).startswith(str(path))
    assert message in str(info.value)
    assert "good" not in registry  # all or nothing


def test_yaml_missing_file(tmp_path: Any) -> None:
    with pytest.raises(TypeBuildError, match="cannot read type file"):
        TypeRegistry().load_yaml(tmp_path / "missing.yaml")


# ---------------------------------------------------------------- end to end with pydantic-ai


def test_pydantic_ai_output_tool_round_trip() -> None:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    spec = spec_of("date", required=True)
    expected = {
        "type": "object",
        "title": "DateAnswer",
        "properties": {
            "response": {"type": "string", "format": "date", "description": "ISO 8601 date (YYYY-MM-DD)"}
        },
        "required": ["response"],
        "additionalProperties": False,
    }
    assert expected["properties"] == {"response": spec.answer_schema}

    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        tool = info.output_tools[0]
        assert tool.parameters_json_schema == expected
        return ModelResponse(parts=[ToolCallPart(tool.name, {"response": "2024-05-01"})])

    result = Agent(FunctionModel(fn), output_type=spec.output_type).run_sync("When?")
    answer = spec.to_value(result.output)
    assert answer == dt.date(2024, 5, 1)
    assert type(answer) is dt.date


def test_pydantic_ai_retries_invalid_answers() -> None:
    from pydantic_ai import Agent
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        RetryPromptPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def is_retry(part: Any) -> bool:
        # pydantic-ai 2.x reports a failed output validation as a ToolReturnPart with
        # outcome='retried' (RetryPromptPart is deprecated); older versions used RetryPromptPart.
        if isinstance(part, RetryPromptPart):
            return True
        return isinstance(part, ToolReturnPart) and getattr(part, "outcome", None) == "retried"

    spec = spec_of("int", min=0, max=130, required=True)
    seen: list[list[ModelMessage]] = []

    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        age = 200 if len(seen) == 1 else 42
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"response": age})])

    result = Agent(FunctionModel(fn), output_type=spec.output_type).run_sync("How old?")
    assert spec.to_value(result.output) == 42
    assert len(seen) == 2
    retries = [
        part
        for message in seen[1]
        if isinstance(message, ModelRequest)
        for part in message.parts
        if is_retry(part)
    ]
    assert retries and "less than or equal to 130" in str(retries[0].content)


# ---------------------------------------------------------------- properties


@settings(max_examples=50, deadline=None)
@given(st.integers(-1000, 1000), st.integers(0, 1000), st.integers(-3000, 3000))
def test_int_bounds_property(low: int, span: int, candidate: int) -> None:
    spec = spec_of("int", min=low, max=low + span, required=True)
    if low <= candidate <= low + span:
        assert value(spec, candidate) == candidate
    else:
        rejects(spec, candidate)


@settings(max_examples=100, deadline=None)
@given(st.timedeltas(min_value=dt.timedelta(days=-999), max_value=dt.timedelta(days=999)))
def test_iso_duration_round_trips_through_pydantic(delta: dt.timedelta) -> None:
    spec = spec_of("duration", required=True)
    assert value(spec, iso_duration(delta)) == delta
