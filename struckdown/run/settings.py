"""The one RunSettings builder (SPEC §22): every entry path builds a run's settings here.

`complete*`, `complete_incremental*`, a batch row (local, `--workers`, Dask), `resume*`
and the playground all call `build_settings` with the call's keywords and the
Environment's defaults; which keyword is which, its default and its check are the rows of
`run_options.OPTIONS`. What differs per path is passed in: the batch's request limiter,
provider batching and shared account, the MCP sessions, and the paused run a resume
continues.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from ..media.scope import DEFAULT_MAX_IMAGES, DEFAULT_MAX_SIDE
from ..run_options import OPTIONS, option_value

RETRIES_VARIABLE = "STRUCKDOWN_MAX_RETRIES"  # resilience_settings.Resilience.of reads it for the default


@dataclass(frozen=True)
class RunSettings:
    """One run's settings: the call's keywords over its Environment's defaults."""

    model: Any = None
    tools: tuple[Any, ...] = ()
    deps: Any = None
    limits: Any = None
    on_halt: str = "raise"
    settings: Mapping[str, Any] | None = None
    cache: Any = None
    prompt_cache: bool = True  # SPEC §24: provider prompt caching (run/prompt_cache.py)
    stop_at: str | None = None
    strict_undefined: bool = False
    stream: bool = True
    tool_timeout: float | None = None
    max_seconds: float | None = None  # the host's ceiling for one slot's answer (`max_seconds=` lowers it)
    max_tool_result: int | None = None  # characters of one tool result the model reads (longer: cut with a note)
    requests: Any = None  # an anyio.CapacityLimiter shared by the requests of this run (or batch)
    provider_batch: Any = None  # a struckdown.ProviderBatch: requests go through the provider's batch API
    mcp: Any = None  # the MCPSessions of this run (or batch), None without MCP servers
    approve: Any = None  # SPEC §12: who decides calls that need approval (None: the run pauses)
    resume: Any = None  # a ResumePoint (struckdown/approval_state.py): the paused run this one continues
    budget: Any = None  # run-wide limits (run/ledger.py Budget: run_limits= and max_cost=), or None
    pricing: Any = None  # prices for Usage.cost (pricing.Pricing), or None: genai-prices only
    tool_limits: Mapping[str, int] | None = None  # the host's per-tool call ceilings (per slot)
    batch: Any = None  # the batch's shared account (run/ledger.py BatchLedger) for a batch row
    tracing: Any = None  # observe.Tracing (instrument=), or None
    image_max_side: int | None = DEFAULT_MAX_SIDE  # larger images are shrunk (None: sent as they are)
    max_images: int | None = DEFAULT_MAX_IMAGES  # per request (None: no limit)
    resilience: Any = None  # run/resilience.Resilience: retries, fallback, on_truncate (None: defaults)
    recorded: Callable[[], Mapping[str, Any]] | None = None  # the plain options a paused state records (made at a pause)
    spent: Any = None  # a resumed run: the Usage its earlier part spent (counts against run_limits and max_cost)
    journal: Any = None  # SPEC §25: the effect journal's path (run/effects.py), or None
    rerun_from: str | None = None  # SPEC §25: this slot and every slot after it run again (run/rerun.py)
    private: tuple[str, ...] = ()  # SPEC §33: context names labelled private (struckdown/flow.py)
    untrusted: tuple[str, ...] = ()  # SPEC §33: context names labelled untrusted
    local_models: tuple[str, ...] = ()  # SPEC §33: models or base URLs the host counts as local
    remote_models: tuple[str, ...] = ()  # SPEC §33: … as remote


def build_settings(environment: Any, options: Mapping[str, Any], *, stream: bool, **path: Any) -> RunSettings:
    """The call's options over the Environment's defaults, as the engine takes them
    (`path`: what the entry path adds, `_build`'s keywords: requests, mcp, provider_batch,
    batch, resume).

    A call whose options (and the Environment's defaults) are all held as they are, with
    nothing of its own from the path, gets the settings of the last such call when every
    option is the same object: a RunSettings is read-only, as the rows of a batch share theirs."""
    plain = all(value is None for value in path.values())
    if plain and _held_as_is(options) and _held_as_is(environment.defaults):
        # the default number of retries is read from the environment variable per call
        key = (stream, tuple(options.items()), tuple(environment.defaults.items()), os.environ.get(RETRIES_VARIABLE))
        last = getattr(environment, "_struckdown_last_settings", None)
        if last is not None and _same(last[0], key):
            return last[1]  # type: ignore[no-any-return]
        made = _build(environment, options, stream=stream)
        environment._struckdown_last_settings = (key, made)
        return made
    return _build(environment, options, stream=stream, **path)


