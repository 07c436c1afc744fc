"""The caller's side of a Dask batch: the cluster and client, and the rows in flight.

`DaskExecutor` owns the connection (a private `LocalCluster` or a running
scheduler) and the cluster-wide semaphore that caps rows in flight. Each
`run_batch` call is a `_Batch`: a driver thread submits rows to the scheduler a
window at a time and collects them with Dask's `as_completed`, handing each
outcome to the caller's event loop as it finishes. What the rows and keyword
arguments may contain is decided in `shipping`; what runs on the workers is in
`worker`.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import os
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import distributed

from ..errors import ConfigurationError
from ..results import Result
from .budget import close_budget, open_budget
from .packing import unpack
from .shipping import plain_context, ship_kwargs
from .worker import TransientRowError, close_mcp_sessions, probe_worker, run_row

log = logging.getLogger(__package__)  # "struckdown.distributed", as before the package split


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
        outcomes = await asyncio.to_thread(self._client.run, probe_worker, job)
        for worker, packed in outcomes.items():
            if packed is not None:
                error = unpack(packed)
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
        batch_limits, max_cost = kwargs.pop("batch_limits", None), kwargs.pop("max_cost", None)  # the whole batch's
        shipped = ship_kwargs(kwargs)
        await asyncio.to_thread(self.start)
        await asyncio.to_thread(self._register_semaphore)
        job = _job(template, template_path, include_paths, shipped, self, with_semaphore=True)
        job["budget"] = await asyncio.to_thread(open_budget, self._client, batch_limits, max_cost)
        batch = _Batch(self, job, iter(enumerate(contexts)), max(1, concurrency), asyncio.get_running_loop())
        try:
            return await batch.run(on_result)
        finally:
            await asyncio.to_thread(close_budget, self._client, job["budget"])

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
            if self.job["kwargs"].get("mcp"):
                await asyncio.to_thread(self._close_mcp_sessions)
        return [outcomes[i] for i in range(len(outcomes))]

    def _close_mcp_sessions(self) -> None:
        """Each worker held one session per MCP server for this batch: close them."""
        try:
            self.client.run(close_mcp_sessions, self.job["batch"])
        except Exception:  # noqa: BLE001 - a worker that is gone took its sessions with it
            log.debug("closing the MCP sessions on the workers failed", exc_info=True)

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
                row = plain_context(context)
            except ValueError as exc:
                self._post((index, exc))
                continue
            key = f"{self.prefix}-{index}"
            future = self.client.submit(run_row, self.job, row, key=key, pure=False, retries=self.executor.retries)
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
        return unpack(value)
    if isinstance(value, tuple) and len(value) == 3 and isinstance(value[1], BaseException):
        error = value[1]  # (type, exception, traceback) of a task that raised
    elif isinstance(value, BaseException):
        error = value  # cancelled
    else:
        error = RuntimeError(f"row task ended as {future.status}")
    if isinstance(error, TransientRowError):
        return unpack(error.packed)
    return error


def _job(
    template: str, template_path: Any, include_paths: Sequence[Any], shipped: dict[str, Any],
    executor: DaskExecutor, *, with_semaphore: bool,
) -> dict[str, Any]:  # fmt: skip
    """The plain data every row's task gets: template, paths, shipped kwargs, semaphore, retries."""
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
        "batch": uuid.uuid4().hex,  # keys what a worker keeps for this batch (its MCP sessions)
    }
