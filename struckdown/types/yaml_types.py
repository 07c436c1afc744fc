"""YAML type files: presets of builtin types and record models, without Python.

A file maps type names to either a preset (``base:`` a builtin type, with
fixed ``choices`` and default ``options``) or a record (``fields:``), which
becomes a pydantic model whose instances are the slot's values. The whole file
is validated before anything is registered, so a typo never leaves a registry
half-loaded. PyYAML is imported here, lazily, only when a file is loaded.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any, Optional

from pydantic import BaseModel, Field

from .builtin import BUILTIN_OPTIONS, answer_model, legacy_answer_model, plan_builtin
from .custom import CustomType, check_type_name, make_preset
from .options import parse_quantifier
from .spec import OPTION_NAMES, TypeBuildError
from .yaml_0x import is_0x_form, read_0x

__all__ = ["read_type_file"]

_PRESET_KEYS = frozenset({"base", "choices", "levels", "options", "description"})
_RECORD_KEYS = frozenset({"fields", "description"})
_FIELD_KEYS = OPTION_NAMES | {"type", "description", "required", "choices", "items", "min_items", "max_items"}
#: Field type names (with a few forgiving aliases) → the builtin that supplies the item.
_FIELD_TYPES: Mapping[str, str] = {
    "str": "respond",
    "string": "respond",
    "int": "int",
    "integer": "int",
    "number": "number",
    "float": "number",
    "bool": "bool",
    "boolean": "bool",
    "date": "date",
    "datetime": "datetime",
    "time": "time",
    "duration": "duration",
    "json": "json",
}
_FORMAT_HINTED = frozenset({"date", "datetime", "time", "duration"})


def read_type_file(
    path: str | os.PathLike[str], known_0x: dict[str, dict[str, Any]] | None = None
) -> list[CustomType]:
    """Parse and validate a type file, or every `.yaml`/`.yml` file of a folder (in name
    order), into registry entries (nothing is registered here). A 0.x file (one type,
    `name:` at the top) is read too (`yaml_0x`); `known_0x` holds the fields of the 0.x
    types loaded before, for `extends:`, and gains the new ones only if all files read."""
    known = dict(known_0x or {})
    if os.path.isdir(path):
        files = sorted(
            os.path.join(path, f) for f in os.listdir(path) if f.endswith((".yaml", ".yml"))
        )
        if not files:
            raise TypeBuildError(f"{os.fspath(path)}: the folder holds no .yaml type files")
        entries = _read_in_order(files, known)
    else:
        entries = _read_one(path, known)
    if known_0x is not None:
        known_0x.update(known)
    return entries


class _MissingType(TypeBuildError):
    """A field names a type that is not loaded (yet): a later file of the folder may define it."""


def _read_in_order(files: list[str], known: dict[str, dict[str, Any]]) -> list[CustomType]:
    """Every file's entries, in name order, except that a 0.x file whose field names a type
    of a later file is read after it."""
    entries: list[CustomType] = []
    waiting = list(files)
    while waiting:
        deferred: list[str] = []
        for file in waiting:
            try:
                entries.extend(_read_one(file, known))
            except _MissingType:
                deferred.append(file)
        if len(deferred) == len(waiting):
            _read_one(deferred[0], known)  # nothing more can load: its error says which type is missing
        waiting = deferred
    return entries


def _read_one(path: str | os.PathLike[str], known: dict[str, dict[str, Any]]) -> list[CustomType]:
    import yaml  # type: ignore[import-untyped,unused-ignore]

    shown = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle)
    except OSError as exc:
        raise TypeBuildError(f"{shown}: cannot read type file: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise TypeBuildError(f"{shown}: invalid YAML: {exc}") from exc
    if data is None:
        return []
    if is_0x_form(data):
        try:
            fields_before = dict(known)
            name, definition, settings = read_0x(data, known)
            try:
                entry = _entry(name, definition, refs=fields_before)
            except ValueError:
                known.pop(name, None)
                raise
        except ValueError as exc:  # TypeBuildError included
            kind = _MissingType if isinstance(exc, _MissingType) else TypeBuildError
            raise kind(f"{shown}: type {data['name']!r}: {exc}") from exc
        return [replace(entry, settings=MappingProxyType(settings))]
    if not isinstance(data, dict):
        raise TypeBuildError(f"{shown}: a type file must map type names to definitions")
    entries = []
    for name, spec in data.items():
        try:
            entries.append(_entry(name, spec))
        except ValueError as exc:  # TypeBuildError included
            raise TypeBuildError(f"{shown}: type {name!r}: {exc}") from exc
    return entries


def _entry(name: Any, spec: Any, refs: Mapping[str, Any] | None = None) -> CustomType:
    """`refs`: the fields of the 0.x types loaded before, which a 0.x field may name."""
    check_type_name(name)
    if not isinstance(spec, dict):
        raise TypeBuildError("definition must be a mapping with either base: or fields:")
    if "base" in spec and "fields" in spec:
        raise TypeBuildError("use either base: (a preset) or fields: (a record), not both")
    description = spec.get("description")
    if description is not None and not isinstance(description, str):
        raise TypeBuildError("description must be a string")
    if "base" in spec:
        _reject_unknown(spec, _PRESET_KEYS, "preset")
        if "choices" in spec and "levels" in spec:
            raise TypeBuildError("use choices: or levels:, not both")
        choices = spec.get("choices", spec.get("levels", []))
        if not isinstance(choices, list):
            raise TypeBuildError("choices must be a list")
        options = spec.get("options") or {}
        if not isinstance(options, dict):
            raise TypeBuildError("options must be a mapping")
        return make_preset(name, spec["base"], tuple(str(c) for c in choices), options, description)
    if "fields" in spec:
        _reject_unknown(spec, _RECORD_KEYS, "record")
        model = _record_model(name, spec["fields"], description, refs)
        return CustomType(name, "model", model, description)
    raise TypeBuildError("definition needs base: (a preset of a builtin type) or fields: (a record)")


def _reject_unknown(spec: Mapping[str, Any], known: frozenset[str], what: str) -> None:
    unknown = set(spec) - known
    if unknown:
        raise TypeBuildError(
            f"unknown key(s) {', '.join(sorted(map(str, unknown)))} for a {what} "
            f"(allowed: {', '.join(sorted(known))})"
        )


def _record_model(
    name: str, fields: Any, description: str | None, refs: Mapping[str, Any] | None = None,
    seen: tuple[str, ...] = (),
) -> type[BaseModel]:
    """A record's answer model; with `refs` (a 0.x type) a field may name another 0.x type,
    and `str()` of an answer names its class as 0.x's did."""
    if not isinstance(fields, dict) or not fields:
        raise TypeBuildError("fields must be a non-empty mapping of field name to field spec")
    definitions: dict[str, Any] = {}
    for field_name, field_spec in fields.items():
        if not isinstance(field_name, str) or not field_name.isidentifier() or field_name.startswith("_"):
            raise TypeBuildError(f"field name must be an identifier not starting with _, not {field_name!r}")
        try:
            definitions[field_name] = _field(field_spec, refs, (*seen, name))
        except ValueError as exc:
            kind = _MissingType if isinstance(exc, _MissingType) else TypeBuildError
            raise kind(f"field {field_name!r}: {exc}") from exc
    model_name = "".join(part[:1].upper() + part[1:] for part in name.split("_") if part) or name
    if refs is not None:
        return legacy_answer_model(model_name, __doc__=description, **definitions)
    return answer_model(model_name, __doc__=description, **definitions)