#: Options a RunSettings holds as the caller gave them (or turns into new immutable values, or
#: remembers per object): the others (a tool list, fallback models, tool limits, MCP servers,
#: a request cap, budgets) are rebuilt per call, so a list changed in place between calls counts.
#: `deps=`, `approve=` and `on_retry=` are left out too: the kept settings would keep the
#: caller's objects alive after their call.
_AS_IS = frozenset({
    "model", "limits", "on_halt", "settings", "cache", "prompt_cache", "stop_at", "strict_undefined",
    "tool_timeout", "max_seconds", "max_tool_result", "prices", "instrument", "image_max_side",
    "max_images", "retries", "retry_base_delay", "retry_max_delay", "on_truncate", "journal", "rerun_from",
    "private", "untrusted", "local_models", "remote_models",
})


def _held_as_is(options: Mapping[str, Any]) -> bool:
    return all(name in _AS_IS for name in options)


def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Same stream flag, and the same option names bound to the very same objects."""
    if a[0] != b[0] or a[3] != b[3] or len(a[1]) != len(b[1]) or len(a[2]) != len(b[2]):
        return False
    return all(x[0] == y[0] and x[1] is y[1] for x, y in zip((*a[1], *a[2]), (*b[1], *b[2])))


def _build(
    environment: Any,
    options: Mapping[str, Any],
    *,
    stream: bool,
    requests: Any = None,
    mcp: Any = None,
    provider_batch: Any = None,
    batch: Any = None,
    resume: Any = None,
) -> RunSettings:
    from ..models.pricing import Pricing
    from ..observe import tracing_for
    from .attempts import Resilience
    from .budgets import check_tool_limits
    from .ledger import Budget

    defaults = environment.defaults

    def value(name: str) -> Any:
        return option_value(name, options, defaults)

    prices, instrument = value("prices"), value("instrument")
    spent = spent_before(resume) if resume is not None else None
    return RunSettings(
        model=value("model"),
        tools=tuple(value("tools")),
        deps=value("deps"),
        limits=value("limits"),
        on_halt=value("on_halt"),
        settings=value("settings"),
        cache=value("cache"),
        prompt_cache=bool(value("prompt_cache")),
        stop_at=value("stop_at"),
        strict_undefined=bool(value("strict_undefined")),
        stream=stream,
        tool_timeout=value("tool_timeout"),
        max_seconds=value("max_seconds"),
        max_tool_result=value("max_tool_result"),
        requests=requests if requests is not None else request_limiter(value("max_requests")),
        provider_batch=provider_batch,
        mcp=mcp,
        approve=value("approve"),
        resume=resume,
        budget=Budget.of(value("run_limits"), value("max_cost"), "run_limits"),
        pricing=_remembered(environment, "_struckdown_pricing", prices, Pricing) if prices else None,
        tool_limits=check_tool_limits(value("tool_limits")),
        batch=batch,
        tracing=_remembered(environment, "_struckdown_tracing", instrument, tracing_for) if instrument else None,
        image_max_side=value("image_max_side"),
        max_images=value("max_images"),
        resilience=Resilience.of(
            value("retries"), value("retry_base_delay"), value("retry_max_delay"), value("fallback"),
            value("on_truncate"), value("on_retry"),
        ),
        recorded=partial(recorded_options, options, defaults),
        spent=spent,
        journal=value("journal"),
        rerun_from=value("rerun_from"),
        private=tuple(value("private") or ()),
        untrusted=tuple(value("untrusted") or ()),
        local_models=tuple(value("local_models") or ()),
        remote_models=tuple(value("remote_models") or ()),
    )


def spent_before(point: Any) -> Any:
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
