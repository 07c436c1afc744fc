"""What an answer must be (SPEC §23): the assertion kinds of `expect:` and their checks.

A slot's expectation is a plain value (equality: the gold answer), or a mapping of checks
that must all hold (`{min: 2, max: 4}`); a mapping with none of the check names is a JSON
subset the answer must contain. Three keys check the run, not a slot: `tools` (the
trajectory: `SlotResult.tool_calls` of every slot), `halted` and `usage`. `judge` asks a
model whether the answer meets a rubric (the runner does that; its cost is shown apart).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..wording import counted

SLOT_CHECKS = (
    "equals", "one_of", "contains", "not_contains", "matches", "min", "max", "length", "type", "subset", "judge",
    "model",
)
RUN_KEYS = ("tools", "halted", "usage")
TOOL_CHECKS = ("called", "not_called", "order", "args")
USAGE_CHECKS = ("max_requests", "max_cost", "max_seconds")
TYPES: Mapping[str, tuple[type, ...]] = {
    "str": (str,), "string": (str,), "int": (int,), "integer": (int,), "float": (float,),
    "number": (int, float), "bool": (bool,), "boolean": (bool,), "list": (list, tuple), "array": (list, tuple),
    "dict": (dict,), "object": (dict,), "null": (type(None),),
}


@dataclass(frozen=True)
class Expectation:
    key: str
    checks: tuple[tuple[str, Any], ...]  # (check name, its argument), all must hold

    @property
    def kind(self) -> str:
        return self.checks[0][0] if len(self.checks) == 1 else "all"

    @property
    def value(self) -> Any:
        return dict(self.checks).get("equals")

    @property
    def judge(self) -> tuple[str, str | None] | None:
        found = dict(self.checks)
        return (found["judge"], found.get("model")) if "judge" in found else None


def parse_expectation(key: str, raw: Any) -> Expectation:
    """An `expect.<key>` value, checked (a ValueError says what was expected)."""
    if key == "tools":
        return Expectation(key, tuple(_tools(raw).items()))
    if key == "halted":
        if isinstance(raw, bool):
            return Expectation(key, (("halted", raw),))
        if isinstance(raw, Mapping) and set(raw) <= {"reason", "slot"} and raw:
            return Expectation(key, (("halted", True), *((k, str(v)) for k, v in raw.items())))
        raise ValueError("true, false, or {reason: TEXT the reason contains, slot: GUARD}")
    if key == "usage":
        if not isinstance(raw, Mapping) or not raw or not set(raw) <= set(USAGE_CHECKS):
            raise ValueError(f"a mapping of {', '.join(USAGE_CHECKS)}")
        for name, value in raw.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"{name}: a number of at least 0, not {value!r}")
        return Expectation(key, tuple(raw.items()))
    if not isinstance(raw, Mapping):
        return Expectation(key, (("equals", raw),))
    names = set(raw)
    if not names & set(SLOT_CHECKS):
        import difflib

        for name in sorted(map(str, names)):  # `{contain: refund}` is a check misspelt, not a subset
            close = difflib.get_close_matches(name, SLOT_CHECKS, n=1, cutoff=0.8)
            if close:
                raise ValueError(
                    f"unknown check {name!r} (did you mean {close[0]!r}?); a mapping of no check names is a "
                    f"JSON subset of an object answer: write `subset: {{{name}: …}}` if that is what you mean"
                )
        return Expectation(key, (("subset", dict(raw)),))
    unknown = sorted(names - set(SLOT_CHECKS))
    if unknown:
        raise ValueError(f"unknown check {unknown[0]!r}; expected {', '.join(SLOT_CHECKS)} (or a plain value)")
    if "model" in names and "judge" not in names:
        raise ValueError("`model:` names the judge's model: give `judge: RUBRIC` beside it")
    for name, value in raw.items():
        _check_argument(name, value)
    return Expectation(key, tuple(raw.items()))


def _check_argument(name: str, value: Any) -> None:
    if name == "one_of" and not isinstance(value, list):
        raise ValueError("one_of: a list of allowed answers")
    if name in ("contains", "not_contains") and not isinstance(value, (str, list)):
        raise ValueError(f"{name}: a text (or a list of texts)")
    if name == "matches":
        if not isinstance(value, str):
            raise ValueError("matches: a regular expression")
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"matches: not a regular expression: {exc}") from None
    if name in ("min", "max") and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise ValueError(f"{name}: a number, not {value!r}")
    if name == "length":
        ok = isinstance(value, int) and not isinstance(value, bool) or (
            isinstance(value, Mapping) and value and set(value) <= {"min", "max"}
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value.values())
        )
        if not ok:
            raise ValueError("length: a whole number or {min: N, max: N}")
    if name == "type" and value not in TYPES:
        raise ValueError(f"type: one of {', '.join(TYPES)}, not {value!r}")
    if name in ("judge", "model") and (not isinstance(value, str) or not value.strip()):
        raise ValueError(f"{name}: a text")


def _tools(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, Mapping) or not raw or not set(raw) <= set(TOOL_CHECKS):
        raise ValueError(f"a mapping of {', '.join(TOOL_CHECKS)}")
    for name in ("called", "not_called", "order"):
        if name in raw and (not isinstance(raw[name], list) or not all(isinstance(n, str) for n in raw[name])):
            raise ValueError(f"tools.{name}: a list of tool names")
    if "args" in raw and (not isinstance(raw["args"], Mapping) or not all(isinstance(v, Mapping) for v in raw["args"].values())):
        raise ValueError("tools.args: {tool: {argument: value, …}} (a subset of some call's arguments)")
    return dict(raw)


# -- checking --------------------------------------------------------------------------
MISSING = object()


def check_answer(expectation: Expectation, answer: Any) -> str | None:
    """Why a slot's answer fails its expectation (None: it passes). `judge` is not checked here."""
    if answer is MISSING:
        return "no answer (the slot did not run)"
    for name, argument in expectation.checks:
        reason = _check_one(name, argument, answer)
        if reason is not None:
            return reason
    return None


