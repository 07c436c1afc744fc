"""Each type through complete(): the schema the model sees and the Python value back."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

import struckdown as sd
from struckdown.types.values import Verdict
from scripted import Call, Script


def run(template: str, answer: Any) -> tuple[sd.Result, Script]:
    script = Script(answer if callable(answer) else (lambda call: answer))
    return sd.complete(template, model=script.model()), script


def response_schema(call: Call) -> dict[str, Any]:
    assert call.schema is not None
    assert call.schema["required"] == ["response"] and call.schema["additionalProperties"] is False
    return call.schema["properties"]["response"]


def nullable(inner: dict[str, Any], description: str) -> dict[str, Any]:
    return {"anyOf": [inner, {"type": "null"}], "description": description}


@pytest.mark.parametrize(
    ("slot", "answer", "value", "schema"),
    [
        ("[[pick:x|red, green]]", "green", "green",
         nullable({"enum": ["red", "green"], "type": "string"}, "One of the given choices")),
        ("[[bool:x]]", False, False, nullable({"type": "boolean"}, "true or false")),
        ("[[int:x|min=1, max=9]]", 7, 7,
         nullable({"maximum": 9, "minimum": 1, "type": "integer"}, "Whole number")),
        ("[[number:x]]", 2.5, 2.5, nullable({"type": "number"}, "Number")),
        ("[[date:x]]", "2025-03-03", dt.date(2025, 3, 3),
         nullable({"format": "date", "type": "string"}, "ISO 8601 date (YYYY-MM-DD)")),
        ("[[datetime:x]]", "2025-03-03T10:00:00Z", dt.datetime(2025, 3, 3, 10, tzinfo=dt.timezone.utc), None),
        ("[[time:x]]", "10:30:00", dt.time(10, 30), None),
        ("[[duration:x]]", "PT1H30M", dt.timedelta(hours=1, minutes=30), None),
        ("[[json:x]]", [1, {"a": None}], [1, {"a": None}], {"description": "Any JSON value"}),
        ("[[record:x]]", {"a": 1}, {"a": 1}, nullable({"type": "object"}, "A JSON object")),
        ("[[score:x|poor, fair, good]]", 2, 2,
         nullable({"maximum": 2, "minimum": 0, "type": "integer"}, "0=poor, 1=fair, 2=good")),
        ("[[halt:x]]", {"triggered": False, "reason": "ok"}, Verdict(triggered=False, reason="ok"), None),
    ],
)
def test_type_value_and_schema(slot: str, answer: Any, value: Any, schema: dict[str, Any] | None) -> None:
    result, script = run(f"Q {slot}", answer)
    assert result["x"] == value and type(result["x"]) is type(value)
    if schema is not None:
        assert response_schema(script.calls[0]) == schema


def test_free_text_is_plain_text_output() -> None:
    result, script = run("Q [[x]]", "hello")
    assert result["x"] == "hello"
    assert script.calls[0].schema is None and script.calls[0].info.allow_text_output


def test_optional_answers_may_be_null_and_required_ones_may_not() -> None:
    result, _ = run("Q [[int:x]]", None)
    assert result["x"] is None
    answers = iter([None, 4])
    result, script = run("Q [[!int:x]]", lambda c: next(answers))
    assert result["x"] == 4 and len(script.calls) == 2
    assert response_schema(script.calls[0]) == {"type": "integer", "description": "Whole number"}


def test_required_option_is_the_same_as_bang() -> None:
    _, script = run("Q [[bool:x|required=true]]", True)
    assert response_schema(script.calls[0]) == {"type": "boolean", "description": "true or false"}


@pytest.mark.parametrize(
    ("quant", "lo", "hi"),
    [("*", None, None), ("+", 1, None), ("?", None, 1), ("{3}", 3, 3), ("{2,}", 2, None), ("{1,4}", 1, 4)],
)
def test_quantifiers_become_min_and_max_items(quant: str, lo: int | None, hi: int | None) -> None:
    items = [1] * (lo or 1)
    result, script = run(f"Q [[int{quant}:x]]", items)
    assert result["x"] == items
    schema = response_schema(script.calls[0])
    assert schema["type"] == "array" and schema["items"]["type"] == "integer"
    assert schema.get("minItems") == lo and schema.get("maxItems") == hi


def test_free_text_quantifier_on_the_name() -> None:
    result, script = run("Three ideas [[ideas{3}]]", ["a", "b", "c"])
    assert result["ideas"] == ["a", "b", "c"]
    assert response_schema(script.calls[0])["minItems"] == 3


def test_a_validation_failure_is_fed_back_and_asked_again() -> None:
    answers = iter([42, 7])
    result, script = run("Q [[int:x|min=1, max=9]]", lambda c: next(answers))
    assert result["x"] == 7
    assert len(script.calls) == 2
    feedback = " ".join(text for role, text in script.calls[1].turns if role in ("retry", "return"))
    assert "less than or equal to 9" in feedback


def test_text_pattern_is_checked_and_retried() -> None:
    answers = iter(["abc", "ABC"])
    result, script = run('Code [[code|pattern="^[A-Z]+$"]]', lambda c: next(answers))
    assert result["code"] == "ABC"
    assert len(script.calls) == 2


def test_output_values_carry_no_internal_fields() -> None:
    result, _ = run("Q [[record:x]]", {"a": 1})
    assert result.to_dict() == {"x": {"a": 1}}
    slot = result.results["x"]
    assert slot.output == {"a": 1}


def test_custom_type_from_a_pydantic_model() -> None:
    from pydantic import BaseModel

    class Person(BaseModel):
        name: str
        age: int

    sd.register_type("person_e2e", Person)
    result, script = run("Who [[person_e2e:p]]", {"name": "Ada", "age": 36})
    assert result["p"] == Person(name="Ada", age=36)
