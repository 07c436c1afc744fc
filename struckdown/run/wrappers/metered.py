"""The usage meter as a model layer (SPEC §13): the innermost of `MODEL_STACK`, around the
provider model. The response cache sits outside it (a hit never reaches it), and so do
retries and fallback, so each attempt they make is one request here. The accounting is
the ledger's (`run/ledger.SlotMeter`, the `meter` of the slot's `SlotRun`)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol

from pydantic_ai.messages import ModelResponse
from pydantic_ai.models import StreamedResponse

from .streams import Request, SlotRunWrapper


class Meter(Protocol):
    """What this layer asks of a slot's meter (`run/ledger.SlotMeter`)."""

    @property
    def ledger(self) -> Any: ...  # its RunLedger: `requests`, the cap on requests in flight

    def before_request(self) -> None: ...

    def record(self, response: ModelResponse | None, model: Any) -> Any: ...

    async def responded(self, response: ModelResponse, model: Any, elapsed_ms: float) -> None: ...


class MeteredModel(SlotRunWrapper):
    """Counts, prices and limits each real request to the wrapped (provider) model.

    Under a provider batch (SPEC §21) pydantic-ai answers a request with a suspended
    response (the batch ticket) and continues it, once per status check, until the
    answer comes: the request is counted (and held against `request_limit`) once, when
    it is submitted, its tokens and price when its answer arrives; a status check is not
    a model request (issue 39 N8)."""

    part = "meter"

    async def serve(self, meter: Meter, request: Request) -> ModelResponse:
        limiter = meter.ledger.requests
        if limiter is None:
            return await self._serve(meter, request)
        async with limiter:
            return await self._serve(meter, request)

    async def _serve(self, meter: Meter, request: Request) -> ModelResponse:
        check = _status_check(request)
        if not check:
            meter.before_request()
        started = time.perf_counter()
        try:
            response = await request.send(self.wrapped)
        except BaseException:
            if not check:
                meter.record(None, self.wrapped)  # sent, so counted (no tokens came back)
            raise
        if not _suspended(response):
            await meter.responded(response, self.wrapped, (time.perf_counter() - started) * 1000)
        return response

    def serve_stream(self, meter: Meter, request: Request) -> AbstractAsyncContextManager[StreamedResponse]:
        if meter.ledger.requests is None:
            return _MeteredStream(self.wrapped, meter, request)  # the common case: no generator around it
        return self._limited_stream(meter, request)

    @asynccontextmanager
    async def _limited_stream(self, meter: Meter, request: Request) -> AsyncIterator[StreamedResponse]:
        async with meter.ledger.requests, self._serve_stream(meter, request) as streamed:
            yield streamed

    @asynccontextmanager
    async def _serve_stream(self, meter: Meter, request: Request) -> AsyncIterator[StreamedResponse]:
        check = _status_check(request)
        if not check:
            meter.before_request()
        started = time.perf_counter()
        streamed: StreamedResponse | None = None
        try:
            async with request.open(self.wrapped) as streamed:
                yield streamed
        except BaseException:
            if not check:
                meter.record(_partial(streamed), self.wrapped)
            raise
        response = streamed.get()
        if not _suspended(response):
            await meter.responded(response, self.wrapped, (time.perf_counter() - started) * 1000)


class _MeteredStream:
    """`MeteredModel._serve_stream` as a plain async context manager: the same steps, without
    the generator (a stream's first event waits for every layer to open)."""

    __slots__ = ("model", "meter", "request", "check", "started", "opened", "streamed")

    def __init__(self, model: Any, meter: Meter, request: Request) -> None:
        self.model, self.meter, self.request = model, meter, request
        self.streamed: StreamedResponse | None = None

    async def __aenter__(self) -> StreamedResponse:
        self.check = _status_check(self.request)
        if not self.check:
            self.meter.before_request()
        self.started = time.perf_counter()
        self.opened = self.request.open(self.model)
        try:
            self.streamed = await self.opened.__aenter__()
        except BaseException:
            if not self.check:
                self.meter.record(None, self.model)  # sent, so counted (no tokens came back)
            raise
        return self.streamed

    async def __aexit__(self, kind: Any, error: Any, trace: Any) -> bool:
        try:
            suppressed = bool(await self.opened.__aexit__(kind, error, trace))
        except BaseException:
            if not self.check:
                self.meter.record(_partial(self.streamed), self.model)
            raise
        if kind is not None and not suppressed:
            if not self.check:
                self.meter.record(_partial(self.streamed), self.model)
            return False
        assert self.streamed is not None
        response = self.streamed.get()
        if not _suspended(response):
            await self.meter.responded(response, self.model, (time.perf_counter() - self.started) * 1000)
        return suppressed


def _suspended(response: Any) -> bool:
    """A provider batch's ticket for a request still waiting on its batch, not an answer."""
    return getattr(response, "state", None) == "suspended"


def _status_check(request: Request) -> bool:
    """Whether this request continues a suspended response: a check on a submitted batch."""
    messages = request.messages
    return bool(messages) and isinstance(messages[-1], ModelResponse) and _suspended(messages[-1])


def _partial(stream: StreamedResponse | None) -> ModelResponse | None:
    """What a stream cut off midway had reported (its tokens so far), if anything."""
    if stream is None:
        return None
    try:
        return stream.get()
    except Exception:  # noqa: BLE001 - a broken stream reports nothing
        return None
