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

from ..run_options import EXECUTOR_OPTIONS, OPTIONS, RUN_OPTIONS, checked_options


def ship_kwargs(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Check that every keyword argument can travel and return what the workers get: each
    run option as its row in `run_options.OPTIONS` says it ships.

    Raises ValueError for anything that is code or holds live state (a Model object, a
    function, a cache object), naming the importable form to pass instead, and for an
    option that cannot travel at all (one line naming it and the Dask batch).
    """
    unknown = set(kwargs) - RUN_OPTIONS - EXECUTOR_OPTIONS
    if unknown:
        raise TypeError(f"unexpected keyword argument(s) for a Dask batch: {', '.join(sorted(unknown))}")
    kwargs = {**checked_options({k: v for k, v in kwargs.items() if k in RUN_OPTIONS}),
              **{k: v for k, v in kwargs.items() if k in EXECUTOR_OPTIONS}}
    out: dict[str, Any] = {"model": None, "tools": (), "deps": None, "cache": None, "mcp": None}
    for name in ("model_factory", "deps_factory"):
        value = kwargs.get(name)
        if value is not None:
            _check_importable_name(name, value)
        out[name] = value
    if kwargs.get("model") is not None and out["model_factory"] is not None:
        raise ValueError("pass model= or model_factory=, not both")
    if kwargs.get("deps") is not None and out["deps_factory"] is not None:
        raise ValueError("pass deps= or deps_factory=, not both")
    for name, value in kwargs.items():
        if name in RUN_OPTIONS:
            out[name] = _ship(name, value)
    return out


def plain_option(name: str, value: Any) -> tuple[Any] | None:
    """A run option's plain (JSON) form, as a paused state records it: `(plain,)`, or None
    when the value has none (a Model object, a function) and so is not recorded."""
    if value is None:
        return None
    kind = OPTIONS[name].ships
    if name == "journal":  # a path: a resumed run journals on into the same file (SPEC §25)
        return (os.fspath(value),)
    if name == "mcp":
        try:
            specs = _mcp_spec(value) if not _live(value) else None
        except Exception:  # noqa: BLE001 - toolset objects have no plain form: not recorded, never a failed run
            return None
        if specs is None or any(s.get("env") or s.get("headers") for s in specs):
            return None  # a server's env and headers may hold secrets: a state file does not keep them
        return (list(specs),)
    if kind == "limits":
        from dataclasses import asdict

        return ({k: v for k, v in asdict(value).items() if v is not None},)
    try:
        shipped = _ship(name, value)
        json.dumps(shipped)
    except (TypeError, ValueError):
        return None
    return (list(shipped) if isinstance(shipped, tuple) else shipped,)


def restored_option(name: str, plain: Any) -> Any:
    """A recorded option back in the form the entry points take (the inverse of `plain_option`)."""
    kind = OPTIONS[name].ships
    if kind == "limits":
        from pydantic_ai.usage import UsageLimits

        return UsageLimits(**plain)
    if name == "mcp":
        from ..tools.mcp import ServerSpec

        return tuple(ServerSpec.from_plain(item) for item in plain)
    if kind == "models" and isinstance(plain, list):
        return tuple(plain)
    return plain


def _live(value: Any) -> bool:
    from ..tools.mcp import MCPSessions

    return isinstance(value, MCPSessions)


def _ship(name: str, value: Any) -> Any:
    kind = OPTIONS[name].ships
    if kind == "no":
        if value is None:
            return None
        raise ValueError(f"{name}= and a Dask batch (--workers, --engine dask) cannot be combined: "
                         "a function cannot be shipped to workers")
    if kind == "model":
        if value is not None and not isinstance(value, str):
            raise ValueError(
                f"model= must be a model string for a Dask batch (e.g. 'openai-chat:gpt-4o-mini', or None for "
                f"the workers' STRUCKDOWN_MODEL / LLM_API_BASE), not a {type(value).__name__} object: a Model "
                "cannot be shipped to workers. For a custom Model, pass model_factory='package.module:function', "
                "a function importable on the workers that returns it"
            )
        return value
    if kind == "models":
        models = (value,) if isinstance(value, str) or value is None else tuple(value)
        if not all(isinstance(m, str) for m in models if m is not None):
            raise ValueError(f"{name}= must be model strings for a Dask batch (a Model object cannot be shipped)")
        return value if isinstance(value, str) or value is None else tuple(models)
    if kind == "tools":
        return tuple(_tool_spec(tool) for tool in value or ())
    if kind == "mcp":
        return _mcp_spec(value)
    if kind == "cache":
        return _cache_spec(value)
    if kind == "decision":
        if value is not None and not isinstance(value, bool):
            raise ValueError(f"{name}= must be True or False for a Dask batch: a function or object cannot be "
                             "shipped to workers")
        return value
    if kind == "limits" or kind == "caller":
        return value
    if kind == "path":  # the workers write beside it (run/durable/shards.py): the same place for them
        return None if value is None else os.path.abspath(os.fspath(value))
    if isinstance(value, Mapping):
        value = dict(value)
    if name == "deps":
        _check_json("deps", value, hint="for live objects pass deps_factory='package.module:function'")
    else:
        _check_json(name, value)
    return value


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
    number = getattr(context, "row", None)
    if isinstance(number, int):  # sd batch's row: its input row, which effect ids name (SPEC §25)
        from ..run.durable.effects import RowContext

        row = RowContext(row, row=number)
    try:
        pickle.dumps(row)
    except Exception as exc:  # noqa: BLE001 - any pickling failure means "not plain data"
        raise ValueError(
            f"this row cannot be sent to Dask workers ({type(exc).__name__}: {exc}); "
            "row contexts must be plain data (str, numbers, lists, dicts, dates)"
        ) from None
    return row
