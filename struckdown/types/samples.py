"""`model="test"` / `--model test`: a dry run that answers every type with a valid sample (SPEC §22).

pydantic-ai's `TestModel` writes `"a"` into every string whatever its `format` or
`pattern`, so a `date`-with-bounds, `datetime`, `time`, `duration` or `pattern=` slot failed
validation on it. `SampleModel` is that `TestModel` (same name, same text answers, same
choices: the first choice, `0`, `false`, `"a"`) with one change: the arguments of a tool
call (answers are tool calls) come from `sample()`, which reads the whole JSON schema:
`format` (date, date-time, time, duration, email, uri, uuid, …), `pattern` (a string the
regular expression finds, within `minLength`/`maxLength`), numeric bounds, list sizes, and
the date and time bounds that builtin types write into the description
("…, minimum 2024-01-01", docs/types.md) because JSON schema has no keyword for them.
"""

from __future__ import annotations

import datetime as dt
import importlib
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from pydantic_ai.models.test import TestModel
from pydantic_ai.tools import ToolDefinition

from .spec import TEMPORAL_PATTERNS, pattern_matcher

__all__ = ["SampleModel", "sample", "text_matching"]

#: A sample for each string `format` pydantic writes; date and time ones may be moved to a bound.
_FORMATS: Mapping[str, str] = {
    "date": "2024-01-01",
    "date-time": "2024-01-01T09:00:00",
    "time": "09:00:00",
    "duration": "PT1H",
    "email": "a@example.com",
    "idn-email": "a@example.com",
    "uri": "https://example.com/",
    "iri": "https://example.com/",
    "uuid": "00000000-0000-4000-8000-000000000000",
    "ipv4": "192.0.2.1",
    "ipv6": "2001:db8::1",
    "ipvanyaddress": "192.0.2.1",
    "ipvanyinterface": "192.0.2.1/24",
    "ipvanynetwork": "192.0.2.0/24",
    "hostname": "example.com",
}


#: struckdown's own `time` / `datetime` patterns (no `format`, see spec.TEMPORAL_PATTERNS): their samples
_PATTERN_FORMATS = {TEMPORAL_PATTERNS["time"]: "time", TEMPORAL_PATTERNS["datetime"]: "date-time"}


def _parses(kind: str) -> Callable[[str], object]:
    """Whether a bound read from a description really is a value of that format."""
    if kind == "date":
        return dt.date.fromisoformat
    if kind == "date-time":
        return dt.datetime.fromisoformat
    if kind == "time":
        return dt.time.fromisoformat

    def duration(text: str) -> object:
        if not re.fullmatch(r"-?P[0-9TYMWDHS.]+", text):
            raise ValueError(text)
        return text

    return duration


_BOUND = re.compile(r"\b(minimum|maximum) ([^\s,]+)")


def _bounded_format(fmt: str, description: str) -> str:
    """The format's sample, or the inclusive bound the description states (the minimum first)."""
    found: dict[str, str] = {word: value for word, value in _BOUND.findall(description)}
    for word in ("minimum", "maximum"):
        value = found.get(word)
        if value is not None:
            try:
                _parses(fmt)(value)
            except ValueError:
                continue
            return value
    return _FORMATS[fmt]


def sample(schema: Mapping[str, Any] | bool, root: Mapping[str, Any] | None = None) -> Any:
    """A value valid for `schema` (the subset pydantic writes for answers and tool arguments):
    the smallest one, in TestModel's manner, that meets every stated constraint."""
    if isinstance(schema, bool):
        return "a"
    root = schema if root is None else root
    if "const" in schema:
        return schema["const"]
    for key in ("enum", "examples"):
        if schema.get(key):
            return schema[key][0]
    if "$ref" in schema:
        return sample(_resolve(root, schema["$ref"]), root)
    for key in ("anyOf", "oneOf"):
        if schema.get(key) and "type" not in schema:
            options = [s for s in schema[key] if not (isinstance(s, Mapping) and s.get("type") == "null")]
            return sample(_described((options or schema[key])[0], schema), root)
    if schema.get("allOf"):
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            merged.update(_resolve(root, part["$ref"]) if "$ref" in part else part)
        return sample({**merged, **{k: v for k, v in schema.items() if k != "allOf"}}, root)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        return _object(schema, root)
    if kind == "array":
        return _array(schema, root)
    if kind == "string":
        return _string(schema)
    if kind in ("integer", "number"):
        return _number(schema, integer=kind == "integer")
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return "a"


