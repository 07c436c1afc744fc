"""Batch rows on a Dask cluster: `complete_batch_async(..., executor=DaskExecutor())`.

Only plain data travels to the workers: the template text, the template path and
include paths as strings, each row's context, and keyword arguments that are
data (a model *string*, tools as importable names, JSON-able deps, a
`UsageLimits`, a settings dict, the cache flag or directory, `stop_at`,
`on_halt`). Objects that are code (a `Model`, a function, a cache object) are
refused with a `ValueError` that says which importable name to pass instead; the
worker imports it. Each worker parses the template once (parsing is cached per
process by text) and runs its rows as `async def` tasks on its event loop.

Around each row's run (all of its model calls) a cluster-wide
`distributed.Semaphore` caps how many rows run at once (`max_in_flight`), so
the cap is per row, not per request. Transient provider failures (rate limits,
connection errors, 5xx) are raised inside the task so Dask retries the row up
to `retries` times; every other failure comes back as the row's exception. Rows
are handed to `on_result` in the caller's process as they finish.

See docs/distributed.md for running a cluster, worker environments and what a
lost worker costs.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import io
import json
import logging
import math
import os
import pickle
import sys
import threading
import types
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

try:
    import cloudpickle
    import distributed
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "struckdown.distributed needs Dask: pip install 'struckdown[dask]' (or 'dask[distributed]')"
    ) from exc

from .errors import ConfigurationError, StruckdownError
from .results import Result

__all__ = ["DaskExecutor", "TransientRowError", "is_transient"]

log = logging.getLogger(__name__)

#: Keyword arguments of `complete_async` that a Dask batch accepts, plus the two
#: factory names resolved on the workers.
_KWARGS = frozenset({
    "model", "tools", "deps", "deps_type", "limits", "on_halt", "settings", "cache", "stop_at",
    "model_factory", "deps_factory",
})  # fmt: skip


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
    from . import model_errors as me

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
    from .model_errors import ModelError

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


# -- the executor (caller side) -------------------------------------------------


class DaskExecutor:
    """Runs the rows of `complete_batch_async` on a Dask cluster.

    `address=None` starts a private `LocalCluster` on 127.0.0.1 (no dashboard,
    `n_workers` worker processes) that `close()` shuts down; `"tcp://host:port"`
    connects to a running scheduler; `client=` uses a `distributed.Client` you
    manage (never closed here).

    `max_in_flight` caps the rows running at once across the whole cluster (a
    `distributed.Semaphore` named `semaphore_name`; give several executors the same
    name and the same cap to share one budget; None: no cap). `retries` is how
    often Dask runs a row again after a transient provider error, waiting
    `retry_delay` seconds first.

    Dask runs at most `nthreads` tasks per worker, async ones included: a row
    waiting on the network holds a slot. The private cluster therefore gets
    `threads_per_worker = ceil(max_in_flight / n_workers)` slots unless you say
    otherwise; start external workers with `dask worker --nthreads N` to match.
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        max_in_flight: int | None = 8,
        retries: int = 2,
        client: Any = None,
        n_workers: int = 2,
        threads_per_worker: int | None = None,
        retry_delay: float = 1.0,
        semaphore_name: str | None = None,
    ) -> None:
        if address is not None and client is not None:
            raise ValueError("pass address= or client=, not both")
        if max_in_flight is not None and max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1 (or None for no cap), got {max_in_flight}")
        if retries < 0:
            raise ValueError(f"retries must be 0 or more, got {retries}")
        self.address = address
        self.max_in_flight = max_in_flight
        self.retries = retries
        self.retry_delay = retry_delay
        self.n_workers = n_workers
        self.threads_per_worker = threads_per_worker or max(1, math.ceil((max_in_flight or 8) / max(1, n_workers)))
        self.semaphore_name = semaphore_name or f"struckdown-rows-{uuid.uuid4().hex[:12]}"
        self._shared_semaphore = semaphore_name is not None
        self._client = client
        self._owns_client = client is None
        self._cluster: Any = None
        self._semaphore: Any = None
        self._lock = threading.Lock()

    # -- lifecycle --------------------------------------------------------------

    @property
    def client(self) -> Any:
        """The `distributed.Client` (started on first use)."""
        self.start()
        return self._client

    def start(self) -> DaskExecutor:
        """Connect (or start the private cluster). Blocking; idempotent."""
        with self._lock:
            if self._client is not None:
                return self
            if self.address is None:
                self._cluster = distributed.LocalCluster(
                    host="127.0.0.1",
                    dashboard_address=None,
                    n_workers=self.n_workers,
                    threads_per_worker=self.threads_per_worker,
                    processes=True,
                    silence_logs=logging.ERROR,
                    # No dashboard; the scheduler's small HTTP server (health, metrics) gets
                    # a free loopback port instead of 8787, which another cluster may hold.
                    scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                )
                self._client = distributed.Client(self._cluster, set_as_default=False)
            else:
                self._client = distributed.Client(self.address, set_as_default=False)
        return self

    def close(self) -> None:
        """Release the semaphore and, if this executor started them, the client and cluster."""
        with self._lock:
            semaphore, self._semaphore = self._semaphore, None
            client = self._client
            if semaphore is not None:
                _close_semaphore(semaphore, forget=not self._shared_semaphore and self._cluster is None)
            if self._owns_client and client is not None:
                self._client = None
                client.close()
            if self._cluster is not None:
                cluster, self._cluster = self._cluster, None
                cluster.close()

    def __enter__(self) -> DaskExecutor:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    async def __aenter__(self) -> DaskExecutor:
        await asyncio.to_thread(self.start)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await asyncio.to_thread(self.close)

    # -- running ----------------------------------------------------------------

    async def probe(self, **kwargs: Any) -> None:
        """Resolve the model, tools and deps on every worker now connected and raise the
        first failure (a missing model, an unimportable tool), so that a broken setup
        is one error instead of one per row. It also loads struckdown on the workers,
        all at once, before the first row."""
        job = _job("", None, (), ship_kwargs(kwargs), self, with_semaphore=False)
        await asyncio.to_thread(self.start)
        outcomes = await asyncio.to_thread(self._client.run, _probe, job)
        for worker, packed in outcomes.items():
            if packed is not None:
                error = _unpack(packed)
                if isinstance(error, ConfigurationError):  # the workers' environment decides, say so
                    raise ConfigurationError(f"on Dask worker {worker}: {error}") from None
                raise error

    async def run_batch(
        self,
        template: str,
        contexts: Iterable[Mapping[str, Any]],
        *,
        concurrency: int,
        on_result: Callable[[int, Result | BaseException], Any] | None,
        template_path: Any = None,
        include_paths: Sequence[Any] = (),
        **kwargs: Any,
    ) -> list[Result | BaseException]:
        """Run every row on the cluster; outcomes in input order.

        `concurrency` is how many rows of this batch are handed to the scheduler at
        once (queued or running); `max_in_flight` caps how many run.
        """
        shipped = ship_kwargs(kwargs)
        await asyncio.to_thread(self.start)
        await asyncio.to_thread(self._register_semaphore)
        job = _job(template, template_path, include_paths, shipped, self, with_semaphore=True)
        batch = _Batch(self, job, iter(enumerate(contexts)), max(1, concurrency), asyncio.get_running_loop())
        return await batch.run(on_result)

    def _register_semaphore(self) -> None:
        if self.max_in_flight is None:
            return
        with self._lock:
            if self._semaphore is not None:
                return
            client = self._client
            semaphore = distributed.Semaphore(
                max_leases=self.max_in_flight,
                name=self.semaphore_name,
                scheduler_rpc=client.scheduler,
                loop=client.loop,
            )
            try:
                semaphore.register()
            except ValueError as exc:
                _close_semaphore(semaphore, forget=False)
                raise ValueError(
                    f"semaphore {self.semaphore_name!r} already exists on this cluster with another cap: {exc}"
                ) from None
            self._semaphore = semaphore


