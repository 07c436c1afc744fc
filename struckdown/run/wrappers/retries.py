"""Retries (SPEC §14): `RetryingModel`, the model wrapper that sends a request again
after a transient provider failure (`model_errors.is_transient`), after an exponential
backoff with full jitter that honours `Retry-After`, and yields `SlotRetry`.

A stream that fails after it produced tokens is retracted (`SlotRetracted(slot,
"retry")`) and started again (`_RetryingStream`), so the consumer's `accumulated` text
begins from empty. The wrapper sits below the response cache and above the budgets'
per-request meter; what one slot attempt needs is the `retries` of its `SlotRun` (set
around `agent.run`, see `streams.py`). The fallback layer, the slot's way down its models, is
`resilience.py`.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from random import uniform
from typing import Any, TypeVar

from anyio import sleep
from pydantic_ai.messages import ModelResponse, ModelResponseStreamEvent
from pydantic_ai.models import StreamedResponse
from pydantic_ai.usage import RequestUsage

from ...incremental import SlotRetry
from ...models.errors import is_transient, map_model_error
from ..resilience_settings import Emit, Resilience, describe, report
from .streams import Request, SlotRunWrapper, StreamContext

T = TypeVar("T")


def retry_delay(retry: int, retry_after: float | None, settings: Resilience) -> float:
    """Seconds before the `retry`-th retry (from 1) of a request: what the provider asked
    for (`Retry-After`, at most `retry_max_delay`), else a random time between 0 and
    `min(retry_max_delay, retry_base_delay × 2^(retry-1))` (full jitter)."""
    if retry_after is not None and retry_after >= 0:
        return min(float(retry_after), settings.retry_max_delay)
    ceiling = min(settings.retry_max_delay, settings.retry_base_delay * 2.0 ** min(retry - 1, 60))
    return uniform(0.0, ceiling)


def retry_after_of(exc: BaseException) -> float | None:
    """The wait a provider asked for (`ModelAPIError.retry_after`), in `exc` or its causes."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        value = getattr(current, "retry_after", None)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        current = current.__cause__ or current.__context__
    return None


@dataclass
class RetryRun:
    """One slot attempt's retry state, read by `RetryingModel` from its `SlotRun`."""

    slot: str
    emit: Emit
    settings: Resilience
    model: Any  # the model of this attempt (named in mapped errors)
    restart: Callable[[str], Awaitable[None]] | None = None  # retracts what a failed attempt streamed

    def decide(self, exc: BaseException, retry: int) -> tuple[float, str] | None:
        """(delay, description) when the failure is worth retry number `retry`, else None."""
        if retry > self.settings.retries:
            return None
        from ...models import model_label

        mapped = map_model_error(exc, model_label(self.model))
        if mapped is None or not is_transient(mapped):
            return None
        return retry_delay(retry, retry_after_of(exc), self.settings), describe(mapped)

    async def wait(self, retry: int, delay: float, error: str, *, streamed: bool) -> None:
        if streamed and self.restart is not None:
            await self.restart("retry")  # SlotRetracted first, when tokens had gone out
        await report(self.emit, self.settings, SlotRetry(self.slot, retry, error, delay))
        await sleep(delay)

    async def attempt(self, call: Callable[[], Awaitable[T]], used: int = 0) -> tuple[T, int]:
        """`call()`, again after each transient failure while retries are left; (its
        result, the retries used so far, counting the `used` before it)."""
        while True:
            try:
                return await call(), used
            except Exception as exc:
                decision = self.decide(exc, used + 1)
                if decision is None:
                    raise
            used += 1
            await self.wait(used, *decision, streamed=False)


class RetryingModel(SlotRunWrapper):
    """Sends a request again after a transient provider failure (SPEC §14).

    Stateless: what one slot attempt needs is the `retries` of its `SlotRun`; outside a
    slot run it passes requests through."""

    part = "retries"

    async def serve(self, run: RetryRun, request: Request) -> ModelResponse:
        response, _ = await run.attempt(partial(request.send, self.wrapped))
        return response

    def serve_stream(self, run: RetryRun, request: Request) -> StreamContext:
        return _RetryingOpen(partial(request.open, self.wrapped), run)


