"""SPEC §14 retries: transient provider failures are sent again with exponential backoff
and full jitter (Retry-After honoured), permanent ones never; `SlotRetry` events, and a
retry after streamed tokens retracts them and streams the new attempt from empty.

No test sleeps: the retry wrapper's `sleep` records the waits, its jitter (`uniform`) is seeded.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic_ai.exceptions import ModelHTTPError, ModelQuotaExceededError
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

import struckdown as sd
from struckdown.incremental import (
    ProcessingComplete,
    SlotCompleted,
    SlotRetracted,
    SlotRetry,
    SlotStreamStart,
    TokenDelta,
)
from struckdown.models.errors import AuthenticationError, BadRequestError, ContentFilterError, ContextWindowError
from struckdown.run.wrappers import retries

OVERLOADED = "the provider failed (HTTP 503): overloaded"


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The seconds each retry waited (instantly), with a seeded jitter."""
    seen: list[float] = []

    async def sleep(seconds: float) -> None:
        seen.append(seconds)

    monkeypatch.setattr(retries, "sleep", sleep)
    monkeypatch.setattr(retries, "uniform", random.Random(7).uniform)
    return seen


def http_error(status: int, message: str = "overloaded", **kwargs: Any) -> ModelHTTPError:
    return ModelHTTPError(status, "scripted", {"error": {"message": message}}, **kwargs)


def failing_first(n: int, error: Exception, answer: str = "fine") -> tuple[FunctionModel, list[int]]:
    """A model whose first `n` requests raise `error`; the list counts the requests."""
    calls: list[int] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.append(1)
        if len(calls) <= n:
            raise error
        return ModelResponse(parts=[TextPart(answer)])

    return FunctionModel(respond, model_name="scripted"), calls


def events_of(template: str, **options: Any) -> list[Any]:
    async def collect() -> list[Any]:
        # the usage ledger (one ModelResponded per response) is pinned in test_budgets.py
        return [e async for e in sd.complete_incremental_async(template, **options) if e.type != "model_responded"]

    return asyncio.run(collect())


def test_a_503_then_success_is_one_answer_after_a_retry_event(waits: list[float]) -> None:
    model, calls = failing_first(1, http_error(503))
    events = events_of("Hi [[a]]", model=model, stream=False)
    expected_delay = random.Random(7).uniform(0.0, 1.0)  # the first retry: up to retry_base_delay (1 s)
    assert [type(e).__name__ for e in events] == ["SlotRetry", "SlotCompleted", "CheckpointReached", "ProcessingComplete"]
    assert events[0] == SlotRetry("a", 1, OVERLOADED, expected_delay)
    assert json.loads(events[0].to_json()) == {
        "type": "slot_retry", "slot": "a", "attempt": 1, "error": OVERLOADED, "delay_s": expected_delay,
    }  # fmt: skip
    assert waits == [expected_delay]
    assert len(calls) == 2
    done = events[-1]
    assert isinstance(done, ProcessingComplete) and dict(done.result) == {"a": "fine"}
    # every request sent counts (SPEC §13), the failed one too: it has no tokens
    assert done.result.usage.requests == 2


def test_backoff_doubles_with_full_jitter_up_to_the_cap_then_the_error_surfaces(waits: list[float]) -> None:
    model, calls = failing_first(99, http_error(500, "boom"))
    with pytest.raises(sd.ModelError) as info:
        sd.complete("Hi [[a]]", model=model, retries=4, retry_base_delay=0.5, retry_max_delay=1.5)
    jitter = random.Random(7)
    assert waits == [jitter.uniform(0, 0.5), jitter.uniform(0, 1.0), jitter.uniform(0, 1.5), jitter.uniform(0, 1.5)]
    assert len(calls) == 5  # one attempt and 4 retries
    assert info.value.status == 500 and info.value.slot == "a"


def test_retry_after_is_honoured_and_capped_at_the_max_delay(waits: list[float]) -> None:
    model, _ = failing_first(2, http_error(429, "slow down", headers={"Retry-After": "7"}))
    events = events_of("Hi [[a]]", model=model, stream=False, retry_max_delay=5)
    assert [e.delay_s for e in events if isinstance(e, SlotRetry)] == [5.0, 5.0]
    model, _ = failing_first(1, http_error(429, "slow down", headers={"Retry-After": "2"}))
    events = events_of("Hi [[a]]", model=model, stream=False)
    assert [(e.attempt, e.error, e.delay_s) for e in events if isinstance(e, SlotRetry)] == [
        (1, "rate limited (HTTP 429): slow down", 2.0)
    ]


