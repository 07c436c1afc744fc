"""The one RunSettings builder (SPEC §22): every entry path builds a run's settings here.

`complete*`, `complete_incremental*`, a batch row (local, `--workers`, Dask), `resume*`
and the playground all call `build_settings` with the call's keywords and the
Environment's defaults; which keyword is which, its default and its check are the rows of
`run_options.OPTIONS`. What differs per path is passed in: the batch's request limiter,
provider batching and shared account, the MCP sessions, and the paused run a resume
continues.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from ..run_options import OPTIONS, RunOptions, merged_options, option_value

if TYPE_CHECKING:
    import anyio

    from ..approval.state import ResumePoint
    from ..env_view import EnvironmentView
    from ..models.pricing import Pricing
    from ..observe import Tracing
    from ..results import Usage
    from ..tools.mcp import MCPSessions
    from .ledger import BatchLedger, Budget
    from .resilience_settings import Resilience

RETRIES_VARIABLE = "STRUCKDOWN_MAX_RETRIES"  # resilience_settings.Resilience.of reads it for the default


@dataclass(frozen=True)
class RunSettings:
    """One run's settings. `options` holds every run keyword merged once: the call's over
    the Environment's defaults over the declaration's (`run_options.merged_options`, as
    pydantic-ai merges model settings), typed by the `RunOptions` TypedDict; the engine and
    the slots read them there (`settings.options["tool_timeout"]`), nothing copies them.
    The other fields are what the run makes of them once (a budget, prices, retries) and
    what the entry path adds (a batch's account, MCP sessions, the paused run it resumes)."""

    options: RunOptions
    stream: bool = True
    requests: anyio.CapacityLimiter | None = None  # shared by the requests of this run (or batch)
    budget: Budget | None = None  # run-wide limits (run_limits= and max_cost=)
    pricing: Pricing | None = None  # prices for Usage.cost (prices=), or None: genai-prices only
    tool_limits: Mapping[str, int] | None = None  # the host's per-tool call ceilings (per slot), checked
    tracing: Tracing | None = None  # instrument=
    resilience: Resilience | None = None  # retries, fallback, on_truncate (None: the defaults)
    recorded: Callable[[], Mapping[str, Any]] | None = None  # the plain options a paused state records (made at a pause)
    # what the entry path adds
    provider_batch: Any = None  # a batch/provider.ProviderBatch (a layer above run/): requests through the batch API
    mcp: MCPSessions | None = None  # the MCP sessions of this run (or batch), None without MCP servers
    batch: BatchLedger | None = None  # the batch's shared account, for a batch row
    resume: ResumePoint | None = None  # the paused run this one continues
    spent: Usage | None = None  # a resumed run: what its earlier part spent (counts against run_limits and max_cost)


def build_settings(
    environment: EnvironmentView,
    options: Mapping[str, Any],
    *,
    stream: bool,
    requests: anyio.CapacityLimiter | None = None,
    mcp: MCPSessions | None = None,
    provider_batch: Any = None,
    batch: BatchLedger | None = None,
    resume: ResumePoint | None = None,
) -> RunSettings:
    """The call's options over the Environment's defaults, as the engine takes them (the
    keywords: what the entry path adds). Every entry path calls it, once per run (a batch:
    once for all its rows, which share their settings: a RunSettings is read-only)."""
    from ..models.pricing import Pricing
    from ..observe import tracing_for
    from .budgets import check_tool_limits
    from .ledger import Budget
    from .resilience_settings import Resilience

    merged = merged_options(options, environment.defaults)
    prices, instrument = merged["prices"], merged["instrument"]
    return RunSettings(
        options=merged,
        stream=stream,
        requests=requests if requests is not None else request_limiter(merged["max_requests"]),
        budget=Budget.for_run(merged),
        pricing=_remembered(environment, "_struckdown_pricing", prices, Pricing) if prices else None,
        tool_limits=check_tool_limits(merged["tool_limits"]),
        tracing=_remembered(environment, "_struckdown_tracing", instrument, tracing_for) if instrument else None,
        resilience=Resilience.of(
            merged["retries"], merged["retry_base_delay"], merged["retry_max_delay"], merged["fallback"],
            merged["on_truncate"], merged["on_retry"],
        ),
        recorded=partial(recorded_options, options, environment.defaults),
        provider_batch=provider_batch,
        mcp=mcp,
        batch=batch,
        resume=resume,
        spent=spent_before(resume) if resume is not None else None,
    )


def spent_before(point: ResumePoint) -> Usage:
    """What a paused run spent before its pause: its finished slots and its paused ones."""
    from ..results import Usage

    total = Usage()
    for item in point.finished.values():
        usage = item.get("usage") or {}
        total = total + Usage(usage.get("requests", 0), usage.get("tool_calls", 0), usage.get("input_tokens", 0),
                              usage.get("output_tokens", 0), usage.get("cost"), usage.get("cache_read_tokens", 0),
                              usage.get("cache_write_tokens", 0), usage.get("cache_saved"))
    for slot in point.paused.values():
        usage = slot.usage
        cost = float(usage.cost) if getattr(usage, "cost", None) is not None else 0.0
        total = total + Usage(usage.requests, usage.tool_calls, usage.input_tokens or 0, usage.output_tokens or 0, cost,
                              usage.cache_read_tokens or 0, usage.cache_write_tokens or 0)
    return total


def recorded_options(options: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """What a paused run's state keeps of its options: each recorded option that has a plain
    form (the form a Dask worker gets), so `resume` runs on as the run began."""
    out: dict[str, Any] = {}
    for name, option in OPTIONS.items():
        if not option.recorded or (name not in options and name not in defaults):
            continue
        plain = option.plain(option_value(name, options, defaults))
        if plain is not None:
            out[name] = plain[0]
    return out


def _remembered(holder: Any, attribute: str, key: Any, make: Any) -> Any:
    """`make(key)` once per key object (a batch passes the same prices to every row)."""
    held = getattr(holder, attribute, None)
    if held is not None and held[0] is key:
        return held[1]
    made = make(key)
    setattr(holder, attribute, (key, made))
    return made


def request_limiter(max_requests: int | None) -> Any:
    """A cap on the model requests in flight at once (None: no cap)."""
    import anyio

    max_requests = OPTIONS["max_requests"].check(max_requests)  # type: ignore[misc]  # the option's own rule
    return None if max_requests is None else anyio.CapacityLimiter(max_requests)
