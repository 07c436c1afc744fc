"""What runs on a Dask worker: one row's task, and what it needs to run.

The shipped names (model and deps factories, tools as importable names or a
tools file sent as text) are resolved once per worker process. A row runs
inside the cluster-wide semaphore; a transient provider failure (see
`is_transient`) is raised as `TransientRowError` so that Dask retries the task,
while every other outcome is packed (see `packing`) and returned.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import threading
import types
from collections.abc import Callable
from typing import Any

import distributed

from ..run.accounting import usage_of
from ..toolfiles import import_name, module_from_source, public_tools
from .budget import row_may_start, row_spent
from .packing import pack_error, pack_result


class TransientRowError(Exception):
    """Raised inside a row's task so that Dask retries it; carries the packed row error.

    The caller never sees it: once the retries are spent, the original error is
    unpacked and becomes the row's outcome.
    """

    def __init__(self, packed: tuple[Any, ...]) -> None:
        super().__init__(packed)
        self.packed = packed

    def __str__(self) -> str:
        return str(self.packed[1]) if len(self.packed) > 1 else "transient row error"


def is_transient(exc: BaseException) -> bool:
    """True for provider failures worth running the row again: a rate limit (not an
    exhausted quota), a connection error or timeout, or a server error (5xx or an
    unclassified `ModelError`). Template, configuration, authentication, bad-request,
    context-window and content-filter errors are permanent."""
    from .. import model_errors as me

    error = _model_error_in(exc)
    if error is None:
        return False
    if isinstance(error, me.RateLimitError):
        return error.hint != getattr(me, "_QUOTA_HINT", None)
    if isinstance(error, me.ModelConnectionError):
        return True
    if type(error) is me.ModelError:
        return error.status is None or error.status >= 500
    return False


def _model_error_in(exc: BaseException) -> Any:
    from ..model_errors import ModelError

    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, ModelError):
            return current
        if isinstance(current, BaseExceptionGroup):
            todo.extend(current.exceptions)
        for linked in (current.__cause__, current.__context__):
            if linked is not None:
                todo.append(linked)
    return None


# Per worker process: what the shipped names resolved to, and the semaphore handles.
_resolved: dict[Any, Any] = {}
_mcp_sessions: dict[str, Any] = {}  # batch id -> this worker's MCP sessions for its rows of that batch
_semaphores: dict[tuple[str, int], Any] = {}
_resolve_lock = threading.Lock()


async def run_row(job: dict[str, Any], context: dict[str, Any]) -> tuple[Any, ...]:
    """One row, on a worker. Returns the packed Result or permanent error; raises
    TransientRowError for a transient one so that Dask retries the task."""
    budget = job.get("budget")
    try:
        kwargs = _worker_kwargs(job["kwargs"])
        if kwargs.get("mcp"):
            kwargs["mcp"] = _sessions(job)
        if job["semaphore"] is None:
            result = await _budgeted_row(budget, job, context, kwargs)
        else:
            async with await _semaphore(*job["semaphore"]):
                result = await _budgeted_row(budget, job, context, kwargs)
    except Exception as exc:  # noqa: BLE001 - every row error goes back to the caller
        if budget is not None and not_run(exc) is False:
            await row_spent(budget, usage_of(exc))
        packed = pack_error(exc)
        transient = job["retries"] > 0 and is_transient(exc)
        del exc
    else:
        return pack_result(result)
    if not transient:
        return packed
    _quiet_retry_logs()
    if job["retry_delay"] > 0:
        await asyncio.sleep(job["retry_delay"])
    # Raised outside the except block: Dask pickles an error with its __context__
    # chain and tracebacks (tblib), which for a provider error is deep and heavy.
    raise TransientRowError(packed)


def not_run(exc: BaseException) -> bool:
    from ..errors import BudgetExceeded

    return isinstance(exc, BudgetExceeded) and exc.scope == "batch"


async def _budgeted_row(budget: dict[str, Any] | None, job: dict[str, Any], context: dict[str, Any], kwargs: Any) -> Any:
    """One row, once the batch's shared budget lets it start; what it spent goes back into it."""
    from ..api import complete_async

    if budget is not None:
        spent = await row_may_start(budget)
        if spent is not None:
            raise spent
    result = await complete_async(
        job["template"], context, template_path=job["template_path"], include_paths=job["include_paths"], **kwargs
    )
    if budget is not None:
        await row_spent(budget, result.usage)
    return result


