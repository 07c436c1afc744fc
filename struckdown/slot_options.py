"""Which options a slot accepts, and checking their values at parse time.

Options fall in three families (SPEC §2.3): model settings, type options and
control options. Values written as `{{ … }}` are checked when the slot runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .syntax.nodes import JinjaValue

THINKING_LEVELS = ("off", "low", "medium", "high")


def _number(lo: float | None = None, hi: float | None = None) -> Callable[[Any], float]:
    def check(value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError("expected a number")
        if lo is not None and value < lo or hi is not None and value > hi:
            raise ValueError(f"expected a number between {lo} and {hi}")
        return float(value)

    return check


def _integer(lo: int | None = None) -> Callable[[Any], int]:
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError("expected a whole number")
        if lo is not None and value < lo:
            raise ValueError(f"expected a whole number of at least {lo}")
        return value

    return check


def _positive(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError("expected a positive number of seconds")
    return float(value)


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError("expected true or false")
    return value


def _string(value: Any) -> str:
    if isinstance(value, bool):
        raise ValueError("expected text")
    return str(value)


def _on_truncate(value: Any) -> str:
    text = str(value).lower() if isinstance(value, str) else ""
    if text not in ("keep", "error"):
        raise ValueError("expected keep or error")
    return text


def _tool_choice(value: Any) -> str:
    """auto, required, none or a tool's name (checked against the tools when the run starts)."""
    text = value.strip() if isinstance(value, str) else ""
    if not text.isidentifier():
        raise ValueError("expected auto, required, none or a tool name")
    return text


def _models(value: Any) -> str:
    """One model name or several, separated by commas."""
    if isinstance(value, bool) or not [m for m in str(value).split(",") if m.strip()]:
        raise ValueError("expected one or more model names, separated by commas")
    return str(value)


def _thinking(value: Any) -> str:
    text = str(value).lower() if not isinstance(value, bool) else ("high" if value else "off")
    if text not in THINKING_LEVELS:
        raise ValueError(f"expected one of {', '.join(THINKING_LEVELS)}")
    return text


MODEL_SETTINGS: Mapping[str, Callable[[Any], Any]] = {
    "temperature": _number(0, 2),
    "max_tokens": _integer(1),
    "seed": _integer(),
    "top_p": _number(0, 1),
    "model": _string,
    "thinking": _thinking,
}

TYPE_OPTIONS: Mapping[str, Callable[[Any], Any]] = {
    "required": _boolean,
    "min": lambda v: v if not isinstance(v, bool) else _string(v),
    "max": lambda v: v if not isinstance(v, bool) else _string(v),
    "min_length": _integer(0),
    "max_length": _integer(0),
    "pattern": _string,
}

CONTROL_OPTIONS: Mapping[str, Callable[[Any], Any]] = {
    "use_tools": _boolean,
    "max_iter": _integer(1),
    "max_calls": _integer(0),
    "tool_timeout": _positive,
    "when": _boolean,
    # SPEC §14 (resilience): read by run/resilience.py
    "fallback": _models,
    "on_truncate": _on_truncate,
    "tool_choice": _tool_choice,
    "parallel_tools": _boolean,
}

#: tool_choice values that are not a tool's name.
TOOL_CHOICES = ("auto", "required", "none")

#: The default output cap of one request (`max_tokens`) by the slot's type family, when
#: neither the slot, the call, the Environment nor the model object sets one (issue 23).
DEFAULT_MAX_TOKENS: Mapping[str, int] = {"text": 4096, "structured": 4096, "value": 1024}
#: The default cap when the slot or the call turns thinking on: reasoning tokens count too.
THINKING_MAX_TOKENS = 16384
#: Types whose answer is one short value (a list of them is "structured").
VALUE_TYPES = frozenset({"bool", "int", "number", "pick", "date", "datetime", "time", "duration", "score", "halt"})


def type_family(type_name: str, quantifier: Any, is_text: bool) -> str:
    """"text", "value" or "structured": what sizes a slot's default `max_tokens`."""
    if is_text and quantifier is None:
        return "text"
    if quantifier is None and type_name in VALUE_TYPES:
        return "value"
    return "structured"


def default_max_tokens(family: str, thinking: Any = None) -> int:
    return THINKING_MAX_TOKENS if thinking and thinking != "off" else DEFAULT_MAX_TOKENS[family]


def check_option(key: str, value: Any) -> Any:
    """Validate one keyed option value; raises ValueError with a readable reason."""
    if isinstance(value, JinjaValue):
        return value
    for family in (MODEL_SETTINGS, TYPE_OPTIONS, CONTROL_OPTIONS):
        if key in family:
            return family[key](value)
    raise KeyError(key)


def valid_keys(type_name: str, type_options: frozenset[str]) -> list[str]:
    """Every keyed option a slot of this type accepts (for messages and hints)."""
    keys = [*MODEL_SETTINGS, "required", *sorted(type_options)]
    keys += ["use_tools", "max_iter", "max_calls", "tool_timeout", "fallback", "on_truncate", "tool_choice", "parallel_tools"]
    if type_name == "halt":
        keys.append("when")
    return keys


def combination_problem(options: Any) -> tuple[str, Any] | None:
    """(message, option) for keyed options that cannot go together (each value is already
    valid on its own): a tool_choice that forces a tool on a slot without use_tools=true."""
    given = {o.key: o for o in options if o.key is not None}
    choice = given.get("tool_choice")
    if choice is None or isinstance(choice.value, JinjaValue) or choice.value in ("auto", "none"):
        return None
    tools = given.get("use_tools")
    if tools is None or tools.value is False:
        return f"tool_choice={choice.value} needs use_tools=true", choice
    return None


def option_family(key: str) -> str:
    """"settings", "type" or "control": where a checked keyed option belongs."""
    if key in MODEL_SETTINGS:
        return "settings"
    if key in TYPE_OPTIONS:
        return "type"
    assert key in CONTROL_OPTIONS, key
    return "control"


def split_options(options: Any) -> tuple[tuple[Any, ...], dict[str, dict[str, Any]], bool]:
    """(positional values, {family: {key: value}}, whether any value waits for `{{ }}`).
    `required` is not a type option of the built type: the slot carries it."""
    positional: list[Any] = []
    families: dict[str, dict[str, Any]] = {"type": {}, "settings": {}, "control": {}}
    dynamic = False
    for option in options:
        dynamic = dynamic or isinstance(option.value, JinjaValue)
        if option.key is None:
            positional.append(option.value)
        else:
            families[option_family(option.key)][option.key] = option.value
    families["type"].pop("required", None)
    return tuple(positional), families, dynamic
