"""Item types of the builtin slot types.

Each builtin turns (positional, options, required, quantifier) into an
:class:`ItemPlan`: the pydantic type of ONE answer item with its constraints,
the description the model sees, and how to turn a validated item into the
plain Python value. Wrapping items into lists, nullability and the one-field
output model is done once, uniformly, in :mod:`.build`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    JsonValue,
    StringConstraints,
    WithJsonSchema,
)

from ..codec import iso_duration
from .legacy import ALIASES
from .legacy_plans import ConversationChunk, DateRule, dump_chunks, dump_rule
from .options import (
    check_bounds_order,
    comparable,
    parse_length,
    parse_number,
    parse_pattern,
    parse_temporal,
)
from .spec import TEMPORAL_PATTERNS, TextRules, TypeBuildError
from .table import BUILTIN_OPTIONS, BUILTIN_TYPES, POSITIONAL_TYPES, TEXT_TYPES, TYPES
from .values import Verdict

__all__ = [
    "ANSWER_MODEL_CONFIG",
    "answer_model",
    "BACKTRACKING_ANSWER_CONFIG",
    "BUILTIN_OPTIONS",
    "BUILTIN_TYPES",
    "POSITIONAL_TYPES",
    "TEXT_TYPES",
    "HaltVerdict",
    "ItemPlan",
    "plan_builtin",
]

#: ``extra="forbid"`` puts ``additionalProperties: false`` in the schema (what strict
#: tool-calling modes want); the Python ``re`` engine makes ``pattern`` behave exactly
#: like ``TextRules.check`` and accept any regex that ``re`` compiles.
# Patterns run on pydantic-core's Rust engine: linear time, so no answer can make a
# `pattern=` backtrack for seconds (issue 24). A pattern that needs look-around or
# backreferences gets Python's `re` (`spec.is_linear` tells which).
ANSWER_MODEL_CONFIG = ConfigDict(extra="forbid", regex_engine="rust-regex")
BACKTRACKING_ANSWER_CONFIG = ConfigDict(extra="forbid", regex_engine="python-re")


def answer_model(model_name: str, /, **definitions: Any) -> type[BaseModel]:
    """`create_model` with the answer config: the linear-time regex engine when every
    pattern fits it, else Python's `re` (look-around, backreferences)."""
    from pydantic import create_model
    from pydantic_core import SchemaError

    try:
        return create_model(model_name, __config__=ANSWER_MODEL_CONFIG, **definitions)
    except SchemaError:
        return create_model(model_name, __config__=BACKTRACKING_ANSWER_CONFIG, **definitions)


class _NamedAnswer(BaseModel):
    """0.x's YAML answers: `str()` names the class, as `repr()` does."""

    model_config = ANSWER_MODEL_CONFIG

    def __str__(self) -> str:
        return repr(self)


class _NamedBacktrackingAnswer(_NamedAnswer):
    model_config = BACKTRACKING_ANSWER_CONFIG


def legacy_answer_model(model_name: str, /, **definitions: Any) -> type[BaseModel]:
    """`answer_model` for a 0.x YAML type: the same, and `str()` of an answer names its class."""
    from pydantic import create_model
    from pydantic_core import SchemaError

    try:
        return create_model(model_name, __base__=_NamedAnswer, **definitions)
    except SchemaError:
        return create_model(model_name, __base__=_NamedBacktrackingAnswer, **definitions)


_TEMPORAL_KINDS: dict[str, type] = {
    "date": dt.date,
    "datetime": dt.datetime,
    "time": dt.time,
    "duration": dt.timedelta,
}


_TEXT_DESCRIPTIONS = {name: TYPES[name].description for name in TEXT_TYPES}
_TEMPORAL_DESCRIPTIONS = {name: TYPES[name].description for name in _TEMPORAL_KINDS}
_TEMPORAL_SCHEMAS: dict[str, dict[str, Any]] = {
    name: {"type": "string", "pattern": pattern} for name, pattern in TEMPORAL_PATTERNS.items()
}
#: ``required`` json must not be null; the schema says so explicitly rather than ``{}``.
_NON_NULL_JSON_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "object"},
        {"type": "array"},
        {"type": "string"},
        {"type": "number"},
        {"type": "boolean"},
    ]
}