class _RetryingOpen:
    """Opens a stream, again after each transient failure while retries are left (as
    `RetryRun.attempt`), and gives the `_RetryingStream` over it; a plain async context
    manager (no generator, no exit stack), closing the stream that opened."""

    __slots__ = ("open_stream", "run", "opened")

    def __init__(self, open_stream: Callable[[], StreamContext], run: RetryRun) -> None:
        self.open_stream, self.run = open_stream, run

    async def __aenter__(self) -> StreamedResponse:
        used = 0
        while True:
            opened = self.open_stream()
            try:
                stream = await opened.__aenter__()
                break
            except Exception as exc:
                decision = self.run.decide(exc, used + 1)
                if decision is None:
                    raise
            used += 1
            await self.run.wait(used, *decision, streamed=False)
        self.opened = opened
        return _RetryingStream(stream, self.open_stream, self.run, used)

    async def __aexit__(self, kind: Any, error: Any, trace: Any) -> bool | None:
        return await self.opened.__aexit__(kind, error, trace)


async def _open(
    stack: AsyncExitStack, open_stream: Callable[[], StreamContext], run: RetryRun, used: int
) -> tuple[StreamedResponse, int]:
    """Open a stream, retrying transient failures; (the stream, retries used so far)."""
    return await run.attempt(lambda: stack.enter_async_context(open_stream()), used)


class _RetryingStream(StreamedResponse):
    """A provider stream that starts over on a transient failure, even after it produced
    events: the failed attempt's text is retracted and the new attempt's events follow.
    Everything else is the current attempt's stream's; the usage of failed attempts is
    added to the response."""

    def __init__(self, first: StreamedResponse, open_stream: Callable[[], StreamContext], run: RetryRun, used: int) -> None:
        super().__init__(first.model_request_parameters)
        self._current = first
        self._open_stream = open_stream
        self._run = run
        self._used = used
        self._spent = RequestUsage()

    def __aiter__(self) -> AsyncIterator[ModelResponseStreamEvent]:
        if self._event_iterator is None:
            events = self._events()
            if self._request_deadline is not None:
                events = self._request_deadline.iterate(events)
            self._event_iterator = events
        return self._event_iterator

    async def _events(self) -> AsyncIterator[ModelResponseStreamEvent]:
        async with AsyncExitStack() as stack:
            while True:
                streamed = False
                try:
                    async for event in self._current:
                        if self._first_chunk_monotonic is None:
                            self._first_chunk_monotonic = time.perf_counter()
                        streamed = True
                        yield event
                    return
                except Exception as exc:
                    decision = self._run.decide(exc, self._used + 1)
                    if decision is None:
                        raise
                self._spent = self._spent + self._current.usage
                self._used += 1
                await self._run.wait(self._used, *decision, streamed=streamed)
                self._current, self._used = await _open(stack, self._open_stream, self._run, self._used)

    async def _get_event_iterator(self) -> AsyncIterator[ModelResponseStreamEvent]:  # pragma: no cover - unused
        async for event in self._events():
            yield event

    def get(self) -> ModelResponse:
        response = self._current.get()
        if self._spent.input_tokens or self._spent.output_tokens:
            response.usage = response.usage + self._spent
        return response

    @property
    def usage(self) -> RequestUsage:
        return self._spent + self._current.usage

    async def cancel(self) -> None:
        self._cancelled = True
        await self._current.cancel()

    async def close_stream(self) -> None:
        await self._current.close_stream()

    def get_stream_cancel_errors(self) -> tuple[type[BaseException], ...]:
        return self._current.get_stream_cancel_errors()

    @property
    def provider_response_id(self) -> str | None:
        current = self.__dict__.get("_current")
        return current.provider_response_id if current is not None else None

    @provider_response_id.setter
    def provider_response_id(self, value: str | None) -> None:
        pass  # the current attempt's stream holds it

    @property
    def model_name(self) -> str:
        return self._current.model_name

    @property
    def provider_name(self) -> str | None:
        return self._current.provider_name

    @property
    def provider_url(self) -> str | None:
        return self._current.provider_url

    @property
    def timestamp(self) -> datetime:
        return self._current.timestamp
