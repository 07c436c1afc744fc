"""Which options a slot accepts, and checking their values at parse time.

Options fall in three families (SPEC §2.3): model settings, type options and
control options. Values written as `{{ … }}` are checked when the slot runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .syntax.nodes import JinjaValue
from .types.table import names as _type_names

THINKING_LEVELS = ("off", "minimal", "low", "medium", "high", "xhigh")  # pydantic-ai's levels (0.x's too)


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
    if isinstance(value, int) and not isinstance(value, bool) and value in (0, 1):
        return bool(value)  # 0.x wrote flags as 1/0 too (yes/no/on/off are read as booleans)
    if not isinstance(value, bool):
        raise ValueError("expected true or false (or yes/no, on/off, 1/0)")
    return value


def _string(value: Any) -> str:
    if isinstance(value, bool):
        raise ValueError("expected text")
    return str(value)


def tool_names(value: Any) -> tuple[str, ...]:
    """`approve=` (SPEC §12): one tool name, a quoted list `"a, b"`, or `"*"` (every tool
    of the slot that is not @readonly). Whether the names are tools of the run is checked
    when the run starts, before any model call: the tools are the run's."""
    if isinstance(value, (tuple, list)):
        value = ", ".join(str(v) for v in value)
    if isinstance(value, bool) or not isinstance(value, str):
        raise ValueError('expected a tool name, a quoted list "a, b" or "*"')
    names = tuple(name.strip() for name in value.split(","))
    if names == ("*",):
        return names
    for name in names:
        if not name.isidentifier():
            raise ValueError(
                f'{name!r} is not a tool name; expected a tool name, a quoted list "a, b" or "*"'
                if name
                else 'an empty name; expected a tool name, a quoted list "a, b" or "*"'
            )
    return names


def _budget(value: Any) -> dict[str, int]:
    """`budget="search=3, fetch=1"`: calls per tool in this slot (SPEC §13)."""
    if isinstance(value, dict):  # already checked (a `{{ }}` value checked at run time)
        items = list(value.items())
    elif isinstance(value, str):
        items = []
        for part in value.split(","):
            name, sep, count = part.strip().partition("=")
            if not part.strip():
                continue
            if not sep or not name.strip() or not count.strip():
                raise ValueError(f"expected tool=count pairs like \"search=3, fetch=1\", not {part.strip()!r}")
            items.append((name.strip(), count.strip()))
    else:
        raise ValueError('expected tool=count pairs like "search=3, fetch=1"')
    budgets: dict[str, int] = {}
    for name, count in items:
        text = str(count)
        if isinstance(count, bool) or not text.isdigit():
            raise ValueError(f"budget for {name!r} must be a whole number of at least 0, not {count!r}")
        if name in budgets:
            raise ValueError(f"budget names {name!r} twice")
        budgets[str(name)] = int(text)
    if not budgets:
        raise ValueError('expected tool=count pairs like "search=3, fetch=1"')
    return budgets


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


def server_names(value: Any) -> tuple[str, ...]:
    """`mcp=notes` or `mcp="notes, files"` (a list from `{{ }}` too): MCP server names."""
    if isinstance(value, bool) or not isinstance(value, (str, int, list, tuple)):
        raise ValueError('expected MCP server names: mcp=name or mcp="a, b"')
    items = value.split(",") if isinstance(value, str) else [value] if isinstance(value, int) else value
    names = tuple(str(item).strip() for item in items if str(item).strip())
    if not names:
        raise ValueError('expected MCP server names: mcp=name or mcp="a, b"')
    for name in names:
        if not all(ch.isalnum() or ch in "_-" for ch in name) or not name.isascii():
            raise ValueError(f"{name!r} is not an MCP server name (letters, digits, _ and -)")
    return names


#: The slot types whose answer is a few tokens: a probability of the answer means something (SPEC §27).
CONFIDENCE_TYPES = frozenset({"pick", "bool", "boolean", "int", "score"})


def check_confidence(value: Any) -> str:
    """`confidence=logprobs` or `confidence=vote:N` (N at least 2)."""
    text = value.strip().lower() if isinstance(value, str) else ""
    if text == "logprobs":
        return text
    kind, sep, count = text.partition(":")
    if kind == "vote" and sep and count.strip().isdigit() and int(count) >= 2:
        return f"vote:{int(count)}"
    raise ValueError("expected logprobs or vote:N (N a whole number of at least 2)")


