"""A user-defined type as the registry holds it, and the checks every kind passes.

Shared by the registry and the YAML type-file reader, so neither imports the other.
"""

from __future__ import annotations

import keyword
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from .spec import TypeBuildError
from .table import BUILTIN_OPTIONS, BUILTIN_TYPES, POSITIONAL_TYPES


@dataclass(frozen=True)
class CustomType:
    """A registered user type.

    ``target`` is the item class (kind ``model``), the factory (``factory``) or
    the builtin base type name (``preset``). ``choices``/``options`` are the
    preset's fixed positional options and default type options.
    """

    name: str
    kind: Literal["model", "factory", "preset"]
    target: Any
    description: str | None = None
    choices: tuple[str, ...] = ()
    options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    accepted_options: frozenset[str] = frozenset()
    # the type's default model settings (a 0.x YAML type's `llm_config:`): under the slot's and the caller's
    settings: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))


def check_type_name(name: Any) -> str:
    """Custom names must be usable in ``[[name:var]]`` and must not shadow builtins."""
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        raise ValueError(f"type name must be an identifier, not {name!r}")
    if name in BUILTIN_TYPES:
        raise ValueError(f"{name!r} is a builtin type and cannot be redefined")
    return name


def make_preset(
    name: str,
    base: str,
    choices: tuple[str, ...],
    options: dict[str, Any],
    description: str | None,
) -> CustomType:
    """Validate a preset now, so a bad type file fails at load time rather than mid-run."""
    check_type_name(name)
    if base not in BUILTIN_TYPES:
        raise TypeBuildError(
            f"base must be a builtin type ({', '.join(sorted(BUILTIN_TYPES))}), not {base!r}"
        )
    if choices and base not in POSITIONAL_TYPES:
        raise TypeBuildError(f"base type {base!r} takes no choices")
    if "required" in options:
        raise TypeBuildError("required cannot be preset; mark the slot with ! instead")
    unknown = set(options) - BUILTIN_OPTIONS[base]
    if unknown:
        raise TypeBuildError(f"base type {base!r} does not accept option(s) {', '.join(sorted(unknown))}")
    if choices or base != "pick":
        from .builtin import plan_builtin

        plan_builtin(base, choices, options, False)
    return CustomType(name, "preset", base, description, choices, MappingProxyType(dict(options)))
