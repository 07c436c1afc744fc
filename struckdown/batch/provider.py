"""Provider batch APIs for batches of rows (SPEC §21), on pydantic-ai's `BatchModelRequests`.

`complete_batch(…, provider_batch=True)` sends every model request of every row (slots,
guards, tool rounds) through the provider's batch API at about half the price. The
batching itself is pydantic-ai's: requests made through one `BatchModelRequests` share
its pool, a batch is submitted when it holds `max_requests` requests or its oldest one
has waited `max_wait`, and a request waits for its batch's result (checked every
`poll_interval`, growing). What this module adds for a batch of rows:

* **Rows advance together.** When every row in flight is waiting on the batch API (its
  requests queued, or in a batch the provider is still running) and some request is
  queued, the queue is submitted at once instead of after `max_wait`: nothing else could
  join it. So R rows of S slots make about S x ceil(R / max_requests) batches.
* **The journal.** When a batch is created, each of its requests is recorded for its row
  (`on_record`): the batch and the request's ID in it. A rerun of the row (`records=`,
  what `sd batch --resume` passes) matches its requests to those records by a
  fingerprint of the request, and continues the recorded batch request instead of
  submitting it again: no request is paid twice.
* **Counts and cost.** `counts` (`BatchCounts`): batches submitted, pending and done,
  requests, rows done, and the cost of the answered requests at batch prices where
  genai-prices has them, else at list price x `discount` (the providers' documented
  50 %). Batched responses are marked `provider_details["processing"] = "batch"`, which
  is what selects batch prices in genai-prices, for any meter that prices them.

Model layering: the batching sits right around the provider's model, inside the response
cache (a cache hit never enters a batch) and inside any retry, fallback or metering
wrapper (those wrap the model the slot gets; a meter there sees a `state="suspended"`
response for a submission and for each check that finds the batch still running, and
the answer as a normal response). The per-request limiter (`max_requests=` of the run)
is not held while a request waits for its batch, which would cap a batch at the
limiter's size and, with `max_wait=None`, never fill it: it bounds the batch API calls
(create, status, results) instead.

Struckdown never cancels a provider batch: an interrupted or cancelled job leaves its
batches running, so a resumed job collects their results (cancel one in the provider's
console to stop it).

This module is the job (`ProviderBatch`: rows, request states, the journal, counts);
`provider_batch_models.py` holds the model wrappers that report to it, and
`provider_batch_state.py` what both keep (counts, rows, requests, prices).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import AsyncGenerator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from datetime import timedelta
from typing import Any

from pydantic import TypeAdapter
from pydantic_ai.capabilities import BatchModelRequests
from pydantic_ai.messages import ModelResponse
from pydantic_ai.models.batch import Batch, EncodedBatchRequest

from ..log import logger as log
from ..run.slot_run import current, entered
from .provider_models import CountedModel, TrackedModel

# the names of provider_batch_state.py, split from this module, importable from here as before
from .provider_state import DEFAULT_DISCOUNT as DEFAULT_DISCOUNT
from .provider_state import BatchCounts as BatchCounts
from .provider_state import BatchedRequest, BatchedRow, OnRecord, State
from .provider_state import RowRecords as RowRecords
from .provider_state import batch_prices as batch_prices

#: Requests per batch unless the caller says otherwise (pydantic-ai's default).
DEFAULT_MAX_REQUESTS = 1_000
#: Seconds the oldest queued request waits for others before its batch is submitted.
DEFAULT_MAX_WAIT = 30.0

#: Ended rows whose records `records_of` can still give (at least).
_LEFT_KEPT = 1_000
#: Event-loop steps the rows-advance-together rule waits for the loop to get quiet.
_MAX_TICKS = 10_000


class ProviderBatch:
    """Provider batching for one batch of rows (pass it as `complete_batch(provider_batch=…)`).

    `batching`: a `pydantic_ai.capabilities.BatchModelRequests` (its `max_requests`,
    `max_wait`, `poll_interval`, …), or None for one built from `max_requests` and
    `max_wait` (seconds; None: only full batches and the rows-advance-together rule
    submit; both are the given batching's own when there is one).
    `records`: by row position, what an earlier run's `on_record` received for rows that
    did not finish. `on_record(records)`: called when a batch is created, with the new
    records of every row that has a request in it (row position → that row's records).
    `on_progress(counts)`: called when a batch is submitted, resumed or done.
    `discount`: the batch price against the list price where the price data has none.

    One job at a time: the counts and the rows in flight belong to the `complete_batch`
    call running it.
    """

    def __init__(
        self,
        batching: BatchModelRequests | None = None,
        *,
        max_requests: int | None = None,
        max_wait: float | None = DEFAULT_MAX_WAIT,
        discount: float = DEFAULT_DISCOUNT,
        records: Mapping[int, Mapping[str, Any]] | None = None,
        on_record: OnRecord | None = None,
        on_progress: Callable[[BatchCounts], Any] | None = None,
    ) -> None:
        if batching is None:
            batching = BatchModelRequests(
                max_requests=max_requests or DEFAULT_MAX_REQUESTS,
                max_wait=None if max_wait is None else timedelta(seconds=max_wait),
            )
        elif max_requests is not None:
            raise ValueError("give max_requests to the BatchModelRequests, not beside it")
        if not 0 < discount <= 1:
            raise ValueError(f"discount must be in (0, 1], not {discount!r}")
        self.batching = batching
        self.discount = discount
        self.records = {int(k): dict(v) for k, v in (records or {}).items()}
        self.on_record = on_record
        self.on_progress = on_progress
        self._keyed = on_record is not None or bool(self.records)
        self.counts = BatchCounts()
        self.limiter: Any = None  # the job's request cap (anyio.CapacityLimiter), around batch API calls
        self._wrapped: dict[int, tuple[Any, Any]] = {}  # id(model) → (model, its batched wrapper)
        self._encoded: dict[tuple[str, str], list[BatchedRequest]] = {}
        self._known: set[str] = set()
        self._ended: set[str] = set()
        self._unpriced: set[tuple[str | None, str | None]] = set()
        self._rows: dict[int, BatchedRow] = {}
        self._left: OrderedDict[int, RowRecords] = OrderedDict()  # records of rows that ended, for records_of
        self._workers = 0
        self._in_flight = 0
        self._blocked = 0
        self._queued = 0
        self._flush: asyncio.Task[None] | None = None
        self._tick_pending = False
        self._ticks = 0

    @property
    def max_requests(self) -> int:
        return self.batching.max_requests

    def __repr__(self) -> str:
        return f"ProviderBatch(max_requests={self.max_requests}, max_wait={self.batching.max_wait})"

    # -- the model ------------------------------------------------------------
    def wrap(self, model: Any) -> Any:
        """`model` with its requests sent through the batch API (one wrapper per model)."""
        hit = self._wrapped.get(id(model))
        if hit is not None and hit[0] is model:
            return hit[1]
        if getattr(model, "batch_max_requests", None) is None:
            from ..errors import ConfigurationError

            raise ConfigurationError(
                f"provider batching needs a model with a batch API: OpenAI's Responses models "
                f"(openai:… or openai-responses:…, not openai-chat:…), Anthropic, Google (FunctionModel "
                f"and TestModel in tests); {_without_batch_api(model)}"
            )
        batched = self.batching.get_wrapper_model(CountedModel(model, self))
        wrapper = TrackedModel(batched if batched is not None else model, self)
        self._wrapped[id(model)] = (model, wrapper)
        return wrapper

    # -- the job ----------------------------------------------------------------
    def check(self, environment: Any, program: Any, options: Mapping[str, Any], concurrency: int, rows: Any) -> None:
        """Before any row: the run's model has a batch API (else one ConfigurationError, not
        one per row), and enough rows run at once to fill a batch (else a warning)."""
        if program.needs_model:
            self.wrap(environment.resolve_model(options.get("model")))
        known = len(rows) if hasattr(rows, "__len__") else None
        if concurrency < self.max_requests and (known is None or known > concurrency):
            from ..notices import warn

            message = (
                f"provider_batch: only {concurrency} rows run at once, so a batch holds about {concurrency} "
                f"requests per slot, not up to {self.max_requests}; pass concurrency={self.max_requests} "
                "to fill the batches"
            )
            log.warning(message)
            warn(message)

    @asynccontextmanager
    async def session(self, limiter: Any = None) -> AsyncGenerator[ProviderBatch, None]:
        """Around a job: the batching's lifetime on this event loop and the request cap."""
        self.limiter = limiter
        self._keyed = self.on_record is not None or bool(self.records)
        try:
            async with self.batching:
                yield self
        finally:
            if self._flush is not None and not self._flush.done():
                self._flush.cancel()
            self._flush = None
            self._tick_pending = False
            self.limiter = None

    @contextmanager
    def worker(self) -> Iterator[None]:
        """Around a loop that takes rows one after another."""
        self._workers += 1
        try:
            yield
        finally:
            self._workers -= 1
            self._check_idle()

    @contextmanager
    def row(self, index: int) -> Iterator[None]:
        """Around one row: its requests are recorded for, and matched against, row `index`."""
        recorded = self.records.pop(index, {})
        row = BatchedRow(index, dict(recorded), dict(recorded))
        self._rows[index] = row
        self._in_flight += 1
        try:
            with entered(batch_row=row):
                yield
        finally:
            for request in list(row.open):
                self._close(request)
            self._rows.pop(index, None)
            if row.records:
                self._left[index] = row.records
                while len(self._left) > max(_LEFT_KEPT, 2 * self.max_requests):
                    self._left.popitem(last=False)
            self._in_flight -= 1
            self.counts.rows_done += 1
            self._check_idle()

    def records_of(self, index: int) -> RowRecords:
        """The batch requests of row `index`, which ended (asked once, right after it ended):
        what a journal keeps for a row that failed or halted, so that running it again
        collects them instead of submitting them again."""
        row = self._rows.get(index)
        return dict(row.records) if row is not None else self._left.pop(index, {})

    # -- request states -------------------------------------------------------
    def _open(self, row: BatchedRow, key: str) -> BatchedRequest:
        request = BatchedRequest(row, key)
        row.open.append(request)
        self._queued += 1
        self._row_changed(row)
        return request

    def _set(self, request: BatchedRequest, state: State) -> None:
        if request.state == state or request not in request.row.open:
            return
        self._queued += (state == "queued") - (request.state == "queued")
        request.state = state
        self._row_changed(request.row)

    def _close(self, request: BatchedRequest) -> None:
        row = request.row
        if request not in row.open:
            return
        row.open.remove(request)
        if request.state == "queued":
            self._queued -= 1
        if request.response_id is not None:
            row.by_response.pop(request.response_id, None)
        if request.body is not None:
            waiting = self._encoded.get(request.body)
            if waiting and request in waiting:
                waiting.remove(request)
                if not waiting:
                    del self._encoded[request.body]
            request.body = None
        self._row_changed(row)

    def _row_changed(self, row: BatchedRow) -> None:
        """A row is blocked when all it waits on is the batch API: requests queued, or in a
        batch the provider is still running (not one whose result is there to collect)."""
        blocked = bool(row.open) and all(r.state != "ready" for r in row.open)
        if blocked != row.blocked:
            row.blocked = blocked
            self._blocked += 1 if blocked else -1
            if blocked:
                self._check_idle()

    def _idle(self) -> bool:
        return bool(
            self._queued
            and self._in_flight
            and self._in_flight == self._workers
            and self._blocked == self._in_flight
            and (self._flush is None or self._flush.done())
        )

    def _check_idle(self) -> None:
        """Submit the queues now when every row in flight waits on the batch API, every
        worker is in a row and nothing else on the event loop is ready to run (a row's
        other segment on its way to its own request): no request can join them before
        `max_wait` but one that waits for them."""
        if self._idle() and not self._tick_pending:
            self._later_check()

    def _later_check(self) -> None:
        """After the current step (a request encoded now is in its queue by then)."""
        if self._tick_pending:
            return
        try:
            asyncio.get_running_loop().call_soon(self._idle_tick)
        except RuntimeError:
            return
        self._tick_pending = True

    def _idle_tick(self) -> None:
        self._tick_pending = False
        if not self._idle():
            self._ticks = 0
            return
        loop = asyncio.get_running_loop()
        # asyncio's runnable callbacks: the loop is not quiet yet (unless it never gets
        # quiet, as with a task that keeps yielding: then after `_MAX_TICKS` steps anyway)
        if getattr(loop, "_ready", None) and self._ticks < _MAX_TICKS:
            self._ticks += 1
            self._later_check()
            return
        self._ticks = 0
        self._flush = loop.create_task(self.batching.flush())

    # -- events from the wrappers --------------------------------------------
    def _encoded_request(self, encoded: EncodedBatchRequest) -> None:
        request: BatchedRequest | None = current().batch_request
        if request is not None and request in request.row.open:
            self._set(request, "queued")  # a resubmission queues again
            request.body = (encoded.group, encoded.body)
            self._encoded.setdefault(request.body, []).append(request)
        self._later_check()

    def _batch_created(self, batch: Batch, requests: Sequence[EncodedBatchRequest]) -> None:
        self.counts.submitted += 1
        self.counts.requests += len(requests)
        self._known.add(batch.id)
        changed: dict[int, RowRecords] = {}
        entry_batch = _batch_json(batch)
        for encoded in requests:
            waiting = self._encoded.get((encoded.group, encoded.body))
            if not waiting:
                continue
            request = waiting.pop(0)
            if not waiting:
                del self._encoded[(encoded.group, encoded.body)]
            request.body = None
            request.row.records[request.key] = {"batch": entry_batch, "custom_id": encoded.custom_id}
            changed[request.row.index] = dict(request.row.records)
        if changed and self.on_record is not None:
            self.on_record(changed)
        self._progress()

    def _batch_ended(self, batch: Batch) -> None:
        if batch.id not in self._ended:
            self._ended.add(batch.id)
            self.counts.done += 1
            self._progress()

    def _resumed(self, batch_id: str) -> None:
        if batch_id not in self._known:
            self._known.add(batch_id)
            self.counts.resumed += 1
            self._progress()

    def _answered(self, response: ModelResponse, system: str | None = None) -> None:
        self.counts.answered += 1
        details = response.provider_details or {}
        if "processing" not in details:
            # what selects batch prices in genai-prices, for whoever prices this response
            response.provider_details = {**details, "processing": "batch"}
        prices = self._prices(response, system)
        if prices is not None:
            batch, listed = prices
            self.counts.cost = (self.counts.cost or 0.0) + batch
            self.counts.list_cost = (self.counts.list_cost or 0.0) + listed

    def _prices(self, response: ModelResponse, system: str | None) -> tuple[float, float] | None:
        who = (response.model_name, response.provider_name or system)
        if who in self._unpriced or not response.model_name:
            return None
        prices = batch_prices(response, discount=self.discount, provider=system)
        if prices is None:
            self._unpriced.add(who)
        return prices

    def _progress(self) -> None:
        if self.on_progress is not None:
            self.on_progress(self.counts)


def provider_batch_of(value: Any) -> ProviderBatch | None:
    """`provider_batch=` as given: True, a `BatchModelRequests`, a `ProviderBatch`, or None/False."""
    if value is None or value is False:
        return None
    if value is True:
        return ProviderBatch()
    if isinstance(value, ProviderBatch):
        return value
    if isinstance(value, BatchModelRequests):
        return ProviderBatch(value)
    raise TypeError(
        f"provider_batch must be True, a pydantic_ai.capabilities.BatchModelRequests or a "
        f"struckdown.ProviderBatch, not {type(value).__name__}"
    )


_BATCH_ADAPTER = TypeAdapter(Batch)


def _batch_json(batch: Batch) -> dict[str, Any]:
    dumped: dict[str, Any] = _BATCH_ADAPTER.dump_python(batch, mode="json")
    return dumped


def _without_batch_api(model: Any) -> str:
    """Which model has no batch API, named as the advice above names models: a Chat
    Completions model is `openai-chat:NAME` (pydantic-ai's own label says `openai:`,
    the form that would have had one), with the string to use instead."""
    from ..models import model_label

    if type(model).__name__ != "OpenAIChatModel":
        return f"{model_label(model)} has none"
    name = getattr(model, "model_name", "")
    base = str(getattr(model, "base_url", None) or "").rstrip("/")
    if "api.openai.com" in base:
        return f"openai-chat:{name} (Chat Completions) has none; use openai:{name}"
    return f"openai-chat:{name} at {base} (an OpenAI-compatible server) has none"
