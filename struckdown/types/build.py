"""Turn a :class:`TypeRequest` into an :class:`OutputSpec`.

Every type goes through the same assembly so that quantifiers, nullability and
``required`` behave identically for builtins and custom types: the type only
supplies an item (:class:`ItemPlan`), and this module wraps it into a
one-field ``response`` model whose JSON schema is what the LLM sees.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from functools import partial
from types import MappingProxyType
from typing import Annotated, Any, Optional

from pydantic import Field, TypeAdapter, WithJsonSchema
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue

from .builtin import BACKTRACKING_ANSWER_CONFIG, TEXT_TYPES, ItemPlan, answer_model, plan_builtin
from .options import parse_quantifier
from .registry import CustomType, TypeRegistry
from .spec import OPTION_NAMES, OutputSpec, TypeBuildError, TypeRequest

__all__ = ["AnswerSchemaGenerator", "build_spec"]


class AnswerSchemaGenerator(GenerateJsonSchema):
    """Drop per-property titles, as pydantic-ai does for tool schemas.

    Keeps ``answer_schema`` identical to what the model is actually sent.
    """

    def _named_required_fields_schema(
        self, named_required_fields: Sequence[tuple[str, bool, Any]]
    ) -> JsonSchemaValue:
        schema = super()._named_required_fields_schema(named_required_fields)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        return schema


def build_spec(req: TypeRequest, reg: TypeRegistry) -> OutputSpec:
    """Build one slot's output spec (uncached: `output.build_output` caches it)."""
    name = req.type_name
    options = dict(req.options)
    required = bool(req.required)
    if "required" in options:  # tolerated here although the parser normally consumes it
        required = required or options.pop("required") in (True, "true", "True", 1)
    unknown = set(options) - OPTION_NAMES
    if unknown:
        raise TypeBuildError(
            f"{name}: unknown option(s) {', '.join(sorted(unknown))}; "
            f"type options are required, {', '.join(sorted(OPTION_NAMES))}"
        )
    allowed = reg.allowed_options(name)  # also rejects unknown type names
    refused = set(options) - allowed
    if refused:
        accepted = ", ".join(sorted(allowed)) if allowed else "only required"
        raise TypeBuildError(
            f"{name}: does not accept option(s) {', '.join(sorted(refused))} (accepts {accepted})"
        )
    positional = tuple(req.positional)
    if positional and not reg.takes_positional(name):
        raise TypeBuildError(f"{name}: takes no positional options (got {', '.join(map(str, positional))})")
    quantifier = parse_quantifier(name, req.quantifier)

    entry = reg.custom(name)
    if entry is None:
        plan, is_text = plan_builtin(name, positional, options, required), name in TEXT_TYPES
    else:
        plan, is_text = _custom_plan(entry, positional, options, quantifier, required)
    if quantifier is not None and not plan.allows_quantifier:
        raise TypeBuildError(f"{name}: does not take a quantifier")
    try:
        return _assemble(name, plan, quantifier, required, is_text)
    except TypeBuildError:
        raise
    except Exception as exc:  # pydantic could not build a schema for a custom item type
        raise TypeBuildError(f"{name}: cannot build an output model: {exc}") from exc


def _custom_plan(
    entry: CustomType,
    positional: tuple[str, ...],
    options: dict[str, Any],
    quantifier: tuple[int, int | None] | None,
    required: bool,
) -> tuple[ItemPlan, bool]:
    if entry.kind == "preset":
        base = entry.target
        plan = plan_builtin(base, positional or entry.choices, {**entry.options, **options}, required)
        if entry.description:
            joined = (
                f"{entry.description.rstrip('. ')}. {plan.description}"
                if plan.description
                else entry.description
            )
            plan = dataclasses.replace(plan, description=joined)
        return plan, base in TEXT_TYPES
    if entry.kind == "model":
        return ItemPlan(item=entry.target, description=entry.description), False
    try:
        item = entry.target(MappingProxyType(options), quantifier, required)
    except TypeBuildError as exc:
        raise TypeBuildError(f"{entry.name}: {exc}") from exc
    except Exception as exc:
        raise TypeBuildError(f"{entry.name}: type factory failed: {exc}") from exc
    if item is None:
        raise TypeBuildError(f"{entry.name}: type factory returned None instead of a type")
    return ItemPlan(item=item, description=entry.description), False


