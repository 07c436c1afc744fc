"""What runs on a Dask worker: a chunk of rows as one task, and what they need to run.

The shipped names (model and deps factories, tools as importable names or a
tools file sent as text) are resolved once per worker process. One task runs a
chunk of rows side by side (the caller sizes chunks from how long rows take: one
row when rows are slow, up to 256 when they are instant), so the cost of a task
(a few milliseconds of the scheduler's, the client's and the worker's time) is
spread over its rows. Each row runs inside the
batch's cap on rows: on a private cluster this process's share of it (no round
trip to the scheduler), on a shared one the cluster-wide semaphore. A transient
provider failure (see `is_transient`) runs the row again here; every outcome is
packed (see `packing`) and returned with the chunk.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import itertools
import os
import threading
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import distributed

from ..models.factory import import_name
from ..run.accounting import usage_of
from ..tools.files import module_from_source, public_tools
from .budget import row_may_start, row_spent
from .packing import pack_error, pack_outcomes


class TransientRowError(Exception):
    """A transient row error carrying the packed error (kept for code written against
    the per-row tasks of earlier versions, which raised it so that Dask retried the
    task; rows are now retried inside their chunk). The caller never sees it: a row
    whose retries are spent has the original error as its outcome."""

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
    from ..models import errors as me

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
    from ..models.errors import ModelError

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


# Per worker process: what the shipped names resolved to, the semaphore handles, and
# this process's share of a batch's caps.
_resolved: dict[Any, Any] = {}
_mcp_sessions: dict[str, Any] = {}  # batch id -> this worker's MCP sessions for its rows of that batch
_journals: dict[str, Any] = {}  # batch id -> this worker's hold on the batch's effect journal (SPEC §25)
_semaphores: dict[tuple[str, int], Any] = {}
_limiters: dict[tuple[str, str], Any] = {}
_resolve_lock = threading.Lock()
_LIMITERS_KEPT = 64  # batches whose limiters a long-lived worker remembers


async def run_rows(job: dict[str, Any], rows: list[tuple[int, dict[str, Any]]]) -> tuple[tuple[Any, ...], float]:
    """A chunk of rows, on a worker, side by side on its event loop; returns the packed
    `(index, outcome)` pairs of every row and the mean seconds a row ran (inside the
    cap; the caller sizes the next chunks by it).

    Each row runs inside the batch's cap on rows (this process's share of it, or the
    cluster-wide semaphore) and shares this process's cap on model requests. A
    transient provider error runs the row again here, up to `retries` times, after
    `retry_delay` seconds outside the cap; any other failure is the row's outcome."""
    outcomes: list[tuple[int, Any]] = []
    spent = [0.0]
    if job.get("freeze_heap"):
        settle_heap()
    try:
        run = _row_runner(job, spent)
    except Exception as exc:  # noqa: BLE001 - a setup that fails here fails every row of the chunk
        outcomes = [(index, exc) for index, _ in rows]
    else:

        from ..run.slot_run import enter_row

        async def one(index: int, context: dict[str, Any]) -> None:
            enter_row(getattr(context, "row", index))  # SPEC §25: effect ids name the row (this task's own)
            outcomes.append((index, await run(context)))

        async with anyio.create_task_group() as tg:
            for index, context in rows:
                tg.start_soon(one, index, context)
    if not job.get("keep_messages", True):
        outcomes = [(index, without_messages(outcome)) for index, outcome in outcomes]
    return pack_outcomes(outcomes), spent[0] / max(1, len(rows))


def settle_heap() -> bool:
    """Freeze this process's heap once, before its first rows (`heap.freeze_once`): the
    modules, schemas and Dask's own objects then stay out of every later collection (on a
    worker they are most of the heap, and full collections walking them cost about a fifth
    of an instant row's CPU). Only on a private cluster's workers (`freeze_heap` in the job),
    which live for the batch: a worker of a cluster you run is left as it is. Returns True
    when this call froze it."""
    from ..heap import freeze_once

    return freeze_once()


def without_messages(outcome: Any) -> Any:
    """A Result whose slots keep no messages (the conversation: most of what a Result
    weighs, and of the time it takes to send back); anything else as it is."""
    from ..results import Result

    if not isinstance(outcome, Result) or not any(slot.messages for slot in outcome.results.values()):
        return outcome
    slots = {key: dataclasses.replace(slot, messages=()) for key, slot in outcome.results.items()}
    return Result(slots, outcome.order, outcome.halted, outcome._discarded)


