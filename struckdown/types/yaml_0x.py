"""struckdown 0.x's YAML type files: one type per file, read into today's record form.

    name: product
    description: A product in a catalogue
    extends: item            # another 0.x type loaded before (or in the same folder)
    llm_config:
      temperature: 0.2       # the type's default settings (a slot's own options win)
      max_tokens: 400
    fields:
      title: {type: str, required: true, description: The product's name}
      price: {type: number, min: 0}
      colour: {type: str, enum: [red, green, blue], optional: true}
      tags: {type: list, items: str}

`optional: true` is `required: false`; `ge`/`le` are `min`/`max`, `minlength`/
`maxlength` and `regex` are accepted as in slot options, `enum` is `choices`, and
the field types `text`, `array`, `dict`/`object` are `str`, `list`, `json`;
`list[str]` is `{type: list, items: str}`, and a field type (or list item) naming
another 0.x type loaded before (or in the same folder) is a nested object of that type.
Without a `temperature` in `llm_config:` the type runs at 0.7, 0.x's default.
A field of the extending type replaces the parent's field of that name; `str()` of an
answer names its class, as in 0.x (`Hero(alias='Ann', powers=['flight'])`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, MutableMapping
from typing import Any

from .spec import TypeBuildError

_TOP_KEYS = frozenset({"name", "description", "extends", "llm_config", "fields"})
_FIELD_RENAMES = {"ge": "min", "le": "max", "minlength": "min_length", "maxlength": "max_length",
                  "regex": "pattern", "enum": "choices"}
#: 0.x's temperature for a YAML type whose llm_config names none (its LLMConfig's default)
_DEFAULT_TEMPERATURE = 0.7
_TYPE_ALIASES = {"text": "str", "array": "list", "dict": "json", "object": "json"}


def is_0x_form(data: Any) -> bool:
    """A 0.x file names its one type at the top (`name: product`); today's maps names to
    definitions, where `name` would have to hold a mapping."""
    return isinstance(data, dict) and isinstance(data.get("name"), str)


def read_0x(data: Mapping[str, Any], known: MutableMapping[str, dict[str, Any]]) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(name, today's record definition, llm settings) of a 0.x type; `known` holds the
    fields of the 0.x types read so far (for `extends:`) and gains this one's."""
    from .llm_config import LLMConfig

    unknown = set(data) - _TOP_KEYS
    if unknown:
        raise TypeBuildError(
            f"unknown key(s) {', '.join(sorted(map(str, unknown)))} (a 0.x type file has "
            f"{', '.join(sorted(_TOP_KEYS))})"
        )
    name = data["name"]
    fields: dict[str, Any] = {}
    parent = data.get("extends")
    if parent is not None:
        if not isinstance(parent, str) or parent not in known:
            loaded = ", ".join(sorted(known)) or "none"
            raise TypeBuildError(f"extends {parent!r}, which is not a 0.x type loaded before it (loaded: {loaded})")
        fields.update(known[parent])
    own = data.get("fields") or {}
    if not isinstance(own, dict):
        raise TypeBuildError("fields must be a mapping of field name to field spec")
    for field_name, spec in own.items():
        fields[field_name] = _field(field_name, spec)
    if not fields:
        raise TypeBuildError("a type needs fields: (or extends: a type that has them)")
    config = data.get("llm_config") or {}
    if not isinstance(config, dict):
        raise TypeBuildError("llm_config must be a mapping (temperature, max_tokens, seed, thinking)")
    if "model" in config:
        raise TypeBuildError("llm_config: model is not a type's setting; name the model on the slot: [[type:x|model=…]]")
    from pydantic import ValidationError

    try:
        settings = {"temperature": _DEFAULT_TEMPERATURE, **LLMConfig(**config).settings()}
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(p) for p in problem["loc"])
        raise TypeBuildError(f"llm_config: {where}: {problem['msg']}") from None
    known[name] = fields
    definition: dict[str, Any] = {"fields": dict(fields)}
    if data.get("description") is not None:
        definition["description"] = data["description"]
    return name, definition, settings


def _list_of(kind: Any) -> str | None:
    """The item type of 0.x's `list[X]` / `List[X]` field type, else None."""
    if isinstance(kind, str):
        found = re.fullmatch(r"\s*(?:list|List)\s*\[\s*(\w+)\s*\]\s*", kind)
        if found:
            return _TYPE_ALIASES.get(found.group(1), found.group(1))
    return None


def _field(name: Any, spec: Any) -> Any:
    if isinstance(spec, str) and _list_of(spec) is not None:
        return {"type": "list", "items": _list_of(spec)}
    if not isinstance(spec, dict):
        return {"type": _TYPE_ALIASES.get(spec, spec)} if isinstance(spec, str) else spec
    out: dict[str, Any] = {}
    for key, value in spec.items():
        if key == "optional":
            if not isinstance(value, bool):
                raise TypeBuildError(f"field {name!r}: optional must be true or false")
            out.setdefault("required", not value)
        elif key == "type":
            listed = _list_of(value)
            if listed is not None:  # 0.x's `list[str]`, `List[hero]`
                out["type"], out["items"] = "list", listed
            else:
                out["type"] = _TYPE_ALIASES.get(value, value)
        elif key == "items":
            out["items"] = _TYPE_ALIASES.get(value, value)
        else:
            out[_FIELD_RENAMES.get(str(key), str(key))] = value
    return out
