"""The response cache as a pydantic-ai model wrapper: a cached answer takes the path a
fresh one takes.

A hit is the stored `ModelResponse` handed to the agent run in place of a request
(streamed, for a streaming run, as the provider would stream it), so it is
validated like a fresh answer, streams the same events, and appears in
`SlotResult.messages` as the model's reply. A hit costs nothing: it is marked in
`provider_details` and the slot reports no request or token for it.

Only a slot run's validated final answer is stored, under the key of the run's
first request (the conversation before the model answered); a response that failed
validation is never served again. The wrapper is stateless and cached per (model,
cache) by the engine; what one slot run needs travels in `CURRENT_CACHE_RUN`.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelResponse, TextPart, ThinkingPart, ToolCallPart
from pydantic_ai.models import ModelRequestParameters, StreamedResponse
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import RequestUsage

from .ledger import note_cache_hit

HIT_MARK = "struckdown_cache"


@dataclass
class CacheRun:
    """One slot run's view of the cache: what decides its key besides the request, and
    what happened (the first request's key, the hits)."""

    cache: Any  # aget/aput
    endpoint: str
    label: str
    answer_schema: Any
    version: str
    first_key: str | None = None
    hits: int = 0


#: The cache state of the slot run in progress in this task (set around `agent.run`).
CURRENT_CACHE_RUN: ContextVar[CacheRun | None] = ContextVar("struckdown_cache_run", default=None)


class CachedModel(WrapperModel):
    """Serves a request from the response cache when the same request was answered before."""

    def _key(
        self, run: CacheRun, messages: list[ModelMessage], settings: ModelSettings | None, params: ModelRequestParameters
    ) -> str:
        from ..cache import cache_key
        from .media_turns import for_cache_key

        output = {
            "answer": run.answer_schema,
            "mode": params.output_mode,
            "tools": [(t.name, t.parameters_json_schema) for t in params.output_tools],
            "text": params.allow_text_output,
        }
        return cache_key(
            endpoint=run.endpoint, model=run.label, messages=for_cache_key(messages), instructions=None,
            output_schema=output, settings=dict(settings or {}), version=run.version,
        )

    async def _lookup(
        self, messages: list[ModelMessage], settings: ModelSettings | None, params: ModelRequestParameters
    ) -> ModelResponse | None:
        run = CURRENT_CACHE_RUN.get()
        if run is None or run.first_key is not None:
            return None  # only a run's first request is answered from the cache
        key = run.first_key = self._key(run, messages, settings, params)
        stored = await run.cache.aget(key)
        response = _response_of(stored)
        if response is not None:
            run.hits += 1
        return response

    async def request(
        self, messages: list[ModelMessage], model_settings: ModelSettings | None, model_request_parameters: ModelRequestParameters
    ) -> ModelResponse:
        started = time.perf_counter()
        hit = await self._lookup(messages, model_settings, model_request_parameters)
        if hit is not None:
            await note_cache_hit(hit, started)  # a line of the usage ledger, at no cost
            return hit
        return await self.wrapped.request(messages, model_settings, model_request_parameters)

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: Any = None,
    ) -> AsyncIterator[StreamedResponse]:
        started = time.perf_counter()
        hit = await self._lookup(messages, model_settings, model_request_parameters)
        if hit is not None:
            yield _Replay(model_request_parameters, hit)
            await note_cache_hit(hit, started)  # after the replay, as a fresh response's line comes after it
            return
        async with self.wrapped.request_stream(messages, model_settings, model_request_parameters, run_context) as stream:
            yield stream


async def store_answer(run: CacheRun, messages: list[ModelMessage]) -> None:
    """After a slot run succeeded from a fresh request: its final response, under the
    key of its first request."""
    if run.first_key is None or run.hits:
        return
    final = next((m for m in reversed(messages) if isinstance(m, ModelResponse)), None)
    if final is None:
        return
    stored = ModelMessagesTypeAdapter.dump_python([final], mode="json")[0]
    await run.cache.aput(run.first_key, {"response": stored})


def _response_of(stored: Any) -> ModelResponse | None:
    """A stored answer as a ModelResponse marked as a hit; anything else is a miss."""
    if not isinstance(stored, dict) or not isinstance(stored.get("response"), dict):
        return None
    try:
        (message,) = ModelMessagesTypeAdapter.validate_python([stored["response"]])
    except Exception:  # noqa: BLE001 - an entry of another shape or version: a miss
        return None
    if not isinstance(message, ModelResponse):
        return None
    message.usage = RequestUsage()  # a hit costs nothing
    message.provider_details = {**(message.provider_details or {}), HIT_MARK: "hit"}
    return message


@dataclass
class _Replay(StreamedResponse):
    """A stored response streamed back as the provider would stream it."""

    _response: ModelResponse = field(default_factory=lambda: ModelResponse(parts=[]))

    def __init__(self, params: ModelRequestParameters, response: ModelResponse) -> None:
        super().__init__(params)
        self._response = response
        self.provider_details = response.provider_details
        self.finish_reason = response.finish_reason

    async def _get_event_iterator(self) -> AsyncIterator[Any]:
        for index, part in enumerate(self._response.parts):
            if isinstance(part, TextPart):
                for event in self._parts_manager.handle_text_delta(vendor_part_id=index, content=part.content):
                    yield event
            elif isinstance(part, ThinkingPart):
                for event in self._parts_manager.handle_thinking_delta(vendor_part_id=index, content=part.content):
                    yield event
            elif isinstance(part, ToolCallPart):
                yield self._parts_manager.handle_tool_call_part(
                    vendor_part_id=index, tool_name=part.tool_name, args=part.args_as_dict(), tool_call_id=part.tool_call_id
                )

    @property
    def model_name(self) -> str:
        return self._response.model_name or "cached"

    @property
    def provider_name(self) -> str | None:
        return self._response.provider_name

    @property
    def provider_url(self) -> str | None:
        return None

    @property
    def timestamp(self) -> datetime:
        return self._response.timestamp
