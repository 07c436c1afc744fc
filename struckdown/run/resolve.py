"""A slot's plan made concrete for one run: its `{{ … }}` option values evaluated
(`resolve_plan`), its output type (`output_for`) and its model settings (`model_settings`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic_ai.settings import ModelSettings

from .. import slot_options as opts
from ..errors import TemplateRuntimeError, exception_text
from ..plan import SlotPlan
from ..render import Renderer
from ..syntax.nodes import JinjaValue
from ..types import OutputSpec, TypeRegistry, TypeRequest, build_output


@dataclass(frozen=True)
class Resolved:
    """A plan with its `{{ … }}` option values evaluated."""

    positional: tuple[str, ...]
    type_options: dict[str, Any]
    settings: dict[str, Any]
    control: dict[str, Any]


def evaluate_option(renderer: Renderer, expression: str, variables: Mapping[str, Any], where: str) -> Any:
    """A `{{ … }}` option value; any failure (sandbox refusal included) is a
    TemplateRuntimeError naming the slot, with the original error as its cause."""
    try:
        return renderer.evaluate(expression, variables)
    except Exception as exc:
        raise TemplateRuntimeError(
            f"{where}: {{{{ {expression} }}}} failed: {exception_text(exc)}"
        ) from exc


def resolve_plan(plan: SlotPlan, variables: Mapping[str, Any], renderer: Renderer) -> Resolved:
    if not plan.dynamic:  # nothing to evaluate: the same Resolved every run, kept by the plan
        static: Resolved | None = plan.memo.get("resolved")
        if static is None:
            static = Resolved(tuple(str(p) for p in plan.positional), plan.type_options, plan.settings, plan.control)
            plan.memo["resolved"] = static
        return static

    def value(v: Any) -> Any:
        if isinstance(v, JinjaValue):
            return evaluate_option(renderer, v.expression, variables, f"slot {plan.key!r}")
        return v

    positional: list[str] = []
    for item in plan.positional:
        got = value(item)
        if isinstance(item, JinjaValue) and isinstance(got, (list, tuple)):
            positional += [str(x) for x in got]
        elif isinstance(item, JinjaValue) and isinstance(got, str) and "," in got:
            positional += [p.strip() for p in got.split(",") if p.strip()]
        else:
            positional.append(str(got))
    resolved: dict[str, dict[str, Any]] = {}
    for family, items in (("type", plan.type_options), ("settings", plan.settings), ("control", plan.control)):
        resolved[family] = {}
        for key, raw in items.items():
            got = value(raw)
            if isinstance(raw, JinjaValue):
                try:
                    got = opts.check_option(key, got)
                except ValueError as exc:
                    raise TemplateRuntimeError(
                        f"slot {plan.key!r}: option {key}={{{{ {raw.expression} }}}} gave {got!r}: {exc}"
                    ) from None
            resolved[family][key] = got
    return Resolved(tuple(positional), resolved["type"], resolved["settings"], resolved["control"])


def output_for(plan: SlotPlan, resolved: Resolved, types: TypeRegistry) -> OutputSpec:
    """The plan's prebuilt output type, or (options that waited for `{{ }}`) one built now."""
    if plan.spec is not None:
        return plan.spec
    from ..types import TypeBuildError

    request = TypeRequest(
        plan.slot.type_name,
        resolved.positional if plan.slot.type_name in ("pick", "score") or resolved.positional else (),
        resolved.type_options,
        plan.slot.quantifier,
        plan.slot.required,
    )
    try:
        return build_output(request, types)
    except (TypeBuildError, OverflowError, RecursionError) as exc:
        raise TemplateRuntimeError(f"slot {plan.key!r}: {exc}") from exc


def model_settings(
    base: Mapping[str, Any] | None, slot: Mapping[str, Any], model_defaults: Mapping[str, Any] | None = None
) -> ModelSettings:
    """The run's settings: struckdown's defaults for a model it built (retries, timeout),
    under the caller's settings, under the slot's options."""
    merged: dict[str, Any] = {**(model_defaults or {}), **(base or {})}
    for key in ("temperature", "max_tokens", "seed", "top_p"):
        if key in slot:
            merged[key] = slot[key]
    if "thinking" in slot:
        merged["thinking"] = False if slot["thinking"] == "off" else slot["thinking"]
    settings: ModelSettings = ModelSettings(**merged)  # type: ignore[typeddict-item]
    return settings
