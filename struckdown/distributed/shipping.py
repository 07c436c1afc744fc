"""What may travel to the workers: keyword arguments and row contexts as plain data.

A `Model`, a function or a cache object cannot be pickled to another machine in
any useful way, so they are refused here, in the caller's process, with an error
that names the importable form to pass instead (a model string, a
`package.module:function`, a cache directory). The workers turn those names back
into objects (see `worker`).
"""

from __future__ import annotations

import json
import os
import pickle
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: Keyword arguments of `complete_async` that a Dask batch accepts, plus the two
#: factory names resolved on the workers.
_KWARGS = frozenset({
    "model", "tools", "deps", "deps_type", "limits", "on_halt", "settings", "cache", "stop_at",
    "model_factory", "deps_factory", "max_requests", "mcp", "approve", "retries",
})  # fmt: skip


def ship_kwargs(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Check that every keyword argument is plain data and return what the workers get.

    Raises ValueError for anything that is code or holds live state (a Model
    object, a function, a cache object), naming the importable form to pass instead.
    """
    unknown = set(kwargs) - _KWARGS
    if unknown:
        raise TypeError(f"unexpected keyword argument(s) for a Dask batch: {', '.join(sorted(unknown))}")
    out: dict[str, Any] = {}
    model = kwargs.get("model")
    if model is not None and not isinstance(model, str):
        raise ValueError(
            f"model= must be a model string for a Dask batch (e.g. 'openai-chat:gpt-4o-mini', or None for "
            f"the workers' STRUCKDOWN_MODEL / LLM_API_BASE), not a {type(model).__name__} object: a Model "
            "cannot be shipped to workers. For a custom Model, pass model_factory='package.module:function', "
            "a function importable on the workers that returns it"
        )
    out["model"] = model
    for name in ("model_factory", "deps_factory"):
        value = kwargs.get(name)
        if value is not None:
            _check_importable_name(name, value)
        out[name] = value
    if model is not None and out["model_factory"] is not None:
        raise ValueError("pass model= or model_factory=, not both")
    out["tools"] = tuple(_tool_spec(tool) for tool in kwargs.get("tools") or ())
    deps = kwargs.get("deps")
    if deps is not None:
        if out["deps_factory"] is not None:
            raise ValueError("pass deps= or deps_factory=, not both")
        _check_json("deps", deps, hint="for live objects pass deps_factory='package.module:function'")
    out["deps"] = deps
    limits = kwargs.get("limits")
    if limits is not None:
        from pydantic_ai.usage import UsageLimits

        if not isinstance(limits, UsageLimits):
            raise ValueError(f"limits= must be a pydantic_ai.usage.UsageLimits, not {type(limits).__name__}")
    out["limits"] = limits
    settings = kwargs.get("settings")
    if settings is not None:
        _check_json("settings", dict(settings))
        settings = dict(settings)
    out["settings"] = settings
    out["cache"] = _cache_spec(kwargs.get("cache"))
    on_halt = kwargs.get("on_halt", "raise")
    if on_halt not in ("raise", "return"):
        raise ValueError(f"on_halt must be 'raise' or 'return', not {on_halt!r}")
    out["on_halt"] = on_halt
    stop_at = kwargs.get("stop_at")
    if stop_at is not None and not isinstance(stop_at, str):
        raise ValueError(f"stop_at= must be a slot key (str), not {type(stop_at).__name__}")
    out["stop_at"] = stop_at
    max_requests = kwargs.get("max_requests")
    if max_requests is not None and (isinstance(max_requests, bool) or not isinstance(max_requests, int) or max_requests < 1):
        raise ValueError(f"max_requests must be a whole number of at least 1, not {max_requests!r}")
    out["max_requests"] = max_requests
    out["mcp"] = _mcp_spec(kwargs.get("mcp"))
    if "approve" in kwargs:  # SPEC §12: a decision for every call; a function cannot travel
        approve = kwargs["approve"]
        if approve is not None and not isinstance(approve, bool):
            raise ValueError("approve= must be True or False for a Dask batch: a function cannot be shipped to workers")
        out["approve"] = approve
    if kwargs.get("retries") is not None:  # SPEC §14: per-request retries on the workers too
        retries = kwargs["retries"]
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ValueError(f"retries= must be a whole number of at least 0, not {retries!r}")
        out["retries"] = retries
    # deps_type is accepted for compatibility; the engine does not use it, so it stays here.
    return out


def _check_importable_name(what: str, value: Any) -> None:
    if not isinstance(value, str) or ":" not in value or not all(value.partition(":")[::2]):
        raise ValueError(f"{what}= must be an importable name like 'package.module:function', got {value!r}")


def _check_json(what: str, value: Any, hint: str = "") -> None:
    try:
        json.dumps(value)
    except (TypeError, ValueError) as exc:
        extra = f"; {hint}" if hint else ""
        raise ValueError(f"{what}= must be JSON-able plain data for a Dask batch ({exc}){extra}") from None


def _tool_spec(tool: Any) -> tuple[str, ...]:
    """("name", "pkg.mod:func" | "pkg.mod") or ("file", path, source) for a `.py` file."""
    if isinstance(tool, os.PathLike) or (isinstance(tool, str) and tool.endswith(".py")):
        path = Path(tool).expanduser().resolve()
        try:
            source = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"tools file {tool} cannot be read: {exc}") from None
        return ("file", str(path), source)
    if isinstance(tool, str):
        module, _, attr = tool.partition(":")
        if not module or not all(part.isidentifier() for part in module.split(".")) or (":" in tool and not attr):
            raise ValueError(
                f"tool {tool!r} is not an importable name: use 'package.module:function', "
                "'package.module' (its public functions) or a path to a .py file"
            )
        return ("name", tool)
    function = getattr(tool, "function", tool)
    home = getattr(function, "__module__", None)
    qualname = getattr(function, "__qualname__", None)
    suggestion = f" such as '{home}:{qualname}'" if home and qualname and "<" not in qualname else ""
    raise ValueError(
        f"tools for a Dask batch must be importable names{suggestion}, not {type(tool).__name__} objects: "
        "functions cannot be shipped to workers, the workers import them"
    )


def _mcp_spec(mcp: Any) -> tuple[dict[str, Any], ...] | None:
    """MCP servers as plain data; each worker opens one session per server for the batch."""
    if mcp is None:
        return None
    from ..tools.mcp import resolve_servers

    plain = [spec.plain() for spec in resolve_servers(mcp)]
    if any(p is None for p in plain):
        raise ValueError(
            "mcp= for a Dask batch takes URLs, commands, .py paths and mcp.json files (each worker opens its "
            "own sessions), not toolset or capability objects"
        )
    return tuple(p for p in plain if p is not None)


def _cache_spec(cache: Any) -> bool | str | None:
    if cache is None or isinstance(cache, bool):
        return cache
    if isinstance(cache, str | os.PathLike):
        return os.fspath(cache)
    raise ValueError(
        "cache= must be True, False, None or a directory for a Dask batch (each worker opens it), "
        f"not a {type(cache).__name__} object"
    )


def plain_context(context: Any) -> dict[str, Any]:
    """A row's context as a dict that pickles; a row that cannot travel fails on its own."""
    if not isinstance(context, Mapping):
        raise ValueError(f"a row context must be a mapping, got {type(context).__name__}")
    row = dict(context)
    try:
        pickle.dumps(row)
    except Exception as exc:  # noqa: BLE001 - any pickling failure means "not plain data"
        raise ValueError(
            f"this row cannot be sent to Dask workers ({type(exc).__name__}: {exc}); "
            "row contexts must be plain data (str, numbers, lists, dicts, dates)"
        ) from None
    return row
