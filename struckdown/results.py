"""Result and SlotResult (SPEC §2.5): what a run gives back."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage


class HaltInfo(Protocol):
    """What `Result.halted` holds: the `struckdown.Halted` error of the tripping guard
    (a Protocol here, so that results.py needs nothing from errors.py)."""

    slot: str | None
    reason: str

    @property
    def results(self) -> Result | None: ...


class PauseInfo(Protocol):
    """What `Result.paused` holds: the `struckdown.Paused` of a run waiting for approval
    decisions (SPEC §12)."""

    state: dict[str, Any]

    @property
    def requests(self) -> list[Any]: ...

    @property
    def results(self) -> Result | None: ...


@dataclass(frozen=True)
class Usage:
    """Requests, tool calls, tokens and cost; summed per slot and per run.

    `cost` is USD (SPEC §13), or None when a request's price is unknown; a sum with an
    unknown part is unknown, while a part that made no request (an action, a cached
    answer) adds nothing."""

    requests: int = 0
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.requests + other.requests,
            self.tool_calls + other.tool_calls,
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            _add_cost(self, other),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "tool_calls": self.tool_calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.total_tokens,
            "cost": self.cost,
        }


def _add_cost(a: Usage, b: Usage) -> float | None:
    """Known + known is known; an unknown price (None where requests were made) wins."""
    if (a.cost is None and a.requests) or (b.cost is None and b.requests):
        return None
    if a.cost is None:
        return b.cost
    if b.cost is None:
        return a.cost
    return a.cost + b.cost


@dataclass(frozen=True)
class ToolCall:
    tool_name: str
    arguments: dict[str, Any]
    output: Any
    ok: bool
    error: str | None
    elapsed_ms: float
    was_cached: bool


@dataclass(frozen=True)
class SlotResult:
    key: str
    type: str
    output: Any
    messages: tuple[ModelMessage, ...] = ()
    usage: Usage = field(default_factory=Usage)
    elapsed_ms: float = 0.0
    cached: bool = False
    tool_calls: tuple[ToolCall, ...] = ()
    truncated: bool = False  # the answer's last response stopped at its token limit (SPEC §14)
    fallback_used: str | None = None  # the fallback model that answered (its pydantic-ai model_name)
    confidence: float | None = None  # SPEC §27: the answer's confidence, 0-1 (confidence=logprobs|vote:N)
    escalated_to: str | None = None  # the model a less confident answer was asked again on

    def to_dict(self) -> dict[str, Any]:
        from .codec import jsonable

        return {
            "key": self.key,
            "type": self.type,
            "output": jsonable(self.output),
            "usage": self.usage.to_dict(),
            "elapsed_ms": round(self.elapsed_ms, 3),
            "cached": self.cached,
            "truncated": self.truncated,
            "fallback_used": self.fallback_used,
            "confidence": self.confidence,
            "escalated_to": self.escalated_to,
            "tool_calls": [
                {
                    "tool_name": c.tool_name,
                    "arguments": jsonable(c.arguments),
                    "output": jsonable(c.output),
                    "ok": c.ok,
                    "error": c.error,
                    "was_cached": c.was_cached,
                }
                for c in self.tool_calls
            ],
        }


class Result(Mapping[str, Any]):
    """Read-only mapping slot key → output, in template order.

    `result["a"]`, `result.a`, `dict(result)`; `result.results[key]` is the SlotResult.
    """

    __slots__ = ("results", "halted", "_order", "_discarded", "paused")

    def __init__(
        self,
        results: Mapping[str, SlotResult],
        order: tuple[str, ...] = (),
        halted: HaltInfo | None = None,
        discarded: Usage | None = None,
        paused: PauseInfo | None = None,
    ) -> None:
        rank = {k: i for i, k in enumerate(order)}
        ordered = sorted(results, key=lambda k: rank.get(k, len(rank)))
        object.__setattr__(self, "results", {k: results[k] for k in ordered})
        object.__setattr__(self, "halted", halted)
        object.__setattr__(self, "_order", order)
        # what answers computed beside a tripped guard cost: they are not delivered, but billed
        object.__setattr__(self, "_discarded", discarded or Usage())
        # SPEC §12: the `struckdown.Paused` of a run that waits for approval decisions
        object.__setattr__(self, "paused", paused)

    def __getitem__(self, key: str) -> Any:
        return self.results[key].output

    def __iter__(self) -> Iterator[str]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def __getattr__(self, name: str) -> Any:
        try:
            return self.results[name].output
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Result is read-only")

    def __repr__(self) -> str:
        return f"Result({dict(self)!r}{', halted' if self.halted else ''}{', paused' if self.paused else ''})"

    def __reduce__(self) -> tuple[Any, ...]:
        # read-only slots: rebuilt through the constructor (Halted holds no Result, so no cycle)
        return (Result, (self.results, self._order, self.halted, self._discarded, self.paused))

    @property
    def order(self) -> tuple[str, ...]:
        """Every answer key of the template, in template order."""
        order: tuple[str, ...] = self._order
        return order

    @property
    def response(self) -> Any:
        """The last slot's output in template order (falsy values kept as they are)."""
        if not self.results:
            return None
        return self.results[next(reversed(self.results))].output

    @property
    def usage(self) -> Usage:
        """Every request the run made, those of answers discarded by a guard trip included."""
        total: Usage = self._discarded
        for slot in self.results.values():
            total = total + slot.usage
        return total

    def to_dict(self) -> dict[str, Any]:
        from .codec import jsonable

        return {k: jsonable(v) for k, v in self.items()}
