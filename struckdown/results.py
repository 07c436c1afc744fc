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
    # SPEC §24: input tokens the provider read from its prompt cache / wrote to it (both are
    # part of input_tokens), and what the cache saved in USD against the same tokens uncached
    # (None: nothing was read or written, or no price is known)
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cache_saved: float | None = None

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def cache_share(self) -> float:
        """The share of input tokens read from the provider's prompt cache (0–1)."""
        return self.cache_read_tokens / self.input_tokens if self.input_tokens else 0.0

    def __add__(self, other: Usage) -> Usage:
        saved = None
        if self.cache_saved is not None or other.cache_saved is not None:
            saved = (self.cache_saved or 0.0) + (other.cache_saved or 0.0)
        return Usage(
            self.requests + other.requests,
            self.tool_calls + other.tool_calls,
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            _add_cost(self, other),
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            saved,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "tool_calls": self.tool_calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.total_tokens,
            "cost": self.cost,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "cache_saved": self.cache_saved,
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


@dataclass(frozen=True, eq=False)
class SlotResult:
    """One slot's answer and how it was reached.

    For code written against struckdown 0.x, `str(slot)` is the answer's text and
    `slot == "text"` compares the answer; read-only `prompt`, `completion`, `thinking`
    and `response_schema` give 0.x's views of the same data (docs/migration.md)."""

    key: str
    type: str
    output: Any
    messages: tuple[ModelMessage, ...] = ()
    usage: Usage = field(default_factory=Usage)
    elapsed_ms: float = 0.0
    cached: bool = False
    tool_calls: tuple[ToolCall, ...] = ()
    truncated: bool = False  # the answer's last response stopped at its token limit (SPEC §14)
    # SPEC §34: how the answer ended: "stop", "length" (its token limit) or "loop" (cut at a loop)
    finish: str = "stop"
    fallback_used: str | None = None  # the fallback model that answered (its pydantic-ai model_name)
    confidence: float | None = None  # SPEC §27: the answer's confidence, 0-1 (confidence=logprobs|vote:N)
    escalated_to: str | None = None  # the model a less confident answer was asked again on
    # the JSON schema the answer was asked for in (0.x's name); None once pickled to another process
    response_schema: dict[str, Any] | None = None
    # SPEC §25: answered from the run's journal (its request unchanged since): no request sent
    reused: bool = False
    # SPEC §33: the labels the answer carries ("private", "untrusted"; empty without labels)
    labels: frozenset[str] = frozenset()

    def __str__(self) -> str:
        return str(self.output)

    def __getstate__(self) -> dict[str, Any]:
        # the schema stays in the process that ran the slot (a batch row's result crossing to
        # another process would carry it once per row); there `response_schema` is None
        state = dict(self.__dict__)
        state.pop("response_schema", None)
        return state

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SlotResult):
            return all(getattr(self, f) == getattr(other, f) for f in _SLOT_FIELDS)
        return bool(self.output == other)

    __hash__ = None  # type: ignore[assignment]  # compared by value, like 0.x

    @property
    def prompt(self) -> str:
        """0.x's `prompt`: the text of the last user turn the slot's request carried."""
        from pydantic_ai.messages import ModelRequest, UserPromptPart

        for message in reversed(self.messages):
            if isinstance(message, ModelRequest):
                for part in reversed(message.parts):
                    if isinstance(part, UserPromptPart):
                        content = part.content
                        return content if isinstance(content, str) else "".join(c for c in content if isinstance(c, str))
        return ""

    @property
    def thinking(self) -> str | None:
        """The thinking parts of the slot's responses, joined by blank lines (None: none)."""
        from pydantic_ai.messages import ModelResponse, ThinkingPart

        parts = [
            p.content for m in self.messages if isinstance(m, ModelResponse) for p in m.parts
            if isinstance(p, ThinkingPart) and p.content
        ]
        return "\n\n".join(parts) if parts else None

    @property
    def completion(self) -> dict[str, Any]:
        """0.x's completion record, rebuilt from the usage: `usage` (prompt_tokens,
        completion_tokens, total_tokens), `_hidden_params.response_cost`, `_thinking`,
        `_output`, `_cached`."""
        return {
            "usage": {
                "prompt_tokens": self.usage.input_tokens,
                "completion_tokens": self.usage.output_tokens,
                "total_tokens": self.usage.total_tokens,
            },
            "_hidden_params": {"response_cost": self.usage.cost},
            "_thinking": self.thinking,
            "_output": self.output,
            "_cached": self.cached,
        }

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
            "finish": self.finish,
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


