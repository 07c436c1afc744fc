"""Custom types: registered from Python (pydantic models, factories, presets, the
default registry) or defined in YAML type files (what they build, and errors that
name the file and the type)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field

import struckdown as sd

from struckdown.types import (
    TypeBuildError,
    TypeRegistry,
    TypeRequest,
    allowed_type_options,
    build_output,
    takes_positional,
)
from types_support import NULL, rejects, value, value_json


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
        "description": "A JSON array of 1 to 3 items: each item is one separate element of the list, "
        "different from the others; never the whole list in one item, never a number or placeholder",
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


def test_register_type_and_unregister_on_the_default_environment() -> None:
    registry = sd.default_environment().types
    sd.register_type("zz_test_address", Address)
    try:
        assert "zz_test_address" in registry
        spec = build_output(TypeRequest("zz_test_address", required=True), registry)
        assert value(spec, {"street": "s", "city": "c"}) == Address(street="s", city="c")
    finally:
        registry.unregister("zz_test_address")
    assert "zz_test_address" not in registry


def test_preset_of_text_is_text_with_its_options() -> None:
    registry = TypeRegistry()
    registry.register_preset("note", "respond", description="A note")
    assert build_output(TypeRequest("note"), registry).is_text  # streams as text
    registry.register_preset("headline", "respond", options={"max_length": 5}, description="A headline")
    spec = build_output(TypeRequest("headline"), registry)
    assert not spec.is_text  # a length is stated in the schema sent: a structured answer (SPEC §11)
    assert spec.answer_schema == {"type": "string", "maxLength": 5, "description": "A headline. The answer"}
    with pytest.raises(ValueError, match="at most 5"):
        spec.to_value({"response": "too long"})
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


def test_load_type_file_on_the_default_environment(tmp_path: Any) -> None:
    path = tmp_path / "one.yaml"
    path.write_text("zz_test_mood:\n  base: pick\n  choices: [happy, sad]\n")
    registry = sd.default_environment().types
    try:
        assert sd.load_type_file(path) == ["zz_test_mood"]
        assert value(build_output(TypeRequest("zz_test_mood"), registry), "sad") == "sad"
    finally:
        registry.unregister("zz_test_mood")


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
