"""struckdown 0.x's public names that have no place in today's API, kept so that 0.x
calling code imports and runs unchanged (SPEC §11, docs/migration.md).

`Actions` registers on the default Environment (`sd.register_action`);
`escape_struckdown_syntax` / `escape_context_dict` / `mark_struckdown_safe` change
nothing now that values never become structure; `CostSummary` sums `Result.usage`;
`parse_options` reads a slot's option words as 0.x's validator did; `LLMConfig` is
0.x's per-slot model settings (also a YAML type's `llm_config:`).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..notices import warn
from ..results import Result
from .llm_config import LLMConfig
from .safe import Safe

__all__ = [
    "ACTION_LOOKUP",
    "Actions",
    "CostSummary",
    "LLMConfig",
    "ParsedOptions",
    "escape_context_dict",
    "escape_struckdown_syntax",
    "mark_struckdown_safe",
    "parse_options",
]


# -- escaping: a no-op now (values are opaque text, SPEC §2.6) ----------------------------------


def mark_struckdown_safe(value: Any) -> Any:
    """0.x's opt-out of escaping; values are never parsed now, so text comes back as `Safe`
    (a plain string) and anything else unchanged."""
    return Safe(value) if isinstance(value, str) else value


def escape_struckdown_syntax(value: Any, var_name: str = "") -> tuple[Any, bool]:
    """0.x returned `(escaped, was_escaped)`; nothing needs escaping now: `(value, False)`."""
    return value, False


def escape_context_dict(context: Mapping[str, Any]) -> dict[str, Any]:
    """0.x escaped every value of a context; now a plain copy."""
    return dict(context)


# -- actions ------------------------------------------------------------------------------------

OnError = Literal["propagate", "return_empty", "return_default"]


def _environment() -> Any:
    from ..environment import default_environment

    return default_environment()


class Actions:
    """0.x's action registry, on the default Environment (`sd.register_action`)."""

    @staticmethod
    def register(
        name: str | Callable[..., Any] | None = None,
        *,
        on_error: OnError = "propagate",
        default: Any = "",
        role: Literal["user", "assistant", "none"] | None = "user",
        side_effects: bool = False,
        default_save: bool = True,
        return_type: Any = None,
        allow_remote_use: bool = True,
    ) -> Any:
        """`@Actions.register("name", on_error=…, default=…)` on a function `(context, …)`.

        `on_error="return_empty"` turns a failure into `""` and `"return_default"` into
        `default`, each with a warning; `"propagate"` fails the run. `default_save`,
        `return_type` and `allow_remote_use` are accepted and change nothing (0.x stored
        them unread, or they belonged to its playground)."""
        if on_error not in ("propagate", "return_empty", "return_default"):
            raise ValueError(f"on_error is 'propagate', 'return_empty' or 'return_default', not {on_error!r}")

        def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
            action = name if isinstance(name, str) else func.__name__
            _environment().register_action(
                action, _guarded(action, func, on_error, default), side_effects=side_effects, role=role
            )
            return func

        if callable(name):  # `@Actions.register` without arguments
            return decorate(name)
        return decorate

    @staticmethod
    def is_registered(name: str) -> bool:
        return name in _environment().actions

    @staticmethod
    def list_registered() -> list[str]:
        return list(_environment().actions.names())


def _guarded(name: str, func: Callable[..., Any], on_error: OnError, default: Any) -> Callable[..., Any]:
    if on_error == "propagate":
        return func

    def fallback(exc: Exception) -> Any:
        value = "" if on_error == "return_empty" else default
        warn(f"action @{name} failed ({type(exc).__name__}: {exc}); using {value!r}")
        return value

    if inspect.iscoroutinefunction(func):

        @functools.wraps(func)
        async def run_async(*args: Any, **kwargs: Any) -> Any:
            try:
                return await func(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - on_error says what a failure gives
                return fallback(exc)

        return run_async

    @functools.wraps(func)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - on_error says what a failure gives
            return fallback(exc)

    return run


class _ActionLookup(Mapping[str, Callable[..., Any]]):
    """0.x's `ACTION_LOOKUP`: action name → function, live over the default Environment."""

    def __getitem__(self, name: str) -> Callable[..., Any]:
        actions = _environment().actions
        if name not in actions:
            raise KeyError(name)
        func: Callable[..., Any] = inspect.unwrap(actions.get(name).func)  # the function as registered
        return func

    def __iter__(self) -> Iterator[str]:
        return iter(_environment().actions.names())

    def __len__(self) -> int:
        return len(_environment().actions.names())


ACTION_LOOKUP: Mapping[str, Callable[..., Any]] = _ActionLookup()


# -- option words -------------------------------------------------------------------------------

_KEYS = {
    "min": "ge", "ge": "ge", "max": "le", "le": "le", "gt": "gt", "lt": "lt",
    "min_length": "min_length", "minlength": "min_length",
    "max_length": "max_length", "maxlength": "max_length",
    "pattern": "pattern", "regex": "pattern", "required": "required",
}
_TRUE = frozenset({"true", "yes", "on", "1", "t", "y"})
_FALSE = frozenset({"false", "no", "off", "0", "f", "n"})


@dataclass
class ParsedOptions:
    """A slot's options as 0.x's `parse_options` read them."""

    required: bool = False
    ge: float | None = None
    le: float | None = None
    gt: float | None = None
    lt: float | None = None
    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None
    positionals: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)


