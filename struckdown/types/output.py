"""`build_output`: a slot's output spec, cached by its registry.

Free text without options is most slots, and its spec is plain data: the output type
`str` and the schema `{"description": …, "type": "string"}`. It is written here without
pydantic, so parsing a template of such slots (`sd check`) imports no pydantic at all
(SPEC §28); every other spec is built by `build.build_spec` (pydantic models).
tests/types/test_plain_text_spec.py checks that both give the same spec.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from functools import partial
from typing import Any

from .registry import TypeRegistry
from .spec import OutputSpec, TextRules, TypeBuildError, TypeRequest
from .table import TEXT_TYPES, TYPES

__all__ = ["build_output", "plain_text_spec"]


def build_output(req: TypeRequest, registry: TypeRegistry | None = None) -> OutputSpec:
    """Build (or fetch from the registry's cache) the output spec of one slot.
    Without a registry only the builtin types are known (and nothing is cached)."""
    reg = TypeRegistry() if registry is None else registry
    return reg._cached(_cache_key(req), partial(_build, req, reg))


def _build(req: TypeRequest, reg: TypeRegistry) -> OutputSpec:
    spec = plain_text_spec(req, reg)
    if spec is not None:
        return spec
    from .build import build_spec

    return build_spec(req, reg)


def plain_text_spec(req: TypeRequest, reg: TypeRegistry) -> OutputSpec | None:
    """The spec of a builtin free-text slot without options, positional options or a
    quantifier (what `build_spec` builds for it through pydantic); None for any other."""
    name = req.type_name
    if name not in TEXT_TYPES or req.options or req.positional or req.quantifier is not None:
        return None
    if reg.custom(name) is not None:
        return None
    required = bool(req.required)
    schema: dict[str, Any] = {"description": TYPES[name].description, "type": "string"}
    if required:  # the schema asks for at least one character; the rules check it
        schema = {"description": schema["description"], "minLength": 1, "type": "string"}
    return OutputSpec(str, True, schema, _text_rules=TextRules(required=True) if required else None)


def _freeze(value: Any) -> Hashable:
    # The type name is part of the key: 1, 1.0 and True hash alike but may build differently.
    return (type(value).__name__, repr(value))


def _cache_key(req: TypeRequest) -> Hashable:
    if not isinstance(req.type_name, str):
        raise TypeBuildError(f"type name must be a string, not {req.type_name!r}")
    if not isinstance(req.options, Mapping):
        raise TypeBuildError(f"{req.type_name}: options must be a mapping, not {req.options!r}")
    options = tuple(sorted((str(k), _freeze(v)) for k, v in req.options.items()))
    quantifier = tuple(req.quantifier) if isinstance(req.quantifier, tuple | list) else req.quantifier
    return (req.type_name, tuple(req.positional), options, quantifier, bool(req.required))
