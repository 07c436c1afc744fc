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
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

from pydantic import TypeAdapter
from pydantic_ai.capabilities import BatchModelRequests
from pydantic_ai.exceptions import SuspendedResponseExpired
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import CompletedStreamedResponse, Model, ModelRequestParameters, StreamedResponse
from pydantic_ai.models.batch import Batch, BatchRequest, BatchResult, EncodedBatchRequest
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings

log = logging.getLogger("struckdown")

#: What batch APIs cost against the list price when the price data has no batch price
#: (OpenAI, Anthropic and Google document 50 %).
DEFAULT_DISCOUNT = 0.5
#: Requests per batch unless the caller says otherwise (pydantic-ai's default).
DEFAULT_MAX_REQUESTS = 1_000
#: Seconds the oldest queued request waits for others before its batch is submitted.
DEFAULT_MAX_WAIT = 30.0

#: A row's journal record: request key → {"batch": <Batch as JSON>, "custom_id": str}.
RowRecords = dict[str, dict[str, Any]]
OnRecord = Callable[[dict[int, RowRecords]], Any]

State = Literal["queued", "running", "ready"]
#: Ended rows whose records `records_of` can still give (at least).
_LEFT_KEPT = 1_000
#: Event-loop steps the rows-advance-together rule waits for the loop to get quiet.
_MAX_TICKS = 10_000
#: Checks in a row of a batch found ended at submission (the submission, and resubmissions).
_READS_AT_ONCE = 8


@dataclass
class BatchCounts:
    """What a provider-batched job has done so far (`ProviderBatch.counts`)."""

    submitted: int = 0  # batches this job created
    resumed: int = 0  # batches an earlier run created that this job waits on
    done: int = 0  # batches that ended and whose results were read
    requests: int = 0  # requests submitted in the batches this job created
    continued: int = 0  # requests continued from an earlier run's batch instead of submitted again
    answered: int = 0  # batched requests that got their answer
    rows_done: int = 0
    cost: float | None = None  # the answered requests at batch prices (None: no price known)
    list_cost: float | None = None  # the same requests at list prices

    @property
    def pending(self) -> int:
        """Batches submitted (or resumed) whose results are not read yet."""
        return self.submitted + self.resumed - self.done

    @property
    def requests_per_batch(self) -> float:
        return self.requests / self.submitted if self.submitted else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "submitted": self.submitted, "resumed": self.resumed, "done": self.done, "pending": self.pending,
            "requests": self.requests, "continued": self.continued, "answered": self.answered,
            "rows_done": self.rows_done, "requests_per_batch": self.requests_per_batch,
            "cost": self.cost, "list_cost": self.list_cost,
        }  # fmt: skip


@dataclass(eq=False)
class _Request:
    """One model request of a row, from its submission until its answer."""

    row: _Row
    key: str
    state: State = "queued"
    body: tuple[str, str] | None = None  # (group, body) while encoded but not yet in a created batch
    response_id: str | None = None


@dataclass(eq=False)
class _Row:
    index: int
    recorded: RowRecords  # what an earlier run recorded, not yet matched
    records: RowRecords  # what the journal should hold for the row now
    seen: dict[str, int] = field(default_factory=dict)  # occurrences of each fingerprint in this run
    open: list[_Request] = field(default_factory=list)
    by_response: dict[str, _Request] = field(default_factory=dict)
    blocked: bool = False

    def key_for(self, fingerprint: str) -> str:
        count = self.seen.get(fingerprint, 0)
        self.seen[fingerprint] = count + 1
        return f"{fingerprint}-{count}"


_CURRENT_ROW: ContextVar[_Row | None] = ContextVar("struckdown_batch_row", default=None)
_CURRENT_REQUEST: ContextVar[_Request | None] = ContextVar("struckdown_batch_request", default=None)


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
        self._encoded: dict[tuple[str, str], list[_Request]] = {}
        self._known: set[str] = set()
        self._ended: set[str] = set()
        self._unpriced: set[tuple[str | None, str | None]] = set()
        self._rows: dict[int, _Row] = {}
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
            from .errors import ConfigurationError
            from .models import model_label

            raise ConfigurationError(
                f"provider batching needs a model with a batch API: OpenAI's Responses models "
                f"(openai:… or openai-responses:…, not openai-chat:…), Anthropic, Google (FunctionModel "
                f"and TestModel in tests); {model_label(model)} has none"
            )
        batched = self.batching.get_wrapper_model(_Counted(model, self))
        wrapper = _Tracked(batched if batched is not None else model, self)
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
            import warnings

            message = (
                f"provider_batch: only {concurrency} rows run at once, so a batch holds about {concurrency} "
                f"requests per slot, not up to {self.max_requests}; pass concurrency={self.max_requests} "
                "to fill the batches"
            )
            log.warning(message)
            warnings.warn(message, UserWarning, stacklevel=4)

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
        row = _Row(index, dict(recorded), dict(recorded))
        self._rows[index] = row
        self._in_flight += 1
        token = _CURRENT_ROW.set(row)
        try:
            yield
        finally:
            _CURRENT_ROW.reset(token)
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
    def _open(self, row: _Row, key: str) -> _Request:
        request = _Request(row, key)
        row.open.append(request)
        self._queued += 1
        self._row_changed(row)
        return request

    def _set(self, request: _Request, state: State) -> None:
        if request.state == state or request not in request.row.open:
            return
        self._queued += (state == "queued") - (request.state == "queued")
        request.state = state
        self._row_changed(request.row)

    def _close(self, request: _Request) -> None:
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

    def _row_changed(self, row: _Row) -> None:
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
        request = _CURRENT_REQUEST.get()
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


