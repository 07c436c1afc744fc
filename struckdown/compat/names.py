"""struckdown 0.x's public names that have no place in today's API, kept so that 0.x
calling code imports and runs unchanged (SPEC §11, docs/migration.md).

`escape_struckdown_syntax` / `escape_context_dict` / `mark_struckdown_safe` change
nothing now that values never become structure; `CostSummary` sums `Result.usage`;
`parse_options` reads a slot's option words as 0.x's validator did; `LLMConfig` is
0.x's per-slot model settings (also a YAML type's `llm_config:`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..results import Result
from ..types.llm_config import LLMConfig
from .safe import Safe

__all__ = [
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


# -- LLM: 0.x's model object --------------------------------------------------------------------


class LLM(str):
    """0.x's `LLM(model_name)`, deprecated: a model string, so `complete(..., model=LLM("gpt-4o"))`
    runs as `model="gpt-4o"` (with `credentials=` as before). No name: STRUCKDOWN_MODEL /
    DEFAULT_LLM, else 0.x's default `gpt-4.1-mini`. `model_type="decision"` changes nothing
    (`decide` is answered by the run's model); `model_ref` is kept, unread."""

    model_name: str
    model_type: str
    model_ref: str | None

    def __new__(cls, model_name: str | None = None, model_type: str = "llm", model_ref: str | None = None) -> LLM:
        import os

        name = model_name or os.environ.get("STRUCKDOWN_MODEL") or os.environ.get("DEFAULT_LLM") or "gpt-4.1-mini"
        self = super().__new__(cls, name)
        self.model_name, self.model_type, self.model_ref = name, model_type, model_ref
        return self

    def __repr__(self) -> str:
        return f"LLM(model_name={self.model_name!r})"


#: names importable for 0.x code with a DeprecationWarning (struckdown/__init__.py)
DEPRECATED = {"LLM": 'LLM is deprecated: pass model="provider:name" (a string) to complete()'}