def _close_semaphore(semaphore: Any, *, forget: bool) -> None:
    """Stop refreshing; with `forget`, drop this executor's own semaphore from a scheduler
    that outlives us, once no row holds a lease (rows cut short by an interrupt hold
    theirs until they end or the lease times out)."""
    callback = getattr(semaphore, "refresh_callback", None)
    if callback is not None:
        callback.stop()
    if forget:
        try:
            if semaphore.get_value() == 0:
                semaphore.close()
        except Exception:  # noqa: BLE001 - the cluster may already be gone
            pass


class _Batch:
    """One `run_batch` call: a driver thread submits rows and collects finished ones
    (Dask's `as_completed`); the caller's event loop receives them in finishing order."""

    _DONE = object()

    def __init__(self, executor: DaskExecutor, job: dict[str, Any], rows: Any, window: int, loop: Any) -> None:
        self.executor = executor
        self.client = executor._client
        self.job = job
        self.rows = rows
        self.window = window
        self.loop = loop
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.futures: dict[str, tuple[int, Any]] = {}
        self.prefix = f"struckdown-row-{uuid.uuid4().hex[:12]}"

    async def run(self, on_result: Callable[[int, Any], Any] | None) -> list[Any]:
        thread = threading.Thread(target=self._drive, name="struckdown-dask", daemon=True)
        thread.start()
        outcomes: dict[int, Any] = {}
        try:
            while True:
                item = await self.queue.get()
                if item is self._DONE:
                    break
                if isinstance(item, _Crash):
                    raise item.error
                index, outcome = item
                outcomes[index] = outcome
                if on_result is not None:
                    maybe = on_result(index, outcome)
                    if inspect.isawaitable(maybe):
                        await maybe
        finally:
            if thread.is_alive():
                self.stop.set()
                self._cancel_pending()
                await asyncio.to_thread(thread.join, 30)
        return [outcomes[i] for i in range(len(outcomes))]

    def _post(self, item: Any) -> None:
        try:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, item)
        except RuntimeError:  # the caller's loop is gone (interrupted)
            self.stop.set()

    def _cancel_pending(self) -> None:
        with self.lock:
            futures = [future for _, future in self.futures.values()]
        if futures:
            try:
                self.client.cancel(futures)
            except Exception:  # noqa: BLE001 - best effort while stopping
                log.debug("cancelling rows failed", exc_info=True)

    def _submit_next(self, completed: Any) -> bool:
        """Hand the next row to the scheduler; False when there is none (or we stop).
        A row that is not plain data fails on its own, here."""
        while not self.stop.is_set():
            try:
                index, context = next(self.rows)
            except StopIteration:
                return False
            try:
                row = _plain_context(context)
            except ValueError as exc:
                self._post((index, exc))
                continue
            key = f"{self.prefix}-{index}"
            future = self.client.submit(_run_row, self.job, row, key=key, pure=False, retries=self.executor.retries)
            with self.lock:
                self.futures[key] = (index, future)
            completed.add(future)
            return True
        return False

    def _drive(self) -> None:
        try:
            completed = distributed.as_completed(loop=self.client.loop, with_results=True, raise_errors=False)
            submitted = 0
            while submitted < self.window and self._submit_next(completed):
                submitted += 1
            for future, value in completed:
                with self.lock:
                    index, _ = self.futures.pop(future.key)
                if self.stop.is_set():
                    continue
                self._post((index, _outcome(future, value)))
                self._submit_next(completed)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's loop
            self._post(_Crash(exc))
        finally:
            self._post(self._DONE)