def _model_name(type_name: str, listed: bool) -> str:
    stem = "".join(part[:1].upper() + part[1:] for part in type_name.split("_") if part)
    return f"{stem}{'List' if listed else ''}Answer"


def _described(plan: ItemPlan) -> Any:
    """The item carrying its description (list items: the field itself has none)."""
    if plan.description is None:
        return plan.item
    if plan.schema is not None:
        return Annotated[plan.item, WithJsonSchema({**plan.schema, "description": plan.description})]
    return Annotated[plan.item, Field(description=plan.description)]


_REASONING = "Your reasoning in a sentence or two, written before the answer"


def _single_value(convert: Callable[[Any], Any], raw: Any) -> Any:
    value = raw.response
    return None if value is None else convert(value)


def _list_value(convert: Callable[[Any], Any], raw: Any) -> list[Any]:
    return [convert(value) for value in raw.response]


#: A free-text answer's description, and what each item of a free-text list says instead: a
#: small model read "The answer" on every item and put the whole answer into the first one.
TEXT_ANSWER = "The answer"
LIST_ITEM = "One element of the list: a single short item, not the whole list"


def list_description(low: int, high: int | None) -> str:
    """What a list answer's schema says about its items (issue 40 item 23: a small model put
    the whole list into one item and padded the rest): one element per item, and how many."""
    if high is not None and low == high:
        count = f"exactly {low} item{'s' if low != 1 else ''}"
    elif high is not None:
        count = f"{low} to {high} items" if low else f"at most {high} item{'s' if high != 1 else ''}"
    else:
        count = f"at least {low} item{'s' if low != 1 else ''}" if low else "any number of items"
    return (  # "different from the others": a small model padded a short list with repeats
        f"A JSON array of {count}: each item is one separate element of the list, different from the others; "
        "never the whole list in one item, never a number or placeholder"
    )


def _assemble(
    name: str,
    plan: ItemPlan,
    quantifier: tuple[int, int | None] | None,
    required: bool,
    is_text: bool,
) -> OutputSpec:
    # Free text streams as plain text. Text with a pattern or lengths is asked for as a
    # structured answer instead, so that the schema the model is sent states them (SPEC §11).
    constrained = plan.text is not None and (
        plan.text.pattern is not None or plan.text.min_length is not None or plan.text.max_length is not None
    )
    if quantifier is None and is_text and not constrained:
        # only the schema is wanted here (TextRules checks the answer), so any regex engine will do
        adapter = TypeAdapter(_described(plan), config=BACKTRACKING_ANSWER_CONFIG)
        text_schema = adapter.json_schema(schema_generator=AnswerSchemaGenerator)
        return OutputSpec(str, True, text_schema, _text_rules=plan.text)
    fields: dict[str, Any] = {}
    if quantifier is None:
        if plan.reasoning_first:
            fields["reasoning"] = (str, Field(default="", description=_REASONING))
        if required or not plan.nullable or is_text:  # a text answer is never null
            annotation = plan.item
        else:
            annotation = plan.null_item if plan.null_item is not None else Optional[plan.item]  # noqa: UP045 - works for any runtime type object
        field = Field(description=plan.description)
        convert = partial(_single_value, plan.convert)
    else:
        low, high = quantifier
        if required:
            low = max(low, 1)
        if plan.description == TEXT_ANSWER:  # each item is one element, not "the answer" (issue 40 item 23)
            plan = dataclasses.replace(plan, description=LIST_ITEM)
        annotation = list[_described(plan)]  # type: ignore[misc]
        field = Field(min_length=low or None, max_length=high, description=list_description(low, high))
        convert = partial(_list_value, plan.convert)
    fields["response"] = (annotation, field)
    model = answer_model(_model_name(name, quantifier is not None), **fields)
    full = model.model_json_schema(schema_generator=AnswerSchemaGenerator)
    schema: dict[str, Any] = dict(full["properties"]["response"])
    if "$defs" in full:
        schema["$defs"] = full["$defs"]
    return OutputSpec(model, False, schema, _convert=convert)