def _check_one(name: str, argument: Any, answer: Any) -> str | None:
    plain = _plain(answer)
    if name == "equals":
        return None if same(argument, plain) else f"expected {_short(argument)}, got {_short(plain)}"
    if name == "one_of":
        return None if any(same(a, plain) for a in argument) else f"expected one of {_short(argument)}, got {_short(plain)}"
    if name in ("contains", "not_contains"):
        text = plain if isinstance(plain, str) else json.dumps(plain, ensure_ascii=False, default=str)
        wanted = argument if isinstance(argument, list) else [argument]
        for item in wanted:
            present = str(item).lower() in text.lower()
            if name == "contains" and not present:
                return f"does not contain {item!r}: {_short(plain)}"
            if name == "not_contains" and present:
                return f"contains {item!r}: {_short(plain)}"
        return None
    if name == "matches":
        text = plain if isinstance(plain, str) else str(plain)
        return None if re.search(argument, text) else f"does not match {argument!r}: {_short(plain)}"
    if name in ("min", "max"):
        number = _number(plain)
        if number is None:
            return f"expected a number, got {_short(plain)}"
        if name == "min" and number < argument:
            return f"{_short(plain)} is below the minimum {argument}"
        if name == "max" and number > argument:
            return f"{_short(plain)} is above the maximum {argument}"
        return None
    if name == "length":
        if not hasattr(plain, "__len__"):
            return f"{_short(plain)} has no length"
        size = len(plain)
        low, high = (argument, argument) if isinstance(argument, int) else (argument.get("min"), argument.get("max"))
        if (low is not None and size < low) or (high is not None and size > high):
            return f"length {size}, expected {argument}"
        return None
    if name == "type":
        allowed = TYPES[argument]
        wrong = isinstance(plain, bool) and bool not in allowed
        return None if isinstance(plain, allowed) and not wrong else f"expected a {argument}, got {type(plain).__name__}"
    if name == "subset":
        problem = _subset(argument, plain, "")
        return None if problem is None else problem
    return None  # judge / model: the runner's


