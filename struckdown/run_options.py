"""The keywords a run takes, declared once (SPEC §5), and the protocols a host plugs in.

`RunOptions` is the TypedDict every entry point unpacks (`**options: Unpack[RunOptions]`),
so a type checker knows each keyword; `RUN_OPTIONS` is the set of its names that
`compat.call_options` checks calls against. `ResponseCache` and `BatchExecutor` are what
`cache=` and `executor=` accept besides the built-in ones.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypedDict

if TYPE_CHECKING:
    from pydantic_ai import Tool
    from pydantic_ai.models import Model
    from pydantic_ai.usage import UsageLimits

    from .approval_state import ApprovalRequest
    from .results import Result

    ModelLike = Model | str | None  # a Model, a model string or `module:factory`, None: environment/config
    ToolLike = Callable[..., Any] | Tool[Any]
    # SPEC §12: (request) -> True | False | "reason" (sync or async), True/False for every call, None: pause
    Approver = Callable[[ApprovalRequest], Any] | bool | None

PathLike = str | os.PathLike[str]
OnHalt = Literal["raise", "return"]

class ResponseCache(Protocol):
    """What a response cache object must offer (`cache=` accepts one, or True/a path)."""

    async def aget(self, key: str) -> Any: ...

    async def aput(self, key: str, value: Any) -> None: ...


class RunOptions(TypedDict, total=False):
    """The keyword arguments every entry point takes (SPEC §5), declared once.
    A keyword given to a call overrides the Environment's default for that call."""

    model: ModelLike
    tools: Sequence[ToolLike]  # plain callables (sync or async) or pydantic_ai.Tool objects
    deps: Any  # handed to tools as RunContext.deps
    deps_type: type[Any] | None
    limits: UsageLimits | None  # the per-slot ceiling
    tool_timeout: float | None  # seconds one tool call may take (the ceiling `tool_timeout=` options lower)
    max_tool_result: int | None  # characters of one tool result the model reads; longer ones are cut with a note
    max_requests: int | None  # most model requests in flight at once, across the run (or the whole batch)
    on_halt: OnHalt
    settings: Mapping[str, Any] | None  # pydantic_ai ModelSettings for every request
    cache: ResponseCache | bool | str | None
    template_path: PathLike | None
    include_paths: Sequence[PathLike]
    stop_at: str | None
    strict_undefined: bool  # a variable neither in the context nor answered before: an error, not a warning
    mcp: Any  # MCP servers as slot tools: URLs, commands, .py paths, an mcp.json, MCPToolset/MCP objects (SPEC §16)
    approve: Approver  # who decides tool calls that need approval; None: the run pauses (SPEC §12)
    run_limits: UsageLimits | None  # run-wide: every model request and tool call of the run (SPEC §13)
    max_cost: float | None  # USD, run-wide (for complete_batch: the whole batch's)
    prices: Mapping[str, Mapping[str, float]] | None  # USD per million tokens, by model name or provider:name
    tool_limits: Mapping[str, int] | None  # per-tool call ceilings per slot (`budget=` lowers them)
    instrument: Any  # True, an OpenTelemetry TracerProvider or pydantic-ai InstrumentationSettings (SPEC §19)
    image_max_side: int | None  # images with a longer side are shrunk with Pillow (default 2048; None: never)
    max_images: int | None  # images one request may hold, earlier turns included (default 50; None: no limit)
    # SPEC §14 (docs/resilience.md)
    retries: int | None  # retries of a transient provider failure per request (None: STRUCKDOWN_MAX_RETRIES or 3)
    retry_base_delay: float | None  # seconds; the n-th retry waits up to base × 2^(n-1) (full jitter)
    retry_max_delay: float | None  # seconds a retry waits at most (default 30)
    fallback: ModelLike | Sequence[ModelLike]  # models a slot runs on, in order, when it cannot finish on its own
    on_truncate: Literal["keep", "error"]  # an answer cut at its token limit: kept and flagged, or TruncatedError
    on_retry: Callable[[Any], Any] | None  # called with every SlotRetry and SlotFallback event (also in complete())


#: The keywords every entry point takes (others are a TypeError at the call; see compat.py).
RUN_OPTIONS = frozenset(RunOptions.__annotations__)
#: What a batch executor's workers take besides (struckdown/distributed/shipping.py).
EXECUTOR_OPTIONS = frozenset({"model_factory", "deps_factory"})


class BatchExecutor(Protocol):
    """Where the rows of a batch run. The default (None) is this process's event loop."""

    async def run_batch(
        self,
        template: str,
        contexts: Iterable[Mapping[str, Any]],
        *,
        concurrency: int,
        on_result: Callable[[int, Result | BaseException], Any] | None,
        template_path: PathLike | None,
        include_paths: Sequence[PathLike],
        **kwargs: Any,
    ) -> list[Result | BaseException]: ...