_SLOT_FIELDS = (
    "key", "type", "output", "messages", "usage", "elapsed_ms", "cached", "tool_calls", "truncated", "fallback_used",
    "confidence", "escalated_to", "finish",
)


@dataclass(frozen=True)
class RerunReport:
    """What a run with a journal reused (SPEC §25, docs/durable.md): `result.reruns`.

    `reused` the slots answered from the journal (no request sent), `rerun` the slots that ran
    again, `previous` the answer each re-run slot had in the journal before (JSON form; a slot
    new to the template has none)."""

    reused: tuple[str, ...] = ()
    rerun: tuple[str, ...] = ()
    previous: Mapping[str, Any] = field(default_factory=dict)

    @property
    def reused_count(self) -> int:
        return len(self.reused)

    @property
    def rerun_count(self) -> int:
        return len(self.rerun)

    def summary(self) -> str:
        """`reused 7 slots, re-ran 2`."""
        slots = "slot" if len(self.reused) == 1 else "slots"
        return f"reused {len(self.reused)} {slots}, re-ran {len(self.rerun)}"


class Outputs(dict[str, Any]):
    """0.x's `result.outputs`: a plain dict of the answers whose keys also read as attributes."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class Result(Mapping[str, Any]):
    """Read-only mapping slot key → output, in template order.

    `result["a"]`, `result.a`, `dict(result)`; `result.results[key]` is the SlotResult.
    """

    __slots__ = ("results", "halted", "_order", "_discarded", "paused", "reruns")

    def __init__(
        self,
        results: Mapping[str, SlotResult],
        order: tuple[str, ...] = (),
        halted: HaltInfo | None = None,
        discarded: Usage | None = None,
        paused: PauseInfo | None = None,
        reruns: RerunReport | None = None,
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
        # SPEC §25: with a journal that held answers of this run, what was reused and what ran again
        object.__setattr__(self, "reruns", reruns)

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
        return (Result, (self.results, self._order, self.halted, self._discarded, self.paused, self.reruns))

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

    # -- struckdown 0.x's names (read-only; docs/migration.md) ---------------------------
    @property
    def outputs(self) -> Outputs:
        """The answers as a dict whose keys also read as attributes (0.x's Box)."""
        return Outputs(self)

    @property
    def total_cost(self) -> float:
        """The run's cost in USD; an unknown price counts 0, as in 0.x (`usage.cost` is None then)."""
        return self.usage.cost or 0.0

    @property
    def prompt_tokens(self) -> int:
        return self.usage.input_tokens

    @property
    def completion_tokens(self) -> int:
        return self.usage.output_tokens

    @property
    def total_tokens(self) -> int:
        return self.usage.total_tokens

    @property
    def has_unknown_costs(self) -> bool:
        return self.usage.requests > 0 and self.usage.cost is None

    @property
    def thinking(self) -> dict[str, str]:
        """Slot key → the thinking text of that slot, for the slots that thought."""
        return {k: s.thinking for k, s in self.results.items() if s.thinking is not None}

    def strip_debug_data(self) -> Result:
        """A copy without the messages each slot sent and received (0.x's debug data)."""
        from dataclasses import replace

        slim = {k: replace(s, messages=()) for k, s in self.results.items()}
        return Result(slim, self._order, self.halted, self._discarded, self.paused, self.reruns)
