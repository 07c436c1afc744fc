"""The model wrappers of provider batching (see `provider_batch.py`).

`TrackedModel`, outside pydantic-ai's batched model, follows each request of a row from
submission to answer and continues a recorded batch request on a rerun; `CountedModel`,
inside it around the provider's model, sees requests encoded and batches created,
checked and read. Both report to the job (`Job`, what they need of a `ProviderBatch`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager, nullcontext
from typing import Any, Protocol

from pydantic_ai.exceptions import SuspendedResponseExpired
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import CompletedStreamedResponse, Model, ModelRequestParameters, StreamedResponse
from pydantic_ai.models.batch import Batch, BatchRequest, BatchResult, EncodedBatchRequest
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings

from ..log import logger as log
from ..run.slot_run import current, entered
from .provider_state import BatchCounts, BatchedRequest, BatchedRow, State

#: Checks in a row of a batch found ended at submission (the submission, and resubmissions).
_READS_AT_ONCE = 8


class Job(Protocol):
    """What the wrappers need of the job they report to (a `ProviderBatch`)."""

    counts: BatchCounts
    limiter: Any
    _keyed: bool

    def _open(self, row: BatchedRow, key: str) -> BatchedRequest: ...
    def _set(self, request: BatchedRequest, state: State) -> None: ...
    def _close(self, request: BatchedRequest) -> None: ...
    def _resumed(self, batch_id: str) -> None: ...
    def _answered(self, response: ModelResponse, system: str | None = None) -> None: ...
    def _encoded_request(self, encoded: EncodedBatchRequest) -> None: ...
    def _batch_created(self, batch: Batch, requests: Sequence[EncodedBatchRequest]) -> None: ...
    def _batch_ended(self, batch: Batch) -> None: ...


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
    from ..cache import TRANSPORT_SETTINGS, normalise_messages

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


def _ticket(response: ModelResponse, name: str) -> str | None:
    """A field (`status`, `id`) of the batch in a suspended response's batch ticket."""
    ticket = (response.provider_details or {}).get("batch")
    batch = ticket.get("batch") if isinstance(ticket, dict) else None
    value = batch.get(name) if isinstance(batch, dict) else getattr(batch, name, None)
    return value if isinstance(value, str) else None


class TrackedModel(WrapperModel):
    """Outside pydantic-ai's batched model: follows each request of a row from submission
    to answer (for the rows-advance-together rule), continues recorded batch requests on
    a rerun, and never cancels a batch."""

    def __init__(self, wrapped: Model, batch: Job) -> None:
        super().__init__(wrapped)
        self._batch = batch

    async def request(
        self, messages: list[ModelMessage], model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:  # fmt: skip
        row: BatchedRow | None = current().batch_row
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
            batch._resumed(str(_ticket(pending, "id")))
            batch._set(request, "ready")  # checking on a batch, not queued
            try:
                return await self._send(request, messages, pending, model_settings, model_request_parameters)
            except SuspendedResponseExpired as exc:
                log.warning("row %s: %s; submitting the request again", row.index, exc)
                row.records.pop(key, None)
                request = batch._open(row, key)
        return await self._send(request, messages, None, model_settings, model_request_parameters)

    async def _send(
        self, request: BatchedRequest, history: list[ModelMessage], pending: ModelResponse | None,
        model_settings: ModelSettings | None, model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:  # fmt: skip
        """Submit the request (`pending` None) or check on `pending`. A batch that has
        already ended (a test model's, or a resumed one) is read at once, not after the
        poll interval; one still running goes back to the agent graph, which checks again."""
        batch = self._batch
        with entered(batch_request=request):
            try:
                for _ in range(_READS_AT_ONCE):
                    messages = history if pending is None else [*history, pending]
                    response: ModelResponse = await self.wrapped.request(messages, model_settings, model_request_parameters)
                    if response.state != "suspended" or not response.provider_response_id:
                        break
                    self._waiting(request, response)
                    if _ticket(response, "status") != "ended":
                        break
                    pending = response
            except Exception:
                request.row.records.pop(request.key, None)  # its answer is an error: a rerun sends it again
                batch._close(request)
                raise
            except BaseException:
                batch._close(request)  # cancelled: the batch keeps running for a resumed job
                raise
        if response.state != "suspended":
            batch._close(request)
            batch._answered(response, self.wrapped.system)
        return response

    def _waiting(self, request: BatchedRequest, response: ModelResponse) -> None:
        row = request.row
        if request.response_id != response.provider_response_id:
            if request.response_id is not None:
                row.by_response.pop(request.response_id, None)
            request.response_id = response.provider_response_id
            if response.provider_response_id is not None:
                row.by_response[response.provider_response_id] = request
        self._batch._set(request, "ready" if _ticket(response, "status") == "ended" else "running")

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


class CountedModel(WrapperModel):
    """Inside pydantic-ai's batched model, around the provider's: sees each request encoded
    and each batch created, checked and read, and holds the job's request cap for each
    batch API call."""

    def __init__(self, wrapped: Model, batch: Job) -> None:
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