def _identity(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class ItemPlan:
    """One answer item: its pydantic type, description and value conversion.

    ``schema`` is set when ``item`` carries a fixed JSON schema (``WithJsonSchema``),
    because pydantic then ignores a ``Field(description=...)`` on list items; the
    builder merges the description into it instead. ``null_item`` replaces
    ``item | None`` for types whose schema already admits null (json).
    """

    item: Any
    description: str | None
    convert: Callable[[Any], Any] = _identity
    nullable: bool = True
    null_item: Any = None
    schema: dict[str, Any] | None = None
    text: TextRules | None = None
    allows_quantifier: bool = True
    #: Ask for a short ``reasoning`` before the answer (a single answer only):
    #: a model writes properties in schema order, so it reasons before the number.
    reasoning_first: bool = False


# A guard must always explain itself so that a stop can be logged and shown to
# the user; hence ``reason`` is mandatory. The docstring is sent to the model.
class HaltVerdict(BaseModel):
    """Verdict of a guard check."""

    model_config = ANSWER_MODEL_CONFIG

    # The reason comes first: a model writes properties in schema order, so it
    # reasons before it commits to a verdict.
    reason: str = Field(description="Short explanation of the verdict, written before it")
    triggered: bool = Field(description="True if the guard condition is met and processing must stop")


def _dump_verdict(value: HaltVerdict) -> dict[str, Any]:
    return Verdict(triggered=value.triggered, reason=value.reason)


def _choices(type_name: str, positional: tuple[str, ...], *, what: str) -> tuple[str, ...]:
    for choice in positional:
        if not isinstance(choice, str):
            raise TypeBuildError(f"{type_name}: {what} must be strings, not {choice!r}")
        if not choice.strip():
            raise TypeBuildError(f"{type_name}: {what} must not be empty")
    return positional


def _matcher(choices: tuple[str, ...], index: bool) -> Callable[[Any], Any]:
    """Accept near-misses ('Red ' for 'red') so a trivial slip costs no retry round-trip.

    With ``index`` (score levels) a level's label maps to its index; strings of
    digits are left alone so that numbers always mean indices, even for levels
    that are themselves named by numbers.
    """
    folded: dict[str, int] = {}
    for position, choice in enumerate(choices):
        folded.setdefault(choice.strip().casefold(), position)

    def match(value: Any) -> Any:
        if isinstance(value, str) and (index or value not in choices):
            if index and value.strip().lstrip("-").isdigit():
                return value
            position = folded.get(value.strip().casefold())
            if position is not None:
                return position if index else choices[position]
        return value

    return match


def _text_plan(type_name: str, options: Mapping[str, Any], required: bool) -> ItemPlan:
    pattern = parse_pattern(type_name, options["pattern"]) if "pattern" in options else None
    low = parse_length(type_name, "min_length", options["min_length"]) if "min_length" in options else None
    high = parse_length(type_name, "max_length", options["max_length"]) if "max_length" in options else None
    check_bounds_order(type_name, "min_length", low, "max_length", high)
    if required and (low is None or low < 1):
        if high == 0:
            raise TypeBuildError(f"{type_name}: a required answer cannot have max_length=0")
        schema_low: int | None = 1
    else:
        schema_low = low
    item: Any = str
    if pattern is not None or schema_low is not None or high is not None:
        item = Annotated[str, StringConstraints(pattern=pattern, min_length=schema_low, max_length=high)]
    rules = TextRules(pattern=pattern, min_length=low, max_length=high, required=required)
    has_rules = required or pattern is not None or low is not None or high is not None
    return ItemPlan(item=item, description=_TEXT_DESCRIPTIONS[type_name], text=rules if has_rules else None)


def _numeric_plan(type_name: str, options: Mapping[str, Any], integer: bool) -> ItemPlan:
    low = parse_number(type_name, "min", options["min"], integer=integer) if "min" in options else None
    high = parse_number(type_name, "max", options["max"], integer=integer) if "max" in options else None
    check_bounds_order(type_name, "min", low, "max", high)
    if integer:
        return ItemPlan(item=Annotated[int, Field(ge=low, le=high)], description="Whole number")
    number = Annotated[float, Field(ge=low, le=high, allow_inf_nan=False), AfterValidator(_integral)]
    return ItemPlan(item=number, description="Number")


def _integral(value: float) -> int | float:
    """`number` keeps an integral answer an int (3, not 3.0), as 0.18 did."""
    return int(value) if float(value).is_integer() and abs(value) < 2**53 else value


def _temporal_plan(type_name: str, options: Mapping[str, Any]) -> ItemPlan:
    kind = _TEMPORAL_KINDS[type_name]
    low = parse_temporal(type_name, "min", options["min"], kind) if "min" in options else None
    high = parse_temporal(type_name, "max", options["max"], kind) if "max" in options else None
    check_bounds_order(type_name, "min", low, "max", high)
    description = _TEMPORAL_DESCRIPTIONS[type_name]
    schema = _TEMPORAL_SCHEMAS.get(type_name)
    if low is None and high is None:
        if schema is not None:
            return ItemPlan(item=Annotated[kind, WithJsonSchema(schema)], description=description, schema=schema)
        return ItemPlan(item=kind, description=description)
    show = iso_duration if kind is dt.timedelta else (lambda value: value.isoformat())
    limits = [f"minimum {show(low)}"] if low is not None else []
    limits += [f"maximum {show(high)}"] if high is not None else []

    # Durations are amounts ("at least"), the others are points in time ("or later").
    too_low = "must be at least {}" if kind is dt.timedelta else "must be {} or later"
    too_high = "must be at most {}" if kind is dt.timedelta else "must be {} or earlier"

    def within(value: Any) -> Any:
        # Compared via `comparable` so naive and aware datetimes never crash validation.
        if low is not None and comparable(value) < comparable(low):
            raise ValueError(too_low.format(show(low)))
        if high is not None and comparable(value) > comparable(high):
            raise ValueError(too_high.format(show(high)))
        return value

    described = f"{description}, {', '.join(limits)}"
    if schema is not None:
        return ItemPlan(item=Annotated[kind, AfterValidator(within), WithJsonSchema(schema)], description=described,
                        schema=schema)  # fmt: skip
    return ItemPlan(item=Annotated[kind, AfterValidator(within)], description=described)


def _reject_null(value: Any) -> Any:
    if value is None:
        raise ValueError("must not be null")
    return value


def _score_plan(type_name: str, levels: tuple[str, ...], options: Mapping[str, Any]) -> ItemPlan:
    if levels:
        if options.keys() & TYPES["score"].options:
            raise TypeBuildError(f"{type_name}: min=/max= cannot be combined with named levels")
        if len(set(levels)) != len(levels):
            raise TypeBuildError(f"{type_name}: levels must be distinct, got {', '.join(levels)}")
        description = ", ".join(f"{index}={level}" for index, level in enumerate(levels))
        # Field before the validator: the other order hides ge/le from the JSON schema.
        item = Annotated[int, Field(ge=0, le=len(levels) - 1), BeforeValidator(_matcher(levels, index=True))]
        return ItemPlan(item=item, description=description, reasoning_first=True)
    low = parse_number(type_name, "min", options["min"], integer=True) if "min" in options else 0
    high = parse_number(type_name, "max", options["max"], integer=True) if "max" in options else 10
    check_bounds_order(type_name, "min", low, "max" if "max" in options else "max (default)", high)
    return ItemPlan(
        item=Annotated[int, Field(ge=low, le=high)], description=f"Score from {low} to {high}", reasoning_first=True
    )


def _legacy_plan(type_name: str, positional: tuple[str, ...], options: Mapping[str, Any]) -> ItemPlan:
    """`decide` (a bool, or one of its choices), `date_rule`, `chunked_conversation`: always
    answered (0.x made them required), and one answer each except `date_rule`."""
    if type_name == "decide":
        if not positional:
            return ItemPlan(item=bool, description="The decision: true or false", nullable=False, allows_quantifier=False)
        choice = plan_builtin("pick", positional, options, True)
        return ItemPlan(
            item=choice.item, description="The decision: one of the given choices", nullable=False, allows_quantifier=False
        )
    if type_name == "date_rule":
        return ItemPlan(
            item=DateRule, description="A recurrence rule (RFC 5545 RRULE fields)", convert=dump_rule, nullable=False
        )
    return ItemPlan(
        item=list[ConversationChunk],
        description="The conversation divided into consecutive parts, in order",
        convert=dump_chunks,
        nullable=False,
        allows_quantifier=False,
    )


def plan_builtin(
    type_name: str,
    positional: tuple[str, ...],
    options: Mapping[str, Any],
    required: bool,
) -> ItemPlan:
    """Build the item plan of a builtin type; options are already checked against ``BUILTIN_OPTIONS``."""
    if positional and type_name not in POSITIONAL_TYPES:
        raise TypeBuildError(f"{type_name}: takes no positional options (got {', '.join(positional)})")
    if type_name in ("decide", "date_rule", "chunked_conversation"):
        return _legacy_plan(type_name, positional, options)
    type_name = ALIASES.get(type_name, type_name)
    if type_name in TEXT_TYPES:
        return _text_plan(type_name, options, required)
    if type_name == "pick":
        choices = tuple(dict.fromkeys(_choices(type_name, positional, what="choices")))
        if not choices:
            raise TypeBuildError("pick: needs at least one choice, e.g. [[pick:color|red, green, blue]]")
        item = Annotated[Literal[choices], BeforeValidator(_matcher(choices, index=False))]  # type: ignore[valid-type]
        return ItemPlan(item=item, description="One of the given choices")
    if type_name == "bool":
        return ItemPlan(item=bool, description="true or false")
    if type_name in ("int", "number"):
        return _numeric_plan(type_name, options, integer=type_name == "int")
    if type_name in _TEMPORAL_KINDS:
        return _temporal_plan(type_name, options)
    if type_name == "json":
        return ItemPlan(
            item=Annotated[JsonValue, AfterValidator(_reject_null), WithJsonSchema(_NON_NULL_JSON_SCHEMA)],
            description="Any JSON value",
            null_item=Annotated[JsonValue, WithJsonSchema({})],
            schema=_NON_NULL_JSON_SCHEMA,
        )
    if type_name == "record":
        schema = {"type": "object"}
        return ItemPlan(
            item=Annotated[dict[str, JsonValue], WithJsonSchema(schema)],
            description="A JSON object",
            schema=schema,
        )
    if type_name == "score":
        return _score_plan(type_name, _choices(type_name, positional, what="levels"), options)
    if type_name == "halt":
        return ItemPlan(
            item=HaltVerdict,
            description="Guard verdict",
            convert=_dump_verdict,
            nullable=False,
            allows_quantifier=False,
        )
    raise TypeBuildError(f"unknown builtin type {type_name!r}")  # pragma: no cover - guarded by caller
