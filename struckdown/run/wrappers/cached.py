"""The response cache as a pydantic-ai model wrapper: a cached answer takes the path a
fresh one takes.

A hit is the stored `ModelResponse` handed to the agent run in place of a request
(streamed, for a streaming run, as a provider streams whole parts: pydantic-ai's
`CompletedStreamedResponse`), so it is
validated like a fresh answer, streams the same events, and appears in
`SlotResult.messages` as the model's reply. A hit costs nothing: it is marked in
`provider_details` and the slot reports no request or token for it.

Only a slot run's validated final answer is stored, under the key of the run's
first request (the conversation before the model answered); a response that failed
validation is never served again. The wrapper is stateless and cached per (model,
cache) by the engine; what one slot run needs is the `cache` of its `SlotRun`.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelResponse
from pydantic_ai.models import CompletedStreamedResponse, Model, StreamedResponse
from pydantic_ai.usage import RequestUsage

from ..slot_run import CURRENT
from .streams import Request, SlotRunWrapper

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


class CachedModel(SlotRunWrapper):
    """Serves a request from the response cache when the same request was answered before."""

    part = "cache"

    @classmethod
    def wrap(cls, model: Model, *, cached: bool) -> Model:
        """Only a slot whose answer may come from the cache has this layer (an agent slot's,
        or one whose confidence is measured, does not)."""
        return cls(model) if cached else model

    def _key(self, run: CacheRun, request: Request) -> str:
        from ...cache import cache_key
        from ...media.turns import for_cache_key

        params = request.params
        output = {
            "answer": run.answer_schema,
            "mode": params.output_mode,
            "tools": [(t.name, t.parameters_json_schema) for t in params.output_tools],
            "text": params.allow_text_output,
        }
        return cache_key(
            endpoint=run.endpoint, model=run.label, messages=for_cache_key(request.messages), instructions=None,
            output_schema=output, settings=dict(request.settings or {}), version=run.version,
        )

    async def _lookup(self, run: CacheRun, request: Request) -> ModelResponse | None:
        if run.first_key is not None:
            return None  # only a run's first request is answered from the cache
        key = run.first_key = self._key(run, request)
        stored = await run.cache.aget(key)
        response = _response_of(stored)
        if response is not None:
            run.hits += 1
        return response

    async def serve(self, run: CacheRun, request: Request) -> ModelResponse:
        started = time.perf_counter()
        hit = await self._lookup(run, request)
        if hit is not None:
            await note_cache_hit(hit, started)  # a line of the usage ledger, at no cost
            return hit
        return await request.send(self.wrapped)

    @asynccontextmanager
    async def serve_stream(self, run: CacheRun, request: Request) -> AsyncIterator[StreamedResponse]:
        started = time.perf_counter()
        hit = await self._lookup(run, request)
        if hit is None:
            async with request.open(self.wrapped) as stream:
                yield stream
            return
        # streamed back as a provider streams a whole part: one PartStartEvent each
        yield CompletedStreamedResponse(hit, model_request_parameters=request.params, replay_events=True)
        await note_cache_hit(hit, started)  # after the replay, as a fresh response's line comes after it


async def note_cache_hit(response: ModelResponse, started: float) -> None:
    """A hit is a line of the usage ledger, at no cost (the meter of the slot run, if any)."""
    meter = CURRENT.get().meter
    if meter is not None:
        await meter.served_from_cache(response, (time.perf_counter() - started) * 1000)


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
    message: Any = _plain_response(stored["response"])
    if message is None:
        try:
            (message,) = ModelMessagesTypeAdapter.validate_python([stored["response"]])
        except Exception:  # noqa: BLE001 - an entry of another shape or version: a miss
            return None
    if not isinstance(message, ModelResponse):
        return None
    message.usage = RequestUsage()  # a hit costs nothing
    message.run_id = message.conversation_id = None  # the run it is served to stamps its own
    message.provider_details = {**(message.provider_details or {}), HIT_MARK: "hit"}
    return message


def _plain_response(data: dict[str, Any]) -> ModelResponse | None:
    """A stored response of text, thinking and tool-call parts with plain fields, read as
    `ModelMessagesTypeAdapter` reads it but without building the adapter (its first use
    costs about a twentieth of `import pydantic_ai`, SPEC §28); None: pydantic reads it.
    tests/run/test_cache.py compares the two."""
    from datetime import datetime

    from pydantic_ai.messages import TextPart, ThinkingPart, ToolCallPart

    classes: dict[Any, Any] = {"text": TextPart, "thinking": ThinkingPart, "tool-call": ToolCallPart}
    if data.get("kind") != "response" or not isinstance(data.get("parts"), list):
        return None
    parts = []
    for part in data["parts"]:
        cls = classes.get(part.get("part_kind")) if isinstance(part, dict) else None
        if cls is None or not _plain_fields(cls, part, {"args": (str, dict), "provider_details": (dict,)}):
            return None
        parts.append(cls(**part))
    rest = {k: v for k, v in data.items() if k not in ("parts", "usage", "timestamp")}
    if not _plain_fields(ModelResponse, {"parts": [], **rest}, {"parts": (list,), "provider_details": (dict,),
                                                                 "metadata": (dict,)}):
        return None
    if data.get("failed_attempts") or not isinstance(data.get("timestamp"), str):
        return None
    try:
        timestamp = datetime.fromisoformat(data["timestamp"])
    except ValueError:
        return None
    if timestamp.tzinfo is None:
        return None
    rest.pop("failed_attempts", None)
    return ModelResponse(parts=parts, timestamp=timestamp, **rest)


def _plain_fields(cls: Any, data: dict[str, Any], containers: dict[str, tuple[type, ...]]) -> bool:
    """Every key a field of `cls`, every value text or None (or, for the fields named in
    `containers`, one of those types, holding only JSON)."""
    from dataclasses import fields

    names = {f.name for f in fields(cls)}
    for key, value in data.items():
        if key not in names:
            return False
        if value is None or type(value) is str:
            continue
        if key not in containers or type(value) not in containers[key] or not _json(value):
            return False
    return True


def _json(value: Any) -> bool:
    kind = type(value)
    if kind is dict:
        return all(type(k) is str and _json(v) for k, v in value.items())
    if kind is list:
        return all(_json(v) for v in value)
    return value is None or kind in (str, int, bool) or (kind is float and value == value and abs(value) != float("inf"))