class _Crash:
    def __init__(self, error: BaseException) -> None:
        self.error = error


def _outcome(future: Any, value: Any) -> Any:
    """A row's Result or exception from what `as_completed` handed back."""
    if future.status == "finished":
        return _unpack(value)
    if isinstance(value, tuple) and len(value) == 3 and isinstance(value[1], BaseException):
        error = value[1]  # (type, exception, traceback) of a task that raised
    elif isinstance(value, BaseException):
        error = value  # cancelled
    else:
        error = RuntimeError(f"row task ended as {future.status}")
    if isinstance(error, TransientRowError):
        return _unpack(error.packed)
    return error


def _plain_context(context: Any) -> dict[str, Any]:
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


def _job(
    template: str, template_path: Any, include_paths: Sequence[Any], shipped: dict[str, Any],
    executor: DaskExecutor, *, with_semaphore: bool,
) -> dict[str, Any]:  # fmt: skip
    semaphore = None
    if with_semaphore and executor.max_in_flight is not None:
        semaphore = (executor.semaphore_name, executor.max_in_flight)
    return {
        "template": template,
        "template_path": None if template_path is None else os.fspath(template_path),
        "include_paths": tuple(os.fspath(p) for p in include_paths),
        "kwargs": shipped,
        "semaphore": semaphore,
        "retries": executor.retries,
        "retry_delay": executor.retry_delay,
    }