def batch_prices(
    response: ModelResponse, *, discount: float = DEFAULT_DISCOUNT, provider: str | None = None
) -> tuple[float, float] | None:
    """(batch price, list price) in USD of one response, from genai-prices; the batch price
    is the data's batch price, or the list price x `discount` where it has none. None when
    the model's price is unknown. `provider`: the provider to look the model up under when
    the response names none (the model's `system`). The hook a cost meter can use for
    batched responses."""
    from genai_prices import calc_price

    model = response.model_name
    if not model:
        return None
    batch_context = {**{k: v for k, v in (response.provider_details or {}).items() if isinstance(v, str)},
                     "processing": "batch"}  # fmt: skip
    references = ({"provider_id": response.provider_name or provider}, {"provider_api_url": response.provider_url})
    for reference in references:
        if not next(iter(reference.values())):
            continue
        try:
            listed = float(calc_price(response.usage, model, **reference).total_price)  # type: ignore[arg-type]
            batch = float(
                calc_price(response.usage, model, price_context=batch_context, **reference).total_price  # type: ignore[arg-type]
            )
        except (LookupError, ValueError):
            continue
        return (batch if batch < listed else listed * discount), listed
    return None


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


# -- the wrappers ----------------------------------------------------------------

_BATCH_ADAPTER = TypeAdapter(Batch)


def _batch_json(batch: Batch) -> dict[str, Any]:
    dumped: dict[str, Any] = _BATCH_ADAPTER.dump_python(batch, mode="json")
    return dumped


def _suspended(entry: Mapping[str, Any], model: Any) -> ModelResponse | None:
    """The pending response pydantic-ai's batching continues, for a recorded batch request:
    its `provider_details["batch"]` ticket (custom_id, batch, polls) and the response ID
    that names them, as `BatchModelRequests` leaves them in a suspended message history."""
    batch, custom_id = entry.get("batch"), entry.get("custom_id")
    if not isinstance(batch, dict) or not isinstance(custom_id, str) or not isinstance(batch.get("id"), str):
        return None
    return ModelResponse(
        parts=[],
        provider_name=model.system,
        provider_url=model.base_url,
        provider_response_id=f"batch:{batch['id']}:{custom_id}",
        provider_details={"batch": {"custom_id": custom_id, "batch": batch, "polls": 0}},
        state="suspended",
    )