def _literal(text: str) -> Any:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    lowered = text.lower()
    if lowered in ("true", "yes", "on"):
        return True
    if lowered in ("false", "no", "off"):
        return False
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return text


def parse_options(options: str | Sequence[str] | Iterable[str] | None) -> ParsedOptions:
    """`["min=0", "max=5", "required"]` (or `"min=0, max=5, required"`) as 0.x read them:
    keys case-insensitive, `min`/`ge`, `max`/`le`, `minlength`, `maxlength`, `regex`
    spelled either way; a bare `required` (or `required=yes`) is the required flag;
    other `key=value` words land in `kwargs`, the rest in `positionals`."""
    if options is None:
        words: list[str] = []
    elif isinstance(options, str):
        words = [w for w in (p.strip() for p in options.split(",")) if w]
    else:
        words = [str(w).strip() for w in options if str(w).strip()]
    parsed = ParsedOptions()
    for word in words:
        key, sep, raw = word.partition("=")
        if not sep:
            if word.lower() == "required":
                parsed.required = True
            else:
                parsed.positionals.append(_literal(word))
            continue
        name = _KEYS.get(key.strip().lower())
        value = _literal(raw)
        if name is None:
            parsed.kwargs[key.strip().lower()] = value
        elif name == "required":
            parsed.required = str(raw).strip().lower() in _TRUE
        elif name in ("min_length", "max_length"):
            setattr(parsed, name, int(value))
        elif name == "pattern":
            setattr(parsed, name, str(value))
        else:
            setattr(parsed, name, value)
    return parsed


# -- cost summary -------------------------------------------------------------------------------


@dataclass
class CostSummary:
    """0.x's summary of what one or more runs cost (`CostSummary.from_results([...])`)."""

    total_cost: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    fresh_call_count: int = 0
    cached_call_count: int = 0
    has_unknown_costs: bool = False
    all_costs_unknown: bool = False

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def fresh_cost(self) -> float:
        return self.total_cost

    @property
    def cached_cost(self) -> float:
        return 0.0

    @classmethod
    def from_results(cls, results: Result | Iterable[Result]) -> CostSummary:
        runs = [results] if isinstance(results, Result) else [r for r in results if isinstance(r, Result)]
        summary = cls()
        priced = unknown = 0
        for run in runs:
            for slot in run.results.values():
                if slot.cached:
                    summary.cached_call_count += 1
                elif slot.usage.requests:
                    summary.fresh_call_count += 1
                    if slot.usage.cost is None:
                        unknown += 1
                    else:
                        priced += 1
                        summary.total_cost += slot.usage.cost
                summary.prompt_tokens += slot.usage.input_tokens
                summary.completion_tokens += slot.usage.output_tokens
        summary.has_unknown_costs = unknown > 0
        summary.all_costs_unknown = unknown > 0 and priced == 0
        return summary

    def format_summary(self) -> str:
        tokens = f"{self.prompt_tokens} in / {self.completion_tokens} out"
        if self.all_costs_unknown:
            line = f"Total cost: unknown ({tokens})"
        elif self.has_unknown_costs:
            line = f"Total cost: >=${self.total_cost:.4f} ({tokens}, some costs unknown)"
        else:
            line = f"Total cost: ${self.total_cost:.4f} ({tokens})"
        if self.cached_call_count:
            line += f"\n  This run: ${self.fresh_cost:.4f} ({self.fresh_call_count} fresh, {self.cached_call_count} cached)"
        return line