def same(gold: Any, answer: Any) -> bool:
    """Equality as a gold answer means it (True is not 1); a table's text gold `"3"` or
    `"true"` equals 3 or True."""
    if isinstance(gold, bool) or isinstance(answer, bool):
        if isinstance(gold, bool) and isinstance(answer, bool):
            return gold is answer
    elif gold == answer:
        return True
    if isinstance(gold, str) and not isinstance(answer, str):
        return gold.strip().lower() == json.dumps(answer, ensure_ascii=False, default=str).strip('"').lower()
    return False


def _subset(expected: Any, actual: Any, path: str) -> str | None:
    if isinstance(expected, Mapping):
        if not isinstance(actual, Mapping):
            return f"{path or 'the answer'}: expected an object, got {_short(actual)}"
        for key, value in expected.items():
            if key not in actual:
                return f"{path + '.' if path else ''}{key}: missing"
            problem = _subset(value, actual[key], f"{path + '.' if path else ''}{key}")
            if problem is not None:
                return problem
        return None
    if isinstance(expected, list):
        if not isinstance(actual, (list, tuple)):
            return f"{path or 'the answer'}: expected a list, got {_short(actual)}"
        for item in expected:  # every expected item matches some item of the answer
            if not any(_subset(item, candidate, path) is None for candidate in actual):
                return f"{path or 'the answer'}: no item matches {_short(item)}"
        return None
    return None if same(expected, actual) else f"{path or 'the answer'}: expected {_short(expected)}, got {_short(actual)}"


def check_tools(expectation: Expectation, calls: Sequence[Any]) -> str | None:
    """The trajectory: tools called / not called, in order, with arguments."""
    names = [c.tool_name for c in calls]
    found = dict(expectation.checks)
    for name in found.get("called", ()):
        if name not in names:
            return f"{name} was not called (calls: {', '.join(names) or 'none'})"
    for name in found.get("not_called", ()):
        if name in names:
            return f"{name} was called"
    order = list(found.get("order", ()))
    if order:
        position = 0
        for name in names:
            if position < len(order) and name == order[position]:
                position += 1
        if position < len(order):
            return f"calls not in the order {' → '.join(order)} (calls: {', '.join(names) or 'none'})"
    for tool, arguments in (found.get("args") or {}).items():
        made = [c.arguments for c in calls if c.tool_name == tool]
        if not made:
            return f"{tool} was not called"
        if not any(_subset(dict(arguments), args, "") is None for args in made):
            return f"no call of {tool} had arguments {_short(dict(arguments))} (calls: {_short(made)})"
    return None


def check_halted(expectation: Expectation, halted: Any) -> str | None:
    found = dict(expectation.checks)
    if not found["halted"]:
        return None if halted is None else f"halted by {halted.slot}: {halted.reason}"
    if halted is None:
        return "did not halt"
    if "slot" in found and halted.slot != found["slot"]:
        return f"halted by {halted.slot}, not {found['slot']}"
    if "reason" in found and found["reason"].lower() not in str(halted.reason).lower():
        return f"the reason {halted.reason!r} does not contain {found['reason']!r}"
    return None


def check_usage(expectation: Expectation, requests: int, cost: float | None, seconds: float) -> str | None:
    found = dict(expectation.checks)
    if "max_requests" in found and requests > found["max_requests"]:
        return f"{counted(requests, 'request')}, at most {found['max_requests']} expected"
    if "max_cost" in found:
        if cost is None:
            return "the cost is unknown (no price for the model): max_cost cannot be checked"
        if cost > found["max_cost"]:
            return f"cost ${cost:.4f}, at most ${found['max_cost']} expected"
    if "max_seconds" in found and seconds > found["max_seconds"]:
        return f"took {seconds:.2f} s, at most {found['max_seconds']} s expected"
    return None


def _plain(value: Any) -> Any:
    from ..codec import jsonable

    return jsonable(value)


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(str(value).strip())
    except ValueError:
        return None


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"