def check_escalate(value: Any) -> str:
    """`escalate=approve` (a person picks the answer) or a model name."""
    if isinstance(value, bool) or not str(value).strip():
        raise ValueError("expected a model name or approve")
    return str(value).strip()


def _confidence_problem(given: Mapping[str, Any]) -> tuple[str, Any] | None:
    """(message, option) when the confidence options do not go together."""
    if "escalate" in given and "min_confidence" not in given:
        return "escalate= needs min_confidence= (the confidence below which the answer escalates)", given["escalate"]
    if "min_confidence" in given and "escalate" not in given:
        return "min_confidence= needs escalate=MODEL or escalate=approve", given["min_confidence"]
    if "min_confidence" in given and "confidence" not in given:
        return "min_confidence= needs confidence=logprobs or confidence=vote:N", given["min_confidence"]
    return None


@dataclass(frozen=True)
class SlotOption:
    """Every fact of one slot option (SPEC §2.3, §22), in one row: the check stage, the plan,
    the language server's hovers and completions and `sd explain` all read it here."""

    name: str
    family: Literal["settings", "type", "control"]  # model setting, type option, control option
    check: Callable[[Any], Any]  # the value checked (and normalised) at parse time
    doc: str  # one line for hovers and docs
    choices: tuple[str, ...] = ()  # the values a completion offers
    names_tools: bool = False  # its value names tools of the run (checked against them, completed from them)
    # SPEC §30: what its value reaches ("model", "file", "code", "network"): the host's policy
    # (`sd serve --models`, no files, no code) checks every marked row (struckdown/authority.py)
    authority: frozenset[str] = frozenset()


