"""The builtin types: the schemas sent to the model, the values returned, the
answers rejected, list quantifiers and text constraints."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from struckdown.types import BUILTIN_TYPES, TypeRequest, build_output
from struckdown.codec import iso_duration
from struckdown.types.spec import TextRules
from types_support import NON_NULL_JSON, nullable, rejects, spec_of, value, value_json

#: issue 40 item 20: a pattern whose offset is optional, never `format: time|date-time`
CLOCK = r"([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\.[0-9]{1,6})?)?(Z|[+-]([01][0-9]|2[0-3]):?[0-5][0-9])?"
TIME_PATTERN = f"^{CLOCK}$"
LIST_ANY = ("A JSON array of any number of items: each item is one separate element of the list, "
            "different from the others; never the whole list in one item, never a number or placeholder")
DATETIME_PATTERN = f"^[1-9][0-9]{{3}}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])[T ]{CLOCK}$"


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
            {"type": "string", "pattern": DATETIME_PATTERN},
            "ISO 8601 date and time (YYYY-MM-DDTHH:MM:SS, optional UTC offset)",
        ),
    ),
    (
        TypeRequest("time"),
        "TimeAnswer",
        nullable({"type": "string", "pattern": TIME_PATTERN}, "ISO 8601 time (HH:MM:SS)"),
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
    # a score asks for its reasoning first: the model writes it before the number
    first = ["reasoning"] if req.type_name == "score" else []
    assert list(spec.output_type.model_fields) == [*first, "response"]
    assert list(spec.output_type.model_json_schema()["properties"]) == [*first, "response"]
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
                    "reason": {"description": "Short explanation of the verdict, written before it", "type": "string"},
                    "triggered": {
                        "description": "True if the guard condition is met and processing must stop",
                        "type": "boolean",
                    },
                },
                "required": ["reason", "triggered"],
                "title": "HaltVerdict",
                "type": "object",
            }
        },
    }
    # reason before verdict, so a model reasons before it commits
    assert list(spec.answer_schema["$defs"]["HaltVerdict"]["properties"]) == ["reason", "triggered"]
    result = value(spec, {"triggered": True, "reason": "asks for a password"})
    assert result == {"triggered": True, "reason": "asks for a password"}
    assert isinstance(result, dict) and list(result) == ["triggered", "reason"]  # a plain dict, no other fields
    assert result.triggered is True and result.reason == "asks for a password"  # read as attributes too (0.x)
    rejects(spec, None)  # a verdict is never null, even without !
    rejects(spec, {"triggered": False})
    assert spec_of("halt", required=True).answer_schema == spec.answer_schema


def test_score_reasoning_comes_first_and_is_dropped_from_the_answer() -> None:
    spec = spec_of("score", "poor", "good", required=True)
    assert spec.to_value(spec.output_type.model_validate_json('{"reasoning": "clear and kind", "response": "good"}')) == 1
    assert value_json(spec, '{"response": 0}') == 0  # reasoning is asked for, not demanded
    listed = spec_of("score", quantifier=(1, 3))
    assert list(listed.output_type.model_fields) == ["response"]  # a list answer has no single reasoning


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
        (TypeRequest("number"), "3", 3),  # an integral number stays an int, as in 0.18 (issue 32)
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
    # text is never null; 0.x's decide, date_rule and chunked_conversation were always answered
    "type_name",
    sorted(BUILTIN_TYPES - {"halt", "respond", "extract", "think", "speak", "default", "poem"}
           - {"decide", "date_rule", "chunked_conversation"}),
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
        ((0, None), False, {"count": "any number of items"}),
        ((1, None), False, {"minItems": 1, "count": "at least 1 item"}),
        ((0, 1), False, {"maxItems": 1, "count": "at most 1 item"}),
        ((3, 3), False, {"minItems": 3, "maxItems": 3, "count": "exactly 3 items"}),
        ((2, 5), False, {"minItems": 2, "maxItems": 5, "count": "2 to 5 items"}),
        ((0, None), True, {"minItems": 1, "count": "at least 1 item"}),  # ! on a list: at least one item
        ((0, 1), True, {"minItems": 1, "maxItems": 1, "count": "exactly 1 item"}),
    ],
)
def test_quantifier_bounds(
    quantifier: tuple[int, int | None], required: bool, bounds: dict[str, int]
) -> None:
    spec = spec_of("date", quantifier=quantifier, required=required)
    assert spec.output_type.__name__ == "DateListAnswer"
    assert not spec.is_text
    count = bounds.pop("count")
    assert spec.answer_schema == {
        "type": "array",
        "items": {"type": "string", "format": "date", "description": "ISO 8601 date (YYYY-MM-DD)"},
        # issue 40 item 23: one element per item, said in the schema a small model reads
        "description": f"A JSON array of {count}: each item is one separate element of the list, "
        "different from the others; never the whole list in one item, never a number or placeholder",
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
        "description": LIST_ANY,
    }
    assert value(pick, ["b", "a", "b"]) == ["b", "a", "b"]
    json_list = spec_of("json", quantifier=(0, None))
    assert json_list.answer_schema == {
        "type": "array",
        "items": {**NON_NULL_JSON, "description": "Any JSON value"},
        "description": LIST_ANY,
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
        "description": LIST_ANY.replace("any number of items", "at least 1 item"),
    }
    assert value(text, ["a quote"]) == ["a quote"]
    rejects(text, [""])
    rejects(text, ["far too long a quote"])
    # issue 40 item 23: a free-text list's items are elements, not "The answer" each (a small
    # model put the whole answer into the first item); types with their own description keep it
    for name in ("respond", "default"):
        ideas = spec_of(name, quantifier=(3, 3))
        assert ideas.answer_schema == {
            "type": "array",
            "items": {"type": "string", "description": "One element of the list: a single short item, not the whole list"},
            "minItems": 3,
            "maxItems": 3,
            "description": LIST_ANY.replace("any number of items", "exactly 3 items"),
        }
    assert spec_of("respond").answer_schema == {"type": "string", "description": "The answer"}


# ---------------------------------------------------------------- text constraints


def test_text_constraints_in_schema_and_check_text() -> None:
    # a pattern or lengths make text a structured answer, so the schema sent states them (SPEC §11)
    spec = spec_of("respond", pattern="^[A-Z]+$", min_length=3, max_length=5)
    assert not spec.is_text
    assert spec.answer_schema == {
        "type": "string",
        "pattern": "^[A-Z]+$",
        "minLength": 3,
        "maxLength": 5,
        "description": "The answer",
    }
    assert value(spec, "ABCD") == "ABCD"
    for bad in ("abcd", "AB", "ABCDEF", None):
        rejects(spec, bad)
    rules = TextRules(pattern="^[A-Z]+$", min_length=3, max_length=5)  # the check free text still gets
    assert rules.check("ABCD") == "ABCD"
    with pytest.raises(ValueError, match=r"The answer must match the pattern \^\[A-Z\]\+\$"):
        rules.check("abcd")
    with pytest.raises(ValueError, match="must be at least 3 characters"):
        rules.check("AB")
    with pytest.raises(ValueError, match="must be at most 5 characters"):
        rules.check("ABCDEF")


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
    assert value(spec, "abc 1") == "abc 1"
    rejects(spec, "abc")
    listed = spec_of("respond", pattern=r"\d", quantifier=(0, None))
    assert value(listed, ["abc 1"]) == ["abc 1"]
    rejects(listed, ["abc"])
    lookahead = spec_of("respond", pattern=r"^(?=.*\d)", quantifier=(0, None))  # python-re only
    assert value(lookahead, ["a1"]) == ["a1"]


def test_check_text_is_noop_for_structured_specs() -> None:
    assert spec_of("int").check_text("anything") == "anything"


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


def test_time_and_datetime_patterns_take_naive_values_and_offsets_alike() -> None:
    """Issue 40 item 20: what the schema lets a constrained decoder write is what the type
    takes: a naive time stays naive."""
    import re

    for text in ("15:30", "15:30:00", "15:30:00.25", "15:30:00Z", "15:30:00+02:00", "09:05-0130"):
        assert re.fullmatch(TIME_PATTERN, text), text
    for text in ("3:30 PM", "25:00", "15:3"):
        assert not re.fullmatch(TIME_PATTERN, text), text
    for text in ("2024-05-01T15:30", "2024-05-01 15:30:00", "2024-05-01T15:30:00+00:00"):
        assert re.fullmatch(DATETIME_PATTERN, text), text
    time_spec = build_output(TypeRequest("time", required=True))
    assert value(time_spec, "15:30") == dt.time(15, 30)  # no offset added
    assert value(time_spec, "15:30:00Z").tzinfo is not None
    when = value(build_output(TypeRequest("datetime", required=True)), "2024-05-01T15:30")
    assert when == dt.datetime(2024, 5, 1, 15, 30) and when.tzinfo is None
    bounded = build_output(TypeRequest("time", options={"min": "09:00"}, required=True))
    assert bounded.output_type.model_json_schema()["properties"]["response"]["pattern"] == TIME_PATTERN
