"""The type registry: builtin names plus user-defined types.

A registry is what a template's ``[[type:name]]`` is resolved against. Custom
types come in three kinds so that users can pick the lightest way to say what
they need: a pydantic model (or any class pydantic validates), a factory
``(options, quantifier, required) -> item type``, or a preset of a builtin
(e.g. ``sentiment`` = ``pick`` over fixed choices), usually from a YAML file.

The registry also owns the cache of built :class:`OutputSpec` objects, so that
registering or replacing a type can never leave a stale spec behind.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any

from ..lru import LRU
from .custom import CustomType, check_type_name, make_preset
from .spec import OPTION_NAMES, OutputSpec, TypeBuildError
from .table import BUILTIN_OPTIONS, BUILTIN_TYPES, POSITIONAL_TYPES

__all__ = [
    "CustomType",
    "TypeFactory",
    "TypeRegistry",
    "allowed_type_options",
    "takes_positional",
]

_CACHE_SIZE = 4096

#: ``(options, quantifier, required) -> item type``; struckdown wraps the item itself.
TypeFactory = Callable[[Mapping[str, Any], tuple[int, int | None] | None, bool], Any]


class TypeRegistry:
    """Builtin types plus the custom types registered on this instance."""

    def __init__(self) -> None:
        self._custom: dict[str, CustomType] = {}
        self._lock = threading.Lock()
        self._specs: LRU[OutputSpec] = LRU(_CACHE_SIZE)  # batch runs rebuild the same slots thousands of times
        self._yaml_0x: dict[str, dict[str, Any]] = {}  # fields of the 0.x YAML types loaded (for extends:)

    # -- registration -----------------------------------------------------
    def register(
        self,
        name: str,
        model_or_factory: type[Any] | TypeFactory,
        *,
        description: str | None = None,
        options: Iterable[str] | None = None,
    ) -> None:
        """Register a class (returned as its validated instance) or an item-type factory.

        ``options`` (factories only) lists the type options the factory
        understands; by default it receives all of them and validates them itself.
        Re-registering a custom name replaces it.
        """
        check_type_name(name)
        if isinstance(model_or_factory, type):
            if options is not None:
                raise ValueError(f"{name}: options= only applies to factories")
            from pydantic import BaseModel  # not before a custom type is registered (SPEC §28)

            if not issubclass(model_or_factory, BaseModel):
                _check_validatable(name, model_or_factory)
            entry = CustomType(name, "model", model_or_factory, description)
        elif callable(model_or_factory):
            accepted = OPTION_NAMES if options is None else frozenset(options)
            if not accepted <= OPTION_NAMES:
                unknown = ", ".join(sorted(accepted - OPTION_NAMES))
                raise ValueError(f"{name}: unknown type options {unknown}")
            entry = CustomType(name, "factory", model_or_factory, description, accepted_options=accepted)
        else:
            raise ValueError(
                f"{name}: expected a pydantic model class or a factory callable, not {model_or_factory!r}"
            )
        self._add(entry)

    def register_preset(
        self,
        name: str,
        base: str,
        *,
        choices: Iterable[str] = (),
        options: Mapping[str, Any] | None = None,
        description: str | None = None,
    ) -> None:
        """Register a builtin type with fixed choices/levels and default options."""
        self._add(make_preset(name, base, tuple(choices), dict(options or {}), description))

    def load_yaml(self, path: str | os.PathLike[str]) -> list[str]:
        """Register every type defined in a YAML type file (or a folder of them, 0.x's
        one-type files included); all or nothing."""
        from .yaml_types import read_type_file

        entries = read_type_file(path, self._yaml_0x)
        with self._lock:
            for entry in entries:
                self._custom[entry.name] = entry
            self._specs.clear()
        return [entry.name for entry in entries]

    def unregister(self, name: str) -> None:
        """Remove a custom type (``KeyError`` if it is not registered); builtins stay."""
        with self._lock:
            del self._custom[name]
            self._specs.clear()

    def _add(self, entry: CustomType) -> None:
        with self._lock:
            self._custom[entry.name] = entry
            self._specs.clear()

    # -- lookup -----------------------------------------------------------
    def __contains__(self, name: object) -> bool:
        return name in BUILTIN_TYPES or name in self._custom

    def names(self) -> list[str]:
        """Builtin names (sorted) followed by custom names in registration order."""
        return sorted(BUILTIN_TYPES) + list(self._custom)

    def custom(self, name: str) -> CustomType | None:
        """The custom entry for ``name``, or ``None`` for builtins and unknown names."""
        return self._custom.get(name)

    def allowed_options(self, name: str) -> frozenset[str]:
        """Type options (besides ``required``) that ``name`` accepts."""
        if name in BUILTIN_OPTIONS:
            return BUILTIN_OPTIONS[name]
        entry = self._require(name)
        if entry.kind == "preset":
            if entry.target == "score" and entry.choices:
                return frozenset()
            return BUILTIN_OPTIONS[entry.target]
        return entry.accepted_options

    def takes_positional(self, name: str) -> bool:
        """Whether positional options mean something for ``name`` (choices or levels)."""
        if name in BUILTIN_TYPES:
            return name in POSITIONAL_TYPES
        entry = self._require(name)
        return entry.kind == "preset" and entry.target in POSITIONAL_TYPES and not entry.choices

    def _require(self, name: str) -> CustomType:
        entry = self._custom.get(name)
        if entry is None:
            raise TypeBuildError(f"unknown type {name!r}; known types: {', '.join(self.names())}")
        return entry

    def _cached(self, key: Hashable, make: Callable[[], OutputSpec]) -> OutputSpec:
        spec = self._specs.get(key)
        if spec is None:
            spec = self._specs.put(key, make())
        return spec


def _check_validatable(name: str, cls: type) -> None:
    from pydantic import TypeAdapter

    try:
        TypeAdapter(cls)
    except Exception as exc:  # pydantic raises several error classes here
        raise ValueError(f"{name}: pydantic cannot validate {cls!r}: {exc}") from exc


def allowed_type_options(type_name: str, registry: TypeRegistry | None = None) -> frozenset[str]:
    """Type options (besides ``required``) the parser may accept for ``type_name``."""
    return (TypeRegistry() if registry is None else registry).allowed_options(type_name)


def takes_positional(type_name: str, registry: TypeRegistry | None = None) -> bool:
    """True when ``type_name`` gives positional options a meaning (pick choices, score levels)."""
    return (TypeRegistry() if registry is None else registry).takes_positional(type_name)