# -- what may travel -------------------------------------------------------------


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
    module = getattr(function, "__module__", None)
    qualname = getattr(function, "__qualname__", None)
    suggestion = f" such as '{module}:{qualname}'" if module and qualname and "<" not in qualname else ""
    raise ValueError(
        f"tools for a Dask batch must be importable names{suggestion}, not {type(tool).__name__} objects: "
        "functions cannot be shipped to workers, the workers import them"
    )


def _cache_spec(cache: Any) -> bool | str | None:
    if cache is None or isinstance(cache, bool):
        return cache
    if isinstance(cache, str | os.PathLike):
        return os.fspath(cache)
    raise ValueError(
        "cache= must be True, False, None or a directory for a Dask batch (each worker opens it), "
        f"not a {type(cache).__name__} object"
    )


# -- on the worker ----------------------------------------------------------------

_resolved: dict[Any, Any] = {}
_semaphores: dict[tuple[str, int], Any] = {}
_resolve_lock = threading.Lock()


async def _run_row(job: dict[str, Any], context: dict[str, Any]) -> tuple[Any, ...]:
    """One row, on a worker. Returns the packed Result or permanent error; raises
    TransientRowError for a transient one so that Dask retries the task."""
    from .api import complete_async

    try:
        kwargs = _worker_kwargs(job["kwargs"])
        if job["semaphore"] is None:
            result = await complete_async(
                job["template"], context, template_path=job["template_path"],
                include_paths=job["include_paths"], **kwargs,
            )  # fmt: skip
        else:
            async with await _semaphore(*job["semaphore"]):
                result = await complete_async(
                    job["template"], context, template_path=job["template_path"],
                    include_paths=job["include_paths"], **kwargs,
                )  # fmt: skip
    except Exception as exc:  # noqa: BLE001 - every row error goes back to the caller
        packed = _pack_error(exc)
        transient = job["retries"] > 0 and is_transient(exc)
        del exc
    else:
        return _pack(result)
    if not transient:
        return packed
    _quiet_retry_logs()
    if job["retry_delay"] > 0:
        await asyncio.sleep(job["retry_delay"])
    # Raised outside the except block: Dask pickles an error with its __context__
    # chain and tracebacks (tblib), which for a provider error is deep and heavy.
    raise TransientRowError(packed)


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


async def _probe(job: dict[str, Any]) -> tuple[Any, ...] | None:
    """Resolve the model, tools and deps here; the packed error, or None when all is well."""
    from .models import resolve_model

    try:
        kwargs = _worker_kwargs(job["kwargs"])
        resolve_model(kwargs["model"])
    except Exception as exc:  # noqa: BLE001 - handed back to the caller
        return _pack_error(exc)
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
        kwargs["model"] = _once(("model", shipped["model_factory"]), lambda: _import_name(shipped["model_factory"])())
    if shipped["deps_factory"] is not None:
        kwargs["deps"] = _once(("deps", shipped["deps_factory"]), lambda: _import_name(shipped["deps_factory"])())
    kwargs["tools"] = [tool for spec in shipped["tools"] for tool in _tools(spec)]
    return kwargs


def _once(key: Any, make: Callable[[], Any]) -> Any:
    """Resolve an importable thing once per worker process."""
    with _resolve_lock:
        if key not in _resolved:
            _resolved[key] = make()
        return _resolved[key]


def _import_name(spec: str) -> Any:
    module_name, _, attr = spec.partition(":")
    value: Any = importlib.import_module(module_name)
    for part in attr.split(".") if attr else ():
        value = getattr(value, part)
    return value


def _tools(spec: tuple[str, ...]) -> list[Any]:
    if spec[0] == "file":
        _, path, source = spec
        key = ("tools-file", path, hash(source))
        return _once(key, lambda: _public_tools(_module_from_source(path, source), path))
    name = spec[1]
    if ":" in name:
        return [_once(("tool", name), lambda: _import_name(name))]
    return _once(("tools-module", name), lambda: _public_tools(importlib.import_module(name), name))


def _module_from_source(path: str, source: str) -> types.ModuleType:
    """A tools file shipped as text: executed here as a module of its own. Its folder is
    on sys.path while it loads, so it can import its neighbours when the workers see
    the same file system."""
    name = f"struckdown_dask_tools_{abs(hash((path, source))):x}"
    module = types.ModuleType(name)
    module.__file__ = path
    sys.modules[name] = module
    folder = str(Path(path).parent)
    sys.path.insert(0, folder)
    try:
        exec(compile(source, path, "exec"), module.__dict__)  # noqa: S102 - the user's own tools file
    except BaseException:
        del sys.modules[name]
        raise
    finally:
        try:
            sys.path.remove(folder)
        except ValueError:
            pass
    return module