def _fingerprint(model: Any, messages: list[ModelMessage], settings: Any, params: ModelRequestParameters) -> str:
    """What decides a request's answer, without what changes between runs (timestamps,
    run and tool-call IDs): a rerun of a row makes the same requests with the same prints."""
    from .cache import TRANSPORT_SETTINGS, normalise_messages

    payload = {
        "model": f"{model.system}:{model.model_name}",
        "messages": normalise_messages(list(messages)),
        "settings": {k: v for k, v in dict(settings or {}).items() if k not in TRANSPORT_SETTINGS},
        "mode": params.output_mode,
        "text": params.allow_text_output,
        "tools": [(t.name, t.parameters_json_schema) for t in (*params.function_tools, *params.output_tools)],
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _ticket_status(response: ModelResponse) -> str | None:
    ticket = (response.provider_details or {}).get("batch")
    batch = ticket.get("batch") if isinstance(ticket, dict) else None
    status = batch.get("status") if isinstance(batch, dict) else getattr(batch, "status", None)
    return status if isinstance(status, str) else None


def _ticket_batch_id(response: ModelResponse) -> str | None:
    ticket = (response.provider_details or {}).get("batch")
    batch = ticket.get("batch") if isinstance(ticket, dict) else None
    batch_id = batch.get("id") if isinstance(batch, dict) else getattr(batch, "id", None)
    return batch_id if isinstance(batch_id, str) else None


class _Tracked(WrapperModel):
    """Outside pydantic-ai's batched model: follows each request of a row from submission
    to answer (for the rows-advance-together rule), continues recorded batch requests on
    a rerun, and never cancels a batch."""

    def __init__(self, wrapped: Model, batch: ProviderBatch) -> None:
        super().__init__(wrapped)
        self._batch = batch

    async def request(
        self, messages: list[ModelMessage], model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:  # fmt: skip
        row = _CURRENT_ROW.get()
        if row is None:
            response: ModelResponse = await self.wrapped.request(messages, model_settings, model_request_parameters)
            return response
        batch = self._batch
        last = messages[-1] if messages else None
        if isinstance(last, ModelResponse) and last.state == "suspended" and last.provider_response_id:
            # the agent graph checking again on a batch that was still running
            request = row.by_response.get(last.provider_response_id) or batch._open(row, "")
            return await self._send(request, messages[:-1], last, model_settings, model_request_parameters)
        key = ""
        if batch._keyed:  # only a journaled job needs to know a request again
            key = row.key_for(_fingerprint(self.wrapped, messages, model_settings, model_request_parameters))
        request = batch._open(row, key)
        entry = row.recorded.pop(key, None) if key else None
        pending = _suspended(entry, self.wrapped) if entry is not None else None
        if pending is not None:
            batch.counts.continued += 1
            batch._resumed(str(_ticket_batch_id(pending)))
            batch._set(request, "ready")  # checking on a batch, not queued
            try:
                return await self._send(request, messages, pending, model_settings, model_request_parameters)
            except SuspendedResponseExpired as exc:
                log.warning("row %s: %s; submitting the request again", row.index, exc)
                row.records.pop(key, None)
                request = batch._open(row, key)
        return await self._send(request, messages, None, model_settings, model_request_parameters)

    async def _send(
        self, request: _Request, history: list[ModelMessage], pending: ModelResponse | None,
        model_settings: ModelSettings | None, model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:  # fmt: skip
        """Submit the request (`pending` None) or check on `pending`. A batch that has
        already ended (a test model's, or a resumed one) is read at once, not after the
        poll interval; one still running goes back to the agent graph, which checks again."""
        batch = self._batch
        token = _CURRENT_REQUEST.set(request)
        try:
            for _ in range(_READS_AT_ONCE):
                messages = history if pending is None else [*history, pending]
                response: ModelResponse = await self.wrapped.request(messages, model_settings, model_request_parameters)
                if response.state != "suspended" or not response.provider_response_id:
                    break
                self._waiting(request, response)
                if _ticket_status(response) != "ended":
                    break
                pending = response
        except Exception:
            request.row.records.pop(request.key, None)  # its answer is an error: a rerun sends it again
            batch._close(request)
            raise
        except BaseException:
            batch._close(request)  # cancelled: the batch keeps running for a resumed job
            raise
        finally:
            _CURRENT_REQUEST.reset(token)
        if response.state != "suspended":
            batch._close(request)
            batch._answered(response, self.wrapped.system)
        return response

    def _waiting(self, request: _Request, response: ModelResponse) -> None:
        row = request.row
        if request.response_id != response.provider_response_id:
            if request.response_id is not None:
                row.by_response.pop(request.response_id, None)
            request.response_id = response.provider_response_id
            if response.provider_response_id is not None:
                row.by_response[response.provider_response_id] = request
        self._batch._set(request, "ready" if _ticket_status(response) == "ended" else "running")

    @asynccontextmanager
    async def request_stream(
        self, messages: list[ModelMessage], model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters, run_context: Any = None,
    ) -> AsyncIterator[StreamedResponse]:  # fmt: skip
        # a batch result arrives whole: waited for as `request` does, then replayed
        response = await self.request(messages, model_settings, model_request_parameters)
        yield CompletedStreamedResponse(response, model_request_parameters=model_request_parameters, replay_events=True)

    async def cancel_suspended_response(self, response: ModelResponse) -> None:
        return None  # the batch keeps running: a resumed job collects it


class _Counted(WrapperModel):
    """Inside pydantic-ai's batched model, around the provider's: sees each request encoded
    and each batch created, checked and read, and holds the job's request cap for each
    batch API call."""

    def __init__(self, wrapped: Model, batch: ProviderBatch) -> None:
        super().__init__(wrapped)
        self._batch = batch

    def _limit(self) -> Any:
        limiter = self._batch.limiter
        return limiter if limiter is not None else nullcontext()

    async def batch_encode(self, request: BatchRequest) -> EncodedBatchRequest:
        encoded: EncodedBatchRequest = await self.wrapped.batch_encode(request)
        self._batch._encoded_request(encoded)
        return encoded

    async def batch_create(self, requests: Sequence[EncodedBatchRequest]) -> Batch:
        async with self._limit():
            batch: Batch = await self.wrapped.batch_create(requests)
        self._batch._batch_created(batch, requests)  # before anything else can run: the journal first
        return batch

    async def batch_status(self, batch: Batch) -> Batch:
        async with self._limit():
            status: Batch = await self.wrapped.batch_status(batch)
        return status

    async def batch_results(self, batch: Batch) -> list[BatchResult]:
        async with self._limit():
            results: list[BatchResult] = await self.wrapped.batch_results(batch)
        self._batch._batch_ended(batch)
        return results

    async def batch_cancel(self, batch: Batch) -> Batch:
        return batch  # never cancelled: a resumed job collects it
