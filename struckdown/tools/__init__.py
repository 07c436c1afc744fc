"""Tools: what a host marks on its tool functions (here), tools files and factories
(`files`), MCP servers (`mcp`).

The markers are plain attributes on the function (and on a `pydantic_ai.Tool`'s function),
read by the engine's tool wrapper (`run/tools.py`), its approvals (`run/approval/`) and the
effect journal (`run/durable/effects.py`). This module imports no pydantic-ai: a tools file
that marks its functions costs nothing more to load, and `sd check` stays light.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, overload

__all__ = [
    "EFFECT_ATTR",
    "NEEDS_APPROVAL_ATTR",
    "READONLY_ATTR",
    "RECEIVES_ATTR",
    "TRUSTED_ATTR",
    "SEQUENTIAL_ATTR",
    "EffectSpec",
    "Reconcile",
    "effect",
    "host_needs_approval",
    "is_readonly",
    "needs_approval",
    "readonly",
    "receives",
    "receives_of",
    "trusted",
    "is_trusted",
    "reconcile_of",
    "sequential",
    "tool_name",
]

READONLY_ATTR = "__struckdown_readonly__"
SEQUENTIAL_ATTR = "__struckdown_sequential__"
NEEDS_APPROVAL_ATTR = "__struckdown_needs_approval__"
EFFECT_ATTR = "__struckdown_effect__"
TRUSTED_ATTR = "__struckdown_trusted__"
RECEIVES_ATTR = "__struckdown_receives__"

T = TypeVar("T")
#: `@effect(reconcile=fn)`: `fn(effect_id, arguments)` settles an interrupted call.
Reconcile = Callable[[str, dict[str, Any]], Any]


def _is_pydantic_tool(tool: Any) -> bool:
    """Whether `tool` is a `pydantic_ai.Tool` (none can exist before pydantic-ai is imported)."""
    module = sys.modules.get("pydantic_ai")
    return module is not None and isinstance(tool, module.Tool)


def readonly(tool: T) -> T:
    """Mark a tool (function or `pydantic_ai.Tool`) as free of side effects.

    A tool slot whose tools are all readonly may run beside a pending guard; any
    other tool slot waits for the guard's verdict first.
    """
    setattr(tool, READONLY_ATTR, True)
    if _is_pydantic_tool(tool):
        setattr(tool.function, READONLY_ATTR, True)  # type: ignore[attr-defined]
    return tool


def sequential(tool: T) -> T:
    """Mark a tool (function or `pydantic_ai.Tool`) to run alone (SPEC §14): the calls a
    response makes before it finish first, then it runs, then the calls after it, in the
    order the model wrote them (pydantic-ai's `Tool(sequential=True)`)."""
    if _is_pydantic_tool(tool):
        tool.sequential = True  # type: ignore[attr-defined]
    else:
        setattr(tool, SEQUENTIAL_ATTR, True)
    return tool


def needs_approval(tool: T) -> T:
    """Mark a tool (function or `pydantic_ai.Tool`) so that every call of it waits for a
    person's decision (`approve=` of the run, or a pause). A template cannot remove it."""
    setattr(tool, NEEDS_APPROVAL_ATTR, True)
    if _is_pydantic_tool(tool):
        setattr(tool.function, NEEDS_APPROVAL_ATTR, True)  # type: ignore[attr-defined]
    return tool


@dataclass(frozen=True)
class EffectSpec:
    reconcile: Reconcile | None = None


@overload
def effect(tool: T, /) -> T: ...
@overload
def effect(*, reconcile: Reconcile | None = None) -> Callable[[T], T]: ...
def effect(tool: Any = None, /, *, reconcile: Reconcile | None = None) -> Any:
    """Declare how a write tool's interrupted calls are settled: `reconcile(effect_id,
    arguments)` looks the effect up (at the payment provider, in the database) and returns
    the call's result, or None for "it did not happen" (the call then runs). Sync or async."""

    def mark(target: T) -> T:
        setattr(target, EFFECT_ATTR, EffectSpec(reconcile))
        function = getattr(target, "function", None)  # a pydantic_ai.Tool
        if function is not None:
            setattr(function, EFFECT_ATTR, EffectSpec(reconcile))
        return target

    return mark if tool is None else mark(tool)


def is_readonly(tool: Any) -> bool:
    if getattr(tool, READONLY_ATTR, False):
        return True
    return _is_pydantic_tool(tool) and bool(getattr(tool.function, READONLY_ATTR, False))


def host_needs_approval(tool: Any) -> bool:
    """Whether the host marked the tool: `@needs_approval` or `Tool(requires_approval=True)`."""
    if getattr(tool, NEEDS_APPROVAL_ATTR, False):
        return True
    return _is_pydantic_tool(tool) and (tool.requires_approval or bool(getattr(tool.function, NEEDS_APPROVAL_ATTR, False)))


def reconcile_of(tool: Any) -> Reconcile | None:
    spec = getattr(tool, EFFECT_ATTR, None) or getattr(getattr(tool, "function", None), EFFECT_ATTR, None)
    return spec.reconcile if isinstance(spec, EffectSpec) else None


def tool_name(tool: Any) -> str:
    return str(tool.name) if _is_pydantic_tool(tool) else str(tool.__name__)


def _mark(tool: Any, attr: str, value: Any) -> None:
    setattr(tool, attr, value)
    if _is_pydantic_tool(tool):
        setattr(tool.function, attr, value)


def trusted(tool: T) -> T:
    """Mark a tool whose results are trusted (SPEC §33): without it a tool's results are
    `untrusted`, like `@fetch`'s, `@search`'s and an MCP server's."""
    _mark(tool, TRUSTED_ATTR, True)
    return tool


def receives(*names: str) -> Callable[[T], T]:
    """Declare the private values a write tool may take in its arguments (SPEC §33):
    `@sd.receives("ssn")` lets a slot holding the private `ssn` call it."""
    if not names or not all(isinstance(n, str) and n for n in names):
        raise ValueError("@receives takes the names of the private values the tool may take, e.g. @receives('ssn')")

    def mark(tool: T) -> T:
        _mark(tool, RECEIVES_ATTR, frozenset(names) | frozenset(receives_of(tool)))
        return tool

    return mark


def is_trusted(tool: Any) -> bool:
    return bool(getattr(tool, TRUSTED_ATTR, False) or getattr(getattr(tool, "function", None), TRUSTED_ATTR, False))


def receives_of(tool: Any) -> frozenset[str]:
    found = getattr(tool, RECEIVES_ATTR, None) or getattr(getattr(tool, "function", None), RECEIVES_ATTR, None)
    return found if isinstance(found, frozenset) else frozenset()