def _public_tools(module: types.ModuleType, where: str) -> list[Any]:
    """Public functions defined in the module (not imported ones), and pydantic-ai
    `Tool`s built there, as `sd --tools` picks them."""
    from pydantic_ai import Tool

    found: list[Any] = []
    for name, value in vars(module).items():
        if name.startswith("_"):
            continue
        if inspect.isfunction(value) and value.__module__ == module.__name__:
            found.append(value)
        elif isinstance(value, Tool) and getattr(value.function, "__module__", None) == module.__name__:
            found.append(value)
    if not found:
        raise ValueError(f"tools {where} define no public functions")
    return found


# -- packing results and errors for the trip back ----------------------------------
#
# `Result` is a read-only mapping with __slots__ and struckdown's errors take
# keyword-only or several constructor arguments, so neither survives default
# pickling (and `ModelError.__reduce__` drops the engine's `struckdown_slot` tag).
# This pickler rebuilds them from their state instead; cycles (a Result whose
# `halted` error points back at it) are kept. cloudpickle covers answer types
# created at run time. Tracebacks and chained causes stay behind. What still
# cannot be pickled comes back as a RuntimeError with the original text.


class _Pickler(cloudpickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, Result):
            state = (obj.results, obj._order, obj.halted)
            return (_blank, (type(obj),), state, None, None, _set_result)
        if isinstance(obj, StruckdownError):
            return (_blank_error, (type(obj), obj.args), dict(vars(obj)), None, None, _set_error)
        if isinstance(obj, BaseException):
            # The class's own reduction, not the copyreg one `distributed` installs (tblib),
            # which drags along tracebacks and the whole __cause__/__context__ chain.
            return obj.__reduce_ex__(pickle.HIGHEST_PROTOCOL)
        return super().reducer_override(obj)


def _blank(cls: type) -> Any:
    return cls.__new__(cls)


def _set_result(obj: Any, state: tuple[Any, ...]) -> None:
    results, order, halted = state
    object.__setattr__(obj, "results", results)
    object.__setattr__(obj, "_order", order)
    object.__setattr__(obj, "halted", halted)


def _blank_error(cls: type[BaseException], args: tuple[Any, ...]) -> BaseException:
    return cls.__new__(cls, *args)


def _set_error(obj: BaseException, state: dict[str, Any]) -> None:
    obj.__dict__.update(state)


def _dumps(value: Any) -> bytes:
    buffer = io.BytesIO()
    _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    return buffer.getvalue()


def _pack(result: Result) -> tuple[Any, ...]:
    try:
        return ("ok", _dumps(result))
    except Exception as exc:  # noqa: BLE001 - an answer that cannot travel fails its row
        return _pack_error(RuntimeError(f"the row's result cannot be sent back from the worker: {exc}"))


def _pack_error(exc: BaseException) -> tuple[Any, ...]:
    text = str(exc).strip()
    text = text if isinstance(exc, StruckdownError) or not text else f"{type(exc).__name__}: {text}"
    slot = getattr(exc, "struckdown_slot", None)
    try:
        blob: bytes | None = _dumps(exc)
    except Exception:  # noqa: BLE001 - fall back to the text
        blob = None
    return ("error", text or type(exc).__name__, slot, blob)


def _unpack(packed: Any) -> Any:
    if not isinstance(packed, tuple) or not packed:
        return RuntimeError(f"unexpected row outcome from the worker: {packed!r}")
    if packed[0] == "ok":
        try:
            return pickle.loads(packed[1])
        except Exception as exc:  # noqa: BLE001 - e.g. an answer type not importable here
            return RuntimeError(f"the row's result cannot be loaded here: {type(exc).__name__}: {exc}")
    _, text, slot, blob = packed
    error: BaseException | None = None
    if blob is not None:
        try:
            error = pickle.loads(blob)
        except Exception:  # noqa: BLE001 - an exception class only the worker knows
            error = None
    if not isinstance(error, BaseException):
        error = RuntimeError(text)
        if slot is not None:
            error.struckdown_slot = slot  # type: ignore[attr-defined]
    return error