def _row_runner(job: dict[str, Any], spent: list[float]) -> Callable[[dict[str, Any]], Any]:
    """`run(context) -> Result | exception` for this job, in this process; adds the
    seconds each row runs inside the cap to `spent[0]`."""
    from ..environment import default_environment

    environment = default_environment()
    kwargs = _worker_kwargs(job["kwargs"])
    sessions = _sessions(job) if kwargs.pop("mcp", None) else None  # this worker's, for the batch
    if kwargs.get("journal") is not None:  # SPEC §25: this process's shard of the journal, for the batch
        _join_journal(job.get("batch") or "", kwargs["journal"])
    options: Any = {**kwargs, "template_path": job["template_path"], "include_paths": job["include_paths"]}
    program = environment.program(job["template"], options)
    caps = job.get("caps") or {}
    rows_cap = _limiter(caps, "rows")
    requests = _limiter(caps, "requests")
    semaphore = job["semaphore"]
    retries, delay = job["retries"], job["retry_delay"]
    budget = job.get("budget")

    async def timed(context: dict[str, Any]) -> Any:
        if budget is not None:  # the batch's shared budget (SPEC §13): spent -> the row does not start
            exhausted = await row_may_start(budget)
            if exhausted is not None:
                raise exhausted
        started = time.perf_counter()
        try:
            result = await environment._complete_row(program, context, options, requests, mcp=sessions)
        except Exception as exc:
            if budget is not None:
                await row_spent(budget, usage_of(exc))
            raise
        finally:
            spent[0] += time.perf_counter() - started
        if budget is not None:
            await row_spent(budget, result.usage)
        return result

    async def attempt(context: dict[str, Any]) -> Any:
        if semaphore is not None:
            async with await _semaphore(*semaphore):
                return await timed(context)
        if rows_cap is not None:
            async with rows_cap:
                return await timed(context)
        return await timed(context)

    async def run(context: dict[str, Any]) -> Any:
        for tries in itertools.count():
            try:
                return await attempt(context)
            except Exception as exc:  # noqa: BLE001 - every row error goes back to the caller
                if tries >= retries or not is_transient(exc):
                    return exc
            if delay > 0:
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    return run


def _sessions(job: dict[str, Any]) -> Any:
    """One session per MCP server on this worker for the rows of one batch (SPEC §16),
    opened by the first row that needs it, closed by `close_mcp_sessions` at the batch's end."""
    from ..tools.mcp import MCPSessions, ServerSpec

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


def _join_journal(batch: str, path: str) -> None:
    """Hold the batch's effect journal in this process (its own shard: run/durable/shards.py)
    from its first chunk until `close_journal`, so that chunks never open it again."""
    from ..run.durable.effects import release
    from ..run.durable.shards import join

    with _resolve_lock:
        if batch in _journals:
            return
        for other, journal in list(_journals.items()):  # a batch whose caller died (no close came): its
            if journal.path == Path(os.path.abspath(path)):  # journal is this one's now (the caller's lock says so)
                release(_journals.pop(other))
        _journals[batch] = join(path)


def close_journal(batch: str, path: str | None = None) -> int:
    """Give back this worker's hold on a batch's effect journal (the executor runs it on
    every worker when the batch ends), and the holds of earlier batches on the same journal
    whose caller died before it could (the journal was locked by this batch's caller since,
    so they are over). Returns how many holds it gave back."""
    from ..run.durable.effects import release

    key = None if path is None else Path(os.path.abspath(path))
    with _resolve_lock:
        over = [name for name, journal in _journals.items() if name == batch or journal.path == key]
        journals = [_journals.pop(name) for name in over]
    for journal in journals:
        release(journal)
    return len(journals)


def _limiter(caps: dict[str, Any], what: str) -> Any:
    """This process's share of the batch's cap on `what` ("rows", "requests"), made once
    per batch: the cap split evenly over the `workers` processes, by worker name
    (0, 1, … on a LocalCluster), so the shares add up to the cap."""
    total = caps.get(what)
    if total is None:
        return None
    key = (caps["batch"], what)
    with _resolve_lock:
        limiter = _limiters.get(key)
        if limiter is None:
            if len(_limiters) >= _LIMITERS_KEPT:
                _limiters.pop(next(iter(_limiters)))
            limiter = _limiters[key] = anyio.CapacityLimiter(share(total, caps["workers"], _worker_name()))
        return limiter


def share(total: int, workers: int, name: Any) -> int:
    """Worker `name`'s part of `total` split over `workers`: the first `total % workers`
    names get one more; a name outside 0..workers-1 gets the smaller part; never 0."""
    base, extra = divmod(total, max(1, workers))
    more = isinstance(name, int) and not isinstance(name, bool) and 0 <= name < extra
    return max(1, base + (1 if more else 0))


def _worker_name() -> Any:
    try:
        return distributed.get_worker().name
    except ValueError:  # not on a worker (a test calling run_rows directly)
        return None


async def probe_worker(job: dict[str, Any]) -> tuple[Any, ...] | None:
    """Resolve the model, tools and deps here; the packed error, or None when all is well."""
    from ..environment import default_environment

    try:
        kwargs = _worker_kwargs(job["kwargs"])
        default_environment().resolve_model(kwargs["model"])
    except Exception as exc:  # noqa: BLE001 - handed back to the caller
        return pack_error(exc)
    return None


def probe_prices(job: dict[str, Any], budget: dict[str, Any]) -> tuple[Any, ...] | None:
    """With the batch's `max_cost`: every model its rows may use has a known price here
    (SPEC §13, as on one machine); the packed ConfigurationError, or None."""
    from ..environment import default_environment
    from ..run.accounting import check_batch_prices
    from ..run.ledger import Budget

    try:
        environment = default_environment()
        kwargs = _worker_kwargs(job["kwargs"])
        options: Any = {**kwargs, "template_path": job["template_path"], "include_paths": job["include_paths"]}
        check_batch_prices(environment, environment.program(job["template"], options), options, Budget(**budget))
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
    from ..run_options import EXECUTOR_OPTIONS, OPTIONS

    # what the caller's process keeps (max_requests: the job's caps; paths: the job's own fields)
    kept = EXECUTOR_OPTIONS | {"tools"} | {name for name, option in OPTIONS.items() if option.ships == "caller"}
    kwargs = {k: v for k, v in shipped.items() if k not in kept}
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
