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

import dask
import distributed

from .. import log as _log  # noqa: F401 - the library's NullHandler
from ..errors import ConfigurationError
from ..results import Result
from .budget import close_budget, open_budget
from .packing import unpack, unpack_outcomes
from .shipping import plain_context, ship_kwargs
from .worker import TransientRowError, close_journal, close_mcp_sessions, probe_prices, probe_worker, run_rows

log = logging.getLogger(__package__)

#: The private cluster does without what costs CPU in every process all the time and
#: serves a dashboard or a long-lived shared cluster: the workers' statistical
#: profiler (a stack sample every 10 ms), the host monitors, work stealing (rows wait
#: at the scheduler until a worker has a free slot), a memory check ten times a second,
#: and the event-loop health tick every 20 ms in each scheduler, nanny and worker (an
#: idle two-worker cluster spent 87 ms of CPU a second, 17 ms with a tick a second; a
#: loop blocked for 3 s is still reported).
QUIET_CLUSTER = {
    "distributed.admin.tick.interval": "1s",
    "distributed.worker.profile.enabled": False,
    "distributed.admin.system-monitor.interval": "5s",
    "distributed.admin.system-monitor.disk": False,
    "distributed.admin.system-monitor.gil.enabled": False,
    "distributed.scheduler.work-stealing": False,
    "distributed.worker.memory.monitor-interval": "1s",
}  # "struckdown.distributed", as before the package split