def _field(spec: Any, refs: Mapping[str, Any] | None = None, seen: tuple[str, ...] = ()) -> tuple[Any, Any]:
    """One record field: its annotation and ``Field`` (optional fields default to null)."""
    if spec is None:
        spec = {}
    if isinstance(spec, str):
        spec = {"type": spec}
    if not isinstance(spec, dict):
        raise TypeBuildError("field spec must be a type name or a mapping")
    _reject_unknown(spec, _FIELD_KEYS, "field")
    kind = spec.get("type", "str")
    required = spec.get("required", False)
    if not isinstance(required, bool):
        raise TypeBuildError("required must be true or false")
    description = spec.get("description")
    listed = kind == "list"
    if not listed and ("items" in spec or "min_items" in spec or "max_items" in spec):
        raise TypeBuildError("items/min_items/max_items only apply to type: list")
    item_kind = spec.get("items", "str") if listed else kind
    if refs is not None and item_kind not in _FIELD_TYPES:
        return _nested(spec, item_kind, listed, required, description, refs, seen)
    if item_kind not in _FIELD_TYPES:
        known = ", ".join(sorted({*_FIELD_TYPES, "list"}))
        raise TypeBuildError(f"unknown field type {item_kind!r} (use one of {known})")
    base = _FIELD_TYPES[item_kind]
    choices = spec.get("choices")
    if choices is not None:
        if base != "respond" or not isinstance(choices, list):
            raise TypeBuildError("choices: must be a list and only applies to str fields")
        base = "pick"
    options = {key: spec[key] for key in OPTION_NAMES if key in spec}
    refused = set(options) - BUILTIN_OPTIONS[base]
    if refused:
        raise TypeBuildError(f"option(s) {', '.join(sorted(refused))} do not apply to a {item_kind} field")
    plan = plan_builtin(base, tuple(str(c) for c in choices or ()), options, required)
    if description and base in _FORMAT_HINTED:
        description = f"{description.rstrip('. ')}. {plan.description}"
    elif not description and base in _FORMAT_HINTED:
        description = plan.description
    constraints: dict[str, Any] = {}
    annotation: Any = plan.item
    if listed:
        bounds = parse_quantifier("list", (spec.get("min_items", 0), spec.get("max_items")))
        assert bounds is not None
        low, high = bounds
        if required:
            low = max(low, 1)
        annotation = list[plan.item]  # type: ignore[name-defined]
        constraints = {"min_length": low or None, "max_length": high}
    if required:
        return annotation, Field(description=description, **constraints)
    if plan.null_item is not None and not listed:
        annotation = plan.null_item
    else:
        annotation = Optional[annotation]  # noqa: UP045 - works for any runtime type object
    return annotation, Field(default=None, description=description, **constraints)


def _nested(
    spec: Mapping[str, Any], kind: Any, listed: bool, required: bool, description: str | None,
    refs: Mapping[str, Any], seen: tuple[str, ...],
) -> tuple[Any, Any]:
    """A 0.x field (or list item) naming another 0.x type: an object of that type."""
    if not isinstance(kind, str) or kind not in refs:
        known = ", ".join(sorted({*_FIELD_TYPES, "list", *refs}))
        raise _MissingType(f"unknown field type {kind!r} (use one of {known}, or a 0.x type loaded before)")
    if kind in seen:
        raise TypeBuildError(f"type {kind!r} contains itself ({' -> '.join((*seen, kind))})")
    item: Any = _record_model(kind, refs[kind], None, refs, seen)
    constraints: dict[str, Any] = {}
    annotation: Any = item
    if listed:
        bounds = parse_quantifier("list", (spec.get("min_items", 0), spec.get("max_items")))
        assert bounds is not None
        low, high = bounds
        annotation = list[item]
        constraints = {"min_length": max(low, 1 if required else 0) or None, "max_length": high}
    if required:
        return annotation, Field(description=description, **constraints)
    return Optional[annotation], Field(default=None, description=description, **constraints)  # noqa: UP045