class _QuietRetries(logging.Filter):
    """Drops the worker's "Compute Failed" error for a row Dask is about to retry."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and record.msg.startswith("Compute Failed"):
            return "TransientRowError" not in str(record.args)
        return True


_quiet_installed: list[bool] = []


def _quiet_retry_logs() -> None:
    if not _quiet_installed:
        _quiet_installed.append(True)
        logging.getLogger("distributed.worker").addFilter(_QuietRetries())


def _sessions(job: dict[str, Any]) -> Any:
    """One session per MCP server on this worker for the rows of one batch (SPEC §16),
    opened by the first row that needs it, closed by `close_mcp_sessions` at the batch's end."""
    from ..mcp_tools import MCPSessions, ServerSpec

    batch = job.get("batch") or ""
    sessions = _mcp_sessions.get(batch)
    if sessions is None:
        sessions = _mcp_sessions[batch] = MCPSessions(tuple(ServerSpec.from_plain(s) for s in job["kwargs"]["mcp"]))
    return sessions


async def close_mcp_sessions(batch: str) -> int:
    """Close this worker's MCP sessions of a batch (the executor runs it on every worker
    when the batch ends); returns how many servers had a session open."""
    sessions = _mcp_sessions.pop(batch, None)
    if sessions is None:
        return 0
    opened = len(sessions.open_names)
    await sessions.aclose()
    return opened


async def probe_worker(job: dict[str, Any]) -> tuple[Any, ...] | None:
    """Resolve the model, tools and deps here; the packed error, or None when all is well."""
    from ..environment import default_environment

    try:
        kwargs = _worker_kwargs(job["kwargs"])
        default_environment().resolve_model(kwargs["model"])
    except Exception as exc:  # noqa: BLE001 - handed back to the caller
        return pack_error(exc)
    return None


async def _semaphore(name: str, max_leases: int) -> Any:
    """This worker's handle on the cluster-wide semaphore (one per process)."""
    semaphore = _semaphores.get((name, max_leases))
    if semaphore is None:
        semaphore = _semaphores[(name, max_leases)] = distributed.Semaphore(max_leases=max_leases, name=name)
    return await semaphore


def _worker_kwargs(shipped: dict[str, Any]) -> dict[str, Any]:
    kwargs = {k: v for k, v in shipped.items() if k not in ("model_factory", "deps_factory", "tools")}
    if shipped["model_factory"] is not None:
        kwargs["model"] = _once(("model", shipped["model_factory"]), lambda: import_name(shipped["model_factory"])())
    if shipped["deps_factory"] is not None:
        kwargs["deps"] = _once(("deps", shipped["deps_factory"]), lambda: import_name(shipped["deps_factory"])())
    kwargs["tools"] = [tool for spec in shipped["tools"] for tool in _tools(spec)]
    return kwargs


def _once(key: Any, make: Callable[[], Any]) -> Any:
    """Resolve an importable thing once per worker process."""
    with _resolve_lock:
        if key not in _resolved:
            _resolved[key] = make()
        return _resolved[key]


def _tools(spec: tuple[str, ...]) -> list[Any]:
    if spec[0] == "file":
        _, path, source = spec
        key = ("tools-file", path, hash(source))
        tools: list[Any] = _once(key, lambda: _public_tools(module_from_source(path, source, "struckdown_dask_tools"), path))
        return tools
    name = spec[1]
    if ":" in name:
        return [_once(("tool", name), lambda: import_name(name))]
    found: list[Any] = _once(("tools-module", name), lambda: _public_tools(importlib.import_module(name), name))
    return found


def _public_tools(module: types.ModuleType, where: str) -> list[Any]:
    """Public functions and pydantic-ai `Tool`s defined in the module, as `sd --tools` picks them."""
    found = public_tools(module)
    if not found:
        raise ValueError(f"tools {where} define no public functions")
    return found