class DaskExecutor:
    """Runs the rows of `complete_batch_async` on a Dask cluster.

    `address=None` starts a private `LocalCluster` on 127.0.0.1 (no dashboard,
    `n_workers` worker processes) that `close()` shuts down; `"tcp://host:port"`
    connects to a running scheduler; `client=` uses a `distributed.Client` you
    manage (never closed here).

    `max_in_flight` caps the rows running at once across the whole cluster (None:
    no cap). On the private cluster each worker process holds its share of it (no
    round trip to the scheduler per row), so it starts at most `max_in_flight`
    workers; on a cluster you run, or with `semaphore_name`, it is a
    `distributed.Semaphore` of that name (give several executors the same name and
    the same cap to share one budget). `retries` is how often a row runs again
    after a transient provider error, waiting `retry_delay` seconds first.
    `keep_messages=False` sends each Result back without its slots' messages (the
    conversations: most of a Result's weight and of the time it takes to unpickle
    it here); answers, usage, tool calls and `halted` stay. `sd batch` does so.

    Rows travel in chunks, one Dask task each, sized to about a tenth of a second of
    work (see `_Batch`). Dask runs at most `nthreads` tasks per worker, async ones
    included: a chunk waiting on the network holds a slot. The private cluster
    therefore gets `threads_per_worker = ceil(max_in_flight / n_workers)` slots
    unless you say otherwise; start external workers with `dask worker --nthreads N`
    to match.
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
        keep_messages: bool = True,
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
        self.keep_messages = keep_messages
        # A private cluster gets no more workers than rows may run at once (each
        # worker takes a share of the cap, and a worker with no share would idle).
        private = address is None and client is None
        self.n_workers = min(n_workers, max_in_flight) if private and max_in_flight is not None else n_workers
        self.threads_per_worker = threads_per_worker or max(1, math.ceil((max_in_flight or 8) / max(1, self.n_workers)))
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
                with dask.config.set(QUIET_CLUSTER):  # the workers take the config they start with
                    self._cluster = self._local_cluster()
                self._client = distributed.Client(self._cluster, set_as_default=False)
            else:
                self._client = distributed.Client(self.address, set_as_default=False)
        return self

    def _local_cluster(self) -> Any:
        return distributed.LocalCluster(
            host="127.0.0.1",
            dashboard_address=None,
            n_workers=self.n_workers,
            threads_per_worker=self.threads_per_worker,
            processes=True,
            silence_logs=logging.ERROR,
            # Ctrl-C at a terminal reaches the whole process group: the workers ignore it
            # (each printed a KeyboardInterrupt traceback), and this process stops them in order
            preload=["struckdown.distributed.quiet_worker"],
            # No dashboard; the scheduler's small HTTP server (health, metrics) gets
            # a free loopback port instead of 8787, which another cluster may hold.
            scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
        )

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
        collect: bool = True,
        **kwargs: Any,
    ) -> list[Result | BaseException]:
        """Run every row on the cluster; outcomes in input order (with `collect=False`,
        an empty list: the rows reach only `on_result`, and none is kept here).

        `contexts` is read lazily, as rows are handed to the scheduler: at least
        `concurrency` rows at once (queued or running), more when rows travel in
        chunks; `max_in_flight` caps how many run. `max_requests=` caps the model
        requests in flight: on a private cluster the cap of the whole batch, split
        over its workers; on a cluster you run, each worker process's part of it
        (split over the workers connected when the batch starts).
        """
        from ..run.ledger import Budget

        budget, kwargs = Budget.for_batch(kwargs, kwargs.pop("batch_limits", None))  # the whole batch's
        shipped = ship_kwargs(kwargs)
        journal = _open_journal(shipped.get("journal"))  # locked here, written by the workers (SPEC §25)
        try:
            return await self._run_batch(template, contexts, concurrency, on_result, template_path, include_paths,
                                         collect, shipped, budget, journal is not None)
        finally:
            if journal is not None:
                from ..run.durable.effects import release

                release(journal)

    async def _run_batch(
        self, template: str, contexts: Iterable[Mapping[str, Any]], concurrency: int, on_result: Any,
        template_path: Any, include_paths: Sequence[Any], collect: bool, shipped: dict[str, Any],
        budget: Any, journaled: bool,
    ) -> list[Result | BaseException]:  # fmt: skip
        await asyncio.to_thread(self.start)
        own_cap = self._cluster is not None and not self._shared_semaphore
        workers = self.n_workers if self._cluster is not None else await asyncio.to_thread(self._count_workers)
        if not own_cap:
            await asyncio.to_thread(self._register_semaphore)
        job = _job(template, template_path, include_paths, shipped, self, with_semaphore=not own_cap)
        job["caps"] = {
            "batch": job["batch"],
            "workers": workers,
            "rows": self.max_in_flight if own_cap else None,
            "requests": shipped.get("max_requests"),
        }
        job["freeze_heap"] = self._cluster is not None  # private workers live for the batch (see worker.settle_heap)
        job["budget"] = await asyncio.to_thread(open_budget, self._client, budget)
        if job["budget"] is not None and budget.max_cost is not None:  # SPEC §13: an unpriced model, before any row
            try:
                await self._check_prices(job)
            except BaseException:
                await asyncio.to_thread(close_budget, self._client, job["budget"])
                raise
        rows = iter(enumerate(contexts))
        batch = _Batch(self, job, rows, max(1, concurrency), asyncio.get_running_loop(), workers)
        try:
            return await batch.run(on_result, collect=collect)
        finally:
            await asyncio.to_thread(close_budget, self._client, job["budget"])
            if journaled:  # each worker held its shard for the batch
                await asyncio.to_thread(batch.close_journals)

    async def _check_prices(self, job: dict[str, Any]) -> None:
        """Every worker prices the models the rows may use (the workers' environment
        resolves them), or the batch is a ConfigurationError before any row runs."""
        outcomes = await asyncio.to_thread(self._client.run, probe_prices, job, job["budget"]["budget"])
        for worker, packed in outcomes.items():
            if packed is not None:
                error = unpack(packed)
                if isinstance(error, ConfigurationError) and len(outcomes) > 1 and self._cluster is None:
                    raise ConfigurationError(f"on Dask worker {worker}: {error}") from None
                raise error

    def _count_workers(self) -> int:
        try:
            return max(1, len(self._client.scheduler_info().get("workers", {})))
        except Exception:  # noqa: BLE001 - a count for splitting caps; one is safe
            return 1

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


def _open_journal(path: str | None) -> Any:
    """The batch's effect journal, opened (and locked) in this process before any row:
    its header names the job the workers' effect ids hash; None without `journal=`."""
    if path is None:
        return None
    from ..run.durable.effects import acquire

    return acquire(path)


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


#: About how long (seconds) the rows of one chunk (one Dask task) take together,
#: so about how long a finished row may wait for the rest of its chunk before it
#: reaches the caller (and the journal); chunk sizes follow from it.
CHUNK_SECONDS = 0.5
#: The most rows in one task.
MAX_CHUNK = 256


