"""An agent slot's budget: the caller's ceiling, lowered (never raised) by the template.

Plain data, so the plan stage can clamp without importing pydantic-ai; the engine
turns a `Limits` into `pydantic_ai.usage.UsageLimits` when the slot runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .log import logger
from .notices import warn as warn_at


@dataclass(frozen=True)
class Limits:
    """The fields of `pydantic_ai.usage.UsageLimits` that struckdown reads and sets."""

    request_limit: int | None = None
    tool_calls_limit: int | None = None
    input_tokens_limit: int | None = None
    output_tokens_limit: int | None = None
    total_tokens_limit: int | None = None

    @classmethod
    def of(cls, limits: Any) -> Limits:
        """A `UsageLimits` (or anything with its fields) as a `Limits`; None → the default ceiling."""
        if limits is None:
            return DEFAULT_CEILING
        if isinstance(limits, Limits):
            return limits
        return cls(
            limits.request_limit,
            limits.tool_calls_limit,
            limits.input_tokens_limit,
            limits.output_tokens_limit,
            limits.total_tokens_limit,
        )

    def usage_limits(self) -> Any:
        """The `UsageLimits` of these limits: made once per `Limits` (a plan's are reused by
        every run of its slot; pydantic-ai only reads it)."""
        made = self.__dict__.get("_usage_limits")
        if made is None:
            made = self.__dict__["_usage_limits"] = self._make_usage_limits()
        return made

    def _make_usage_limits(self) -> Any:
        from pydantic_ai.usage import UsageLimits

        return UsageLimits(
            request_limit=self.request_limit,
            tool_calls_limit=self.tool_calls_limit,
            input_tokens_limit=self.input_tokens_limit,
            output_tokens_limit=self.output_tokens_limit,
            total_tokens_limit=self.total_tokens_limit,
        )


#: SPEC §3: 20 model requests, 20 tool calls, 250,000 output tokens per slot.
DEFAULT_CEILING = Limits(request_limit=20, tool_calls_limit=20, output_tokens_limit=250_000)


def clamp_limits(ceiling: Any, max_iter: int | None, max_calls: int | None, slot: str, *, warn: bool = True) -> Limits:
    """The caller's ceiling, lowered (never raised) by the template's max_iter/max_calls.
    Asking for more than the ceiling gets the ceiling and (with `warn`) a UserWarning."""
    base = Limits.of(ceiling)
    return Limits(
        request_limit=_lower(base.request_limit, max_iter, "max_iter", slot, warn),
        tool_calls_limit=_lower(base.tool_calls_limit, max_calls, "max_calls", slot, warn),
        input_tokens_limit=base.input_tokens_limit,
        output_tokens_limit=base.output_tokens_limit,
        total_tokens_limit=base.total_tokens_limit,
    )


def asks_above(ceiling: Any, max_iter: int | None, max_calls: int | None) -> bool:
    """Whether the template asks for more than the ceiling allows (and so gets a warning)."""
    base = Limits.of(ceiling)
    return any(
        asked is not None and top is not None and asked > top
        for asked, top in ((max_iter, base.request_limit), (max_calls, base.tool_calls_limit))
    )


def _lower(ceiling: int | None, asked: int | None, option: str, slot: str, warn: bool) -> int | None:
    if asked is None:
        return ceiling
    if ceiling is not None and asked > ceiling:
        if warn:
            message = f"template asked for {option}={asked} but the caller's ceiling is {ceiling}; using {ceiling}"
            logger.warning("slot %s: %s", slot, message)
            warn_at(message)
        return ceiling
    return asked