_BOOL = ("true", "false")
_MODEL = frozenset({"model"})
_S = SlotOption
#: Every slot option, once.
SLOT_OPTIONS: Mapping[str, SlotOption] = {o.name: o for o in (
    _S("temperature", "settings", _number(0, 2), "Sampling temperature, 0 to 2."),
    _S("max_tokens", "settings", _integer(1), "Most tokens the answer may use (a whole number of at least 1)."),
    _S("seed", "settings", _integer(), "Sampling seed (a whole number)."),
    _S("top_p", "settings", _number(0, 1), "Nucleus sampling, 0 to 1."),
    _S("model", "settings", _string, "The model for this slot only (a pydantic-ai model string).",
       authority=_MODEL),
    _S("thinking", "settings", _thinking, "Reasoning effort: off, low, medium or high.", THINKING_LEVELS),
    _S("required", "type", _boolean, "`required=true`: the answer may not be null (same as `!`).", _BOOL),
    _S("min", "type", lambda v: v if not isinstance(v, bool) else _string(v),
       "Lowest value allowed (numbers, dates, times, durations)."),
    _S("max", "type", lambda v: v if not isinstance(v, bool) else _string(v),
       "Highest value allowed (numbers, dates, times, durations)."),
    _S("min_length", "type", _integer(0), "Fewest characters a text answer may have."),
    _S("max_length", "type", _integer(0), "Most characters a text answer may have."),
    _S("pattern", "type", _string, 'A regular expression the text answer must match: `pattern="^[A-Z]+$"`.'),
    _S("use_tools", "control", _boolean, "`use_tools=true`: an agent slot that may call the run's tools.", _BOOL),
    _S("max_iter", "control", _integer(1),
       "Most model requests for this slot; lowers the caller's ceiling, never raises it."),
    _S("max_calls", "control", _integer(0),
       "Most tool calls for this slot; lowers the caller's ceiling, never raises it."),
    _S("tool_timeout", "control", _positive,
       "Seconds one tool call may take before it is cancelled (the model reads a TimeoutError); "
       "lowers the caller's ceiling, never raises it."),
    _S("max_seconds", "control", _positive,
       "Seconds this slot's answer may take: at the deadline a free-text answer ends as truncated "
       "(on_truncate= applies), a typed one is a TruncatedError; lowers the caller's max_seconds, never raises it."),
    _S("budget", "control", _budget,
       'Calls per tool in this slot: `budget="search=3, fetch=1"`; a call past it does not run '
       "(the model reads why); lowers the caller's `tool_limits=`, never raises them.", names_tools=True),
    _S("when", "control", _boolean, "A guard halts the run when `triggered` equals this (default true).", _BOOL),
    _S("mcp", "control", server_names,
       '`mcp=name` or `mcp="a, b"`: an agent slot that may use these MCP servers\' tools (`<server>_<tool>`).'),
    _S("approve", "control", tool_names,
       'Calls of these tools wait for a person\'s yes: one name, a quoted list `"a, b"`, or `"*"` '
       "(every tool of the slot that is not @readonly); adds to the host's, never removes.", names_tools=True),
    # SPEC §14 (resilience): read by run/attempts.py
    _S("fallback", "control", _models,
       'Models this slot runs on, in order, when it cannot finish on its own: `fallback="m1, m2"`.',
       authority=_MODEL),
    _S("on_truncate", "control", _on_truncate,
       "An answer cut at its token limit: `keep` it (flagged truncated, the default) or `error`.", ("keep", "error")),
    _S("tool_choice", "control", _tool_choice,
       "`auto`, `required` or a tool's name (first request only), or `none` (no tools).", names_tools=True),
    _S("parallel_tools", "control", _boolean,
       "`parallel_tools=false`: the tool calls of one response run one after another, in order.", _BOOL),
    # SPEC §24 (docs/caching.md): read by run/prompt_cache.py
    _S("prompt_cache", "control", _boolean,
       "`prompt_cache=false`: this slot's requests ask the provider for no prompt caching "
       "(`true` asks even when the run's `prompt_cache=False`).", _BOOL),
    # SPEC §27 (confidence): read by run/confidence.py
    _S("confidence", "control", check_confidence,
       "`logprobs` (the answer's probability from token logprobs) or `vote:N` (the share of N answers "
       "that agree): `SlotResult.confidence`, 0 to 1.", ("logprobs", "vote:3", "vote:5")),
    _S("min_confidence", "control", _number(0, 1),
       "An answer less confident than this (0 to 1) escalates (`escalate=`)."),
    _S("escalate", "control", check_escalate,
       "Where a less confident answer goes: a model name (asked again there) or `approve` (a person picks it).",
       ("approve",), authority=_MODEL),
)}


def _family(name: str) -> Mapping[str, Callable[[Any], Any]]:
    return {key: option.check for key, option in SLOT_OPTIONS.items() if option.family == name}


#: The three families as name → check (views of `SLOT_OPTIONS`).
MODEL_SETTINGS = _family("settings")
TYPE_OPTIONS = _family("type")
CONTROL_OPTIONS = _family("control")

#: tool_choice values that are not a tool's name.
TOOL_CHOICES = ("auto", "required", "none")

#: The default output cap of one request (`max_tokens`) by the slot's type family, when
#: neither the slot, the call, the Environment nor the model object sets one (issue 23).
DEFAULT_MAX_TOKENS: Mapping[str, int] = {"text": 4096, "structured": 4096, "value": 1024}
#: The default cap when the slot or the call turns thinking on: reasoning tokens count too.
THINKING_MAX_TOKENS = 16384
#: Types whose answer is one short value (a list of them is "structured").
VALUE_TYPES = _type_names(family="value")


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
    keys += [
        "use_tools", "max_iter", "max_calls", "tool_timeout", "mcp", "approve", "budget",
        "fallback", "on_truncate", "tool_choice", "parallel_tools", "max_seconds", "prompt_cache",
    ]
    if type_name == "halt":
        keys.append("when")
    if type_name in CONFIDENCE_TYPES:
        keys += ["confidence", "min_confidence", "escalate"]
    return keys


def combination_problem(options: Any) -> tuple[str, Any] | None:
    """(message, option) for keyed options that cannot go together (each value is already
    valid on its own): a tool_choice that forces a tool on a slot without use_tools=true."""
    given = {o.key: o for o in options if o.key is not None}
    confidence = _confidence_problem(given)
    if confidence is not None:
        return confidence
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
