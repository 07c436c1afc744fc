"""A template as a service (SPEC §36): the JSON schemas of what a template takes and gives,
and the same as TypeScript, shared by `sd types` and `sd serve --api`.

- **input**: an object with one string property per variable the template reads before
  answering it (`variables.expected`), all required, no others. There is no input
  declaration in the language yet, so every input is a string (docs/serve-api.md).
- **output**: `{answers, usage, cost, halted}`; `answers` has one property per slot (its type's
  answer schema, the one the model is asked for) and per keyed action (any JSON value);
  `usage` is `Usage.to_dict()`, `cost` the run's USD or null when a price is unknown.

Each slot's `$defs` are lifted to the top of the output schema as `KEY__NAME`, so the
schema is one document (OpenAPI moves them again, into `components/schemas`).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .syntax.nodes import Action, Slot, walk
from .variables import expected

if TYPE_CHECKING:
    from .plan import Program

DIALECT = "https://json-schema.org/draft/2020-12/schema"

USAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "title": "Usage",
    "properties": {
        "requests": {"type": "integer"},
        "tool_calls": {"type": "integer"},
        "input_tokens": {"type": "integer"},
        "output_tokens": {"type": "integer"},
        "total_tokens": {"type": "integer"},
        "cost": {"type": ["number", "null"]},
        "cache_read_tokens": {"type": "integer"},
        "cache_write_tokens": {"type": "integer"},
        "cache_saved": {"type": ["number", "null"]},
    },
    "required": ["requests", "tool_calls", "input_tokens", "output_tokens", "total_tokens", "cost"],
}

#: A tripped guard (`halt`) ends the run early: which one, and why (null when none tripped).
HALTED_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "null"},
        {"type": "object", "properties": {"slot": {"type": "string"}, "reason": {"type": "string"}},
         "required": ["slot", "reason"]},
    ]
}


def input_schema(program: Program, title: str = "Input") -> dict[str, Any]:
    """The JSON body a run of `program` takes: each variable it reads, as a string."""
    names = [read.name for read in expected(program)]
    return {
        "type": "object",
        "title": title,
        "properties": {name: {"type": "string"} for name in names},
        "required": names,
        "additionalProperties": False,
    }


def answer_schemas(program: Program) -> dict[str, dict[str, Any]]:
    """Each answer key's schema, in template order (guards give no answer)."""
    found: dict[str, dict[str, Any]] = {}
    for segment in program.segments:
        for node in walk(segment.nodes):
            if isinstance(node, Slot) and not node.is_guard:
                spec = program.plan(node).spec
                found[node.key] = copy.deepcopy(spec.answer_schema) if spec is not None else {}
            elif isinstance(node, Action) and node.key is not None:
                found[node.key] = {}  # an action's value is whatever it returns
    return found


def output_schema(program: Program, title: str = "Output") -> dict[str, Any]:
    """The JSON a finished run gives: its answers, usage and cost (one document: `$defs` lifted)."""
    defs: dict[str, Any] = {}
    answers: dict[str, Any] = {}
    for key, schema in answer_schemas(program).items():
        own = schema.pop("$defs", {})
        prefix = f"{key}__"
        for name, sub in own.items():
            defs[prefix + name] = rebase(sub, "#/$defs/", "#/$defs/" + prefix)
        answers[key] = rebase(schema, "#/$defs/", "#/$defs/" + prefix)
    out: dict[str, Any] = {
        "type": "object",
        "title": title,
        "properties": {
            "answers": {"type": "object", "properties": answers, "additionalProperties": False},
            "usage": USAGE_SCHEMA,
            "cost": {"type": ["number", "null"]},
            "halted": HALTED_SCHEMA,
        },
        "required": ["answers", "usage", "cost"],
    }
    if defs:
        out["$defs"] = defs
    return out


def schemas(program: Program, name: str) -> dict[str, Any]:
    """Both schemas of a template called `name`: `{input, output}`, each with `$schema`."""
    base = type_name(name)
    return {
        "input": {"$schema": DIALECT, **input_schema(program, base + "Input")},
        "output": {"$schema": DIALECT, **output_schema(program, base + "Output")},
    }


def rebase(schema: Any, old: str, new: str) -> Any:
    """`schema` with every `$ref` starting `old` pointing under `new` instead."""
    if isinstance(schema, dict):
        return {
            k: (new + v[len(old):] if k == "$ref" and isinstance(v, str) and v.startswith(old) else rebase(v, old, new))
            for k, v in schema.items()
        }
    if isinstance(schema, list):
        return [rebase(v, old, new) for v in schema]
    return schema


def type_name(name: str) -> str:
    """A template's name as a TypeScript (and OpenAPI component) name: `reply-to` → `ReplyTo`."""
    words = [w for w in re.split(r"[^0-9A-Za-z]+", name) if w]
    text = "".join(w[:1].upper() + w[1:] for w in words) or "Template"
    return text if not text[0].isdigit() else "T" + text


# -- TypeScript ---------------------------------------------------------------------------
_IDENT = re.compile(r"^[A-Za-z_$][0-9A-Za-z_$]*$")
_SIMPLE = {"string": "string", "integer": "number", "number": "number", "boolean": "boolean", "null": "null"}


def typescript(program: Program, name: str) -> str:
    """`export type NameInput`, `NameOutput` and one type per lifted definition."""
    both = schemas(program, name)
    base = type_name(name)
    defs: dict[str, Any] = both["output"].get("$defs", {})
    names = {key: base + type_name(key) for key in defs}
    lines = [f"// Generated by `sd types {name}.sd --typescript`: the request and response of POST /v1/templates/{name}."]
    for key, schema in defs.items():
        lines.append(f"export type {names[key]} = {_ts(schema, names, 0)};")
    lines.append(f"export type {base}Input = {_ts(both['input'], names, 0)};")
    lines.append(f"export type {base}Output = {_ts(both['output'], names, 0)};")
    return "\n\n".join(lines) + "\n"


def _ts(schema: Any, names: Mapping[str, str], depth: int) -> str:
    if schema is True or schema == {} or not isinstance(schema, Mapping):
        return "unknown"
    if "$ref" in schema:
        return names.get(str(schema["$ref"]).rsplit("/", 1)[-1], "unknown")
    if "const" in schema:
        return json.dumps(schema["const"])
    if "enum" in schema:
        return " | ".join(json.dumps(v) for v in schema["enum"]) or "never"
    for union in ("anyOf", "oneOf"):
        if union in schema:
            return " | ".join(dict.fromkeys(_ts(s, names, depth) for s in schema[union])) or "never"
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(_ts({**schema, "type": k}, names, depth) for k in kind)
    if kind in _SIMPLE:
        return _SIMPLE[kind]
    if kind == "array":
        items = schema.get("items", {})
        return f"Array<{_ts(items, names, depth)}>"
    if kind == "object" or "properties" in schema:
        return _object(schema, names, depth)
    return "unknown"


def _object(schema: Mapping[str, Any], names: Mapping[str, str], depth: int) -> str:
    properties: Mapping[str, Any] = schema.get("properties", {})
    extra = schema.get("additionalProperties")
    if not properties:
        return "{ [key: string]: unknown }" if extra is not False else "Record<string, never>"
    required = set(schema.get("required", ()))
    pad = "  " * (depth + 1)
    rows = []
    for key, sub in properties.items():
        label = key if _IDENT.match(key) else json.dumps(key)
        optional = "" if key in required else "?"
        rows.append(f"{pad}{label}{optional}: {_ts(sub, names, depth + 1)};")
    return "{\n" + "\n".join(rows) + "\n" + "  " * depth + "}"