def _described(option: Any, outer: Mapping[str, Any]) -> Any:
    """An option of `anyOf`, carrying the description pydantic put beside the `anyOf`
    (where an optional date states its bounds)."""
    if isinstance(option, Mapping) and "description" in outer and "description" not in option:
        return {**option, "description": outer["description"]}
    return option


def _resolve(root: Mapping[str, Any], ref: str) -> Mapping[str, Any]:
    node: Any = root
    for part in ref.removeprefix("#/").split("/"):
        node = node[part]
    resolved: Mapping[str, Any] = node
    return resolved


def _object(schema: Mapping[str, Any], root: Mapping[str, Any]) -> dict[str, Any]:
    required = set(schema.get("required", ()))
    properties = schema.get("properties", {})
    return {key: sample(value, root) for key, value in properties.items() if key in required}


def _array(schema: Mapping[str, Any], root: Mapping[str, Any]) -> list[Any]:
    low = int(schema.get("minItems", 0))
    high = schema.get("maxItems")
    count = max(low, 1 if high is None or high >= 1 else 0)
    items = schema.get("items", {})
    if schema.get("uniqueItems") and isinstance(items, Mapping) and items.get("enum"):
        return list(items["enum"][:count])
    return [sample(items, root) for _ in range(count)]


def _number(schema: Mapping[str, Any], *, integer: bool) -> int | float:
    low = schema.get("minimum")
    high = schema.get("maximum")
    step = 1 if integer else 0.5
    if "exclusiveMinimum" in schema:  # inside an open bound: halfway to the other bound, at most a step
        bound = schema["exclusiveMinimum"]
        inner = bound + (step if high is None or integer else min(step, (high - bound) / 2))
        low = inner if low is None else max(low, inner)
    if "exclusiveMaximum" in schema:
        bound = schema["exclusiveMaximum"]
        inner = bound - (step if low is None or integer else min(step, (bound - low) / 2))
        high = inner if high is None else min(high, inner)
    value = low if low is not None else (high if high is not None and high < 0 else 0)
    return int(value) if integer else float(value)


def _string(schema: Mapping[str, Any]) -> str:
    low = schema.get("minLength")
    high = schema.get("maxLength")
    fmt = str(schema.get("format", "")) or _PATTERN_FORMATS.get(str(schema.get("pattern", "")), "")
    if fmt in ("date", "date-time", "time", "duration"):
        return _bounded_format(fmt, str(schema.get("description", "")))
    if fmt in _FORMATS:
        return _FORMATS[fmt]
    pattern = schema.get("pattern")
    if pattern is not None:
        found = text_matching(pattern, low, high)
        if found is not None:
            return found
    if high == 0:
        return ""
    return "a" * max(int(low or 1), 1)


# -- a string a regular expression finds ------------------------------------------------------

_CANDIDATES = "aA0 -_.,:/b1xZ@#" + "".join(chr(c) for c in range(33, 127)) + "é字"
_EXTRA_TRIES = 64  # how far unbounded repeats are stretched to reach a minimum length


def text_matching(pattern: str, min_length: int | None = None, max_length: int | None = None) -> str | None:
    """A string that `re.search(pattern, …)` finds, within the lengths; None when the pattern
    is beyond this generator (the caller then falls back to plain text)."""
    try:
        parsed = _parser().parse(pattern)
        matches = pattern_matcher(pattern)
    except Exception:  # noqa: BLE001 - a syntax Python's parser lacks: no sample, not a crash
        return None
    low = min_length or 0
    for extra in range(_EXTRA_TRIES):
        core = _Generator(extra).run(parsed)
        if core is None:
            return None
        for text in (core, core + "a" * (low - len(core)), "a" * (low - len(core)) + core):
            if low <= len(text) and (max_length is None or len(text) <= max_length) and matches(text):
                return text
        if len(core) >= low:
            break
    return None