@pytest.mark.parametrize(
    ("error", "mapped"),
    [
        pytest.param(http_error(401, "Incorrect API key"), AuthenticationError, id="401"),
        pytest.param(http_error(403, "forbidden"), AuthenticationError, id="403"),
        pytest.param(http_error(404, "no such model"), BadRequestError, id="404"),
        pytest.param(http_error(400, "temperature must be <= 2"), BadRequestError, id="400"),
        pytest.param(http_error(400, "maximum context length is 4096 tokens"), ContextWindowError, id="context"),
        pytest.param(http_error(400, "filtered by the content_filter"), ContentFilterError, id="content-filter"),
        pytest.param(ModelHTTPError.for_category(ModelQuotaExceededError, status_code=429, model_name="scripted",
                                                 body={"error": {"message": "You exceeded your current quota"}}),
                     sd.RateLimitError, id="quota"),  # fmt: skip
    ],
)
def test_permanent_failures_are_raised_at_once(waits: list[float], error: Exception, mapped: type) -> None:
    model, calls = failing_first(99, error)
    seen: list[Any] = []

    async def collect() -> None:
        async for event in sd.complete_incremental_async("Hi [[a]]", model=model, stream=False):
            seen.append(event)

    asyncio.run(collect())  # the generator ends after ProcessingError (issue 32): the error is on it
    assert isinstance(seen[-1].error, mapped)
    assert len(calls) == 1 and waits == []
    assert not [e for e in seen if isinstance(e, SlotRetry)]


def test_retries_zero_makes_one_attempt(waits: list[float]) -> None:
    model, calls = failing_first(1, http_error(503))
    with pytest.raises(sd.ModelError):
        sd.complete("Hi [[a]]", model=model, retries=0)
    assert len(calls) == 1 and waits == []
    env = sd.Environment(model=failing_first(1, http_error(503))[0], retries=0)
    with pytest.raises(sd.ModelError):
        env.complete("Hi [[a]]")


def test_a_connection_error_is_retried(waits: list[float]) -> None:
    model, calls = failing_first(2, ConnectionResetError("connection reset by peer"))
    assert sd.complete("Hi [[a]]", model=model)["a"] == "fine"
    assert len(calls) == 3 and len(waits) == 2


def test_a_guard_is_retried_too(waits: list[float]) -> None:
    calls: list[str] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        from pydantic_ai.messages import ToolCallPart

        calls.append("x")
        if len(calls) == 1:
            raise http_error(502, "bad gateway")
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"response": {"reason": "ok", "triggered": False}})])

    result = sd.complete("Check [[halt:g]]", model=FunctionModel(respond))
    assert result["g"] == {"triggered": False, "reason": "ok"} and len(calls) == 2


def test_a_retry_after_streamed_tokens_retracts_them_and_streams_from_empty(waits: list[float]) -> None:
    attempts: list[int] = []

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        attempts.append(1)
        if len(attempts) == 1:
            for token in ("The ", "cat ", "sat"):
                yield token
            raise http_error(503)
        for token in ("A ", "dog"):
            yield token

    events = events_of("Tell me [[a]]", model=FunctionModel(stream_function=stream))
    delay = random.Random(7).uniform(0, 1.0)
    slot_events = [e for e in events if getattr(e, "slot", None) == "a" and not isinstance(e, SlotCompleted)]
    assert slot_events == [
        SlotStreamStart("a"),
        TokenDelta("a", "The ", "The "),
        TokenDelta("a", "cat ", "The cat "),
        TokenDelta("a", "sat", "The cat sat"),
        SlotRetracted("a", "retry"),
        SlotRetry("a", 1, OVERLOADED, delay),
        SlotStreamStart("a"),
        TokenDelta("a", "A ", "A "),
        TokenDelta("a", "dog", "A dog"),
    ]
    (completed,) = [e for e in events if isinstance(e, SlotCompleted)]
    assert completed.result.output == "A dog"
    assert [type(p).__name__ for m in completed.result.messages for p in m.parts] == ["UserPromptPart", "TextPart"]


def test_a_stream_that_fails_before_its_first_token_is_retried_without_a_retraction(waits: list[float]) -> None:
    attempts: list[int] = []

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        attempts.append(1)
        if len(attempts) < 3:
            raise http_error(503)
        yield "ok"

    events = events_of("Tell me [[a]]", model=FunctionModel(stream_function=stream))
    assert [type(e).__name__ for e in events if getattr(e, "slot", None) == "a"] == [
        "SlotRetry", "SlotRetry", "SlotStreamStart", "TokenDelta", "SlotCompleted",
    ]  # fmt: skip
    assert [e.attempt for e in events if isinstance(e, SlotRetry)] == [1, 2]


def test_the_provider_sdk_does_not_retry_as_well() -> None:
    seen: list[Any] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(info.model_settings)
        return ModelResponse(parts=[TextPart("ok")])

    sd.complete("Hi [[a]]", model=FunctionModel(respond))
    sd.complete("Hi [[a]]", model=FunctionModel(respond), settings={"max_retries": 4})
    assert [s["max_retries"] for s in seen] == [0, 4]  # the caller's own setting is kept


def test_bad_retry_settings_are_refused() -> None:
    for bad in ({"retries": -1}, {"retries": 1.5}, {"retry_base_delay": -1}, {"retry_max_delay": "soon"}):
        with pytest.raises(ValueError):
            sd.complete("Hi [[a]]", model="test", **bad)  # type: ignore[arg-type]