class _Batch:
    """One `run_batch` call: a driver thread submits chunks of rows and collects finished
    ones (Dask's `as_completed`); the caller's event loop receives their rows in
    finishing order.

    A task costs a few milliseconds of the scheduler's, the client's and the
    worker's time, as much as an instant row, so rows travel in chunks. Chunks
    start at one row; after each, the size is set from how long a row ran (`p`, a
    moving average the workers report) and how many rows run at once on a worker
    (`slots`, its share of the cap): `slots x CHUNK_SECONDS / p`, so the `slots`
    rows that run side by side finish their chunk in about `CHUNK_SECONDS`; it grows
    at most twofold at a time. Instant rows share a task (up to `MAX_CHUNK`); rows
    of several seconds travel alone, as they finish.
    At least `window` rows (and two chunks per worker) are handed to the scheduler
    at a time; the cap on rows decides how many run."""

    _DONE = object()

    def __init__(
        self, executor: DaskExecutor, job: dict[str, Any], rows: Any, window: int, loop: Any, workers: int
    ) -> None:
        self.executor = executor
        self.client = executor._client
        self.job = job
        self.rows = rows
        self.window = window
        self.workers = max(1, workers)
        self.loop = loop
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.futures: dict[str, tuple[list[int], Any]] = {}
        self.prefix = f"struckdown-rows-{uuid.uuid4().hex[:12]}"
        self.chunk = 1
        self.outstanding = 0  # rows handed to the scheduler and not back yet
        self.exhausted = False
        self.submitted = 0
        self.row_seconds: float | None = None  # moving average of a row's run time
        cap = executor.max_in_flight or executor.threads_per_worker * self.workers
        self.slots = max(1, cap // self.workers)  # rows that run at once on one worker

    async def run(self, on_result: Callable[[int, Any], Any] | None, *, collect: bool) -> list[Any]:
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
                for index, outcome in item:
                    if collect:
                        outcomes[index] = outcome
                    if on_result is not None:
                        maybe = on_result(index, outcome)
                        if inspect.isawaitable(maybe):
                            await maybe
                del item
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

    def close_journals(self) -> None:
        """Each worker held its shard of the effect journal for this batch: give it back."""
        try:
            self.client.run(close_journal, self.job["batch"], self.job["kwargs"]["journal"])
        except Exception:  # noqa: BLE001 - a worker that is gone gave its shard back with its process
            log.debug("closing the effect journal on the workers failed", exc_info=True)

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

    def _fill(self, completed: Any) -> None:
        """Hand chunks to the scheduler until the window is full or the rows run out."""
        while not self.exhausted and not self.stop.is_set():
            if self.outstanding >= max(self.window, 2 * self.workers * self.chunk):
                return
            self._submit_chunk(completed)

    def _submit_chunk(self, completed: Any) -> None:
        """The next `chunk` rows as one task. A row that is not plain data fails on its
        own, here."""
        rows: list[tuple[int, dict[str, Any]]] = []
        while len(rows) < self.chunk and not self.stop.is_set():
            try:
                index, context = next(self.rows)
            except StopIteration:
                self.exhausted = True
                break
            try:
                rows.append((index, plain_context(context)))
            except ValueError as exc:
                self._post([(index, exc)])
        if not rows:
            return
        key = f"{self.prefix}-{self.submitted}"
        self.submitted += 1
        future = self.client.submit(run_rows, self.job, rows, key=key, pure=False)
        with self.lock:
            self.futures[key] = ([index for index, _ in rows], future)
        self.outstanding += len(rows)
        completed.add(future)

    def _tune(self, row_seconds: float) -> None:
        average = self.row_seconds
        average = row_seconds if average is None else 0.7 * average + 0.3 * row_seconds
        self.row_seconds = average
        ideal = int(self.slots * CHUNK_SECONDS / max(average, 1e-4))
        self.chunk = max(1, min(MAX_CHUNK, 2 * self.chunk, ideal))

    def _drive(self) -> None:
        try:
            completed = distributed.as_completed(loop=self.client.loop, with_results=True, raise_errors=False)
            self._fill(completed)
            for future, value in completed:
                with self.lock:
                    indices, _ = self.futures.pop(future.key)
                self.outstanding -= len(indices)
                if self.stop.is_set():
                    continue
                pairs, row_seconds = _chunk_outcomes(future, value, indices)
                if row_seconds is not None:
                    self._tune(row_seconds)
                self._post(pairs)
                del value, pairs
                self._fill(completed)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's loop
            self._post(_Crash(exc))
        finally:
            self._post(self._DONE)


class _Crash:
    def __init__(self, error: BaseException) -> None:
        self.error = error


def _chunk_outcomes(future: Any, value: Any, indices: list[int]) -> tuple[list[tuple[int, Any]], float | None]:
    """A chunk's `(index, Result or exception)` pairs and the mean seconds a row ran
    (None when the task itself failed: each of its rows has that error)."""
    if future.status == "finished":
        packed, row_seconds = value
        return unpack_outcomes(packed, indices), row_seconds
    if isinstance(value, tuple) and len(value) == 3 and isinstance(value[1], BaseException):
        error = value[1]  # (type, exception, traceback) of a task that raised
    elif isinstance(value, BaseException):
        error = value  # cancelled
    else:
        error = RuntimeError(f"row task ended as {future.status}")
    if isinstance(error, TransientRowError):
        error = unpack(error.packed)
    return [(index, error) for index in indices], None


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
        "keep_messages": executor.keep_messages,
        "batch": uuid.uuid4().hex,  # keys what a worker keeps for this batch (its MCP sessions, its caps)
    }