def _parser() -> Any:
    return importlib.import_module("re._parser")


def _constants() -> Any:
    return importlib.import_module("re._constants")


class _Generator:
    """Walks the parse tree of Python's `re` and writes the shortest text each part matches,
    with every repeat that has room taken `extra` more times."""

    def __init__(self, extra: int) -> None:
        self.extra = extra
        self.groups: dict[int, str] = {}
        self.c = _constants()

    def run(self, parsed: Any) -> str | None:
        try:
            return "".join(self._sequence(parsed))
        except _Unsupported:
            return None

    def _sequence(self, items: Any) -> Iterator[str]:
        for op, value in items:
            yield self._item(op, value)

    def _item(self, op: Any, value: Any) -> str:  # noqa: C901 - one branch per regex node
        c = self.c
        if op is c.LITERAL:
            return chr(value)
        if op is c.NOT_LITERAL:
            return _first(lambda ch: ord(ch) != value)
        if op is c.ANY:
            return "a"
        if op is c.IN:
            return _first(_class_test(value, c))
        if op is c.BRANCH:
            return "".join(self._sequence(value[1][0]))
        if op is c.SUBPATTERN:
            group, _, _, body = value
            text = "".join(self._sequence(body))
            if group is not None:
                self.groups[group] = text
            return text
        if op in (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", c.MAX_REPEAT)):
            low, high, body = value
            count = low + self.extra if high is c.MAXREPEAT else min(high, low + self.extra)
            return "".join("".join(self._sequence(body)) for _ in range(count))
        if op is getattr(c, "ATOMIC_GROUP", None):
            return "".join(self._sequence(value))
        if op is c.GROUPREF:
            return self.groups.get(value, "")
        if op is c.GROUPREF_EXISTS:
            _, yes, _ = value
            return "".join(self._sequence(yes))
        if op in (c.AT, c.ASSERT, c.ASSERT_NOT):
            return ""  # anchors and look-arounds take no text; the final check judges
        raise _Unsupported(op)


class _Unsupported(Exception):
    pass


def _first(accepts: Callable[[str], bool]) -> str:
    for ch in _CANDIDATES:
        if accepts(ch):
            return ch
    raise _Unsupported("no candidate character")


_CATEGORIES: Mapping[str, Callable[[str], bool]] = {
    "CATEGORY_DIGIT": str.isdigit,
    "CATEGORY_NOT_DIGIT": lambda ch: not ch.isdigit(),
    "CATEGORY_SPACE": str.isspace,
    "CATEGORY_NOT_SPACE": lambda ch: not ch.isspace(),
    "CATEGORY_WORD": lambda ch: ch.isalnum() or ch == "_",
    "CATEGORY_NOT_WORD": lambda ch: not (ch.isalnum() or ch == "_"),
}


def _code_between(low: int, high: int) -> Callable[[str], bool]:
    return lambda ch: low <= ord(ch) <= high


def _class_test(items: Any, c: Any) -> Callable[[str], bool]:
    """The membership test of a character class `[...]`."""
    negate = bool(items) and items[0][0] is c.NEGATE
    tests: list[Callable[[str], bool]] = []
    for op, value in items[1:] if negate else items:
        if op is c.LITERAL:
            tests.append(_code_between(value, value))
        elif op is c.RANGE:
            tests.append(_code_between(*value))
        elif op is c.CATEGORY:
            test = _CATEGORIES.get(str(value))
            if test is None:
                raise _Unsupported(value)
            tests.append(test)
        else:
            raise _Unsupported(op)
    return lambda ch: any(t(ch) for t in tests) != negate


class SampleModel(TestModel):
    """pydantic-ai's `TestModel` whose tool-call arguments (typed answers included) are
    valid samples of their JSON schema (`sample`)."""

    __test__ = False

    def gen_tool_args(self, tool_def: ToolDefinition) -> Any:
        return sample(tool_def.parameters_json_schema)
