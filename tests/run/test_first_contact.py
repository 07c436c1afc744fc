"""What a new user and a real model run into (issue 40): the engine's side."""

from __future__ import annotations

import asyncio
import warnings
from pathlib import Path

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

import struckdown as sd
from scripted import Script


# -- item 1: a model that cannot stream gets a plain request -----------------------------


def test_a_function_model_without_stream_function_answers_a_streamed_run_and_says_so_once() -> None:
    seen: list[str] = []

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(str(messages[-1].parts[-1].content))  # type: ignore[union-attr]
        return ModelResponse(parts=[TextPart(f"answer {len(seen)}")])

    model = FunctionModel(reply)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        events = list(sd.complete_incremental("One [[a]]\n\nTwo [[b]]", model=model))
    result = events[-1].result
    assert dict(result) == {"a": "answer 1", "b": "answer 2"}
    assert len(seen) == 2
    notes = [str(w.message) for w in caught if "cannot stream" in str(w.message)]
    assert notes == [
        "model function:reply cannot stream (a FunctionModel without stream_function=): its answers arrive whole"
    ]
    # no TokenDelta: the answers arrive whole, in SlotCompleted
    assert not [e for e in events if type(e).__name__ == "TokenDelta"]


# -- item 2: a tool call in a response cut at its token limit does not run ---------------


def test_a_tool_call_cut_at_the_token_limit_is_a_truncated_error_and_does_not_run() -> None:
    ran: list[str] = []

    def lookup(q: str) -> str:
        ran.append(q)
        return "found"

    def answer(call):  # type: ignore[no-untyped-def]
        if len(call.messages) == 1:
            return ModelResponse(parts=[ToolCallPart("lookup", {"q": "a"})], finish_reason="length")
        return "done"

    script = Script(answer)
    with pytest.raises(sd.TruncatedError) as info:
        sd.complete("Q [[answer|use_tools=true]]", model=script.model(), tools=[lookup])
    assert ran == []
    assert len(script.calls) == 1
    assert str(info.value).startswith(
        "model scripted: the answer was cut off at the output token limit: lookup() did not run: a tool call cut "
        "short cannot be used. Hint: "
    )


def test_a_whole_tool_call_response_still_runs_the_call() -> None:
    ran: list[str] = []

    def lookup(q: str) -> str:
        ran.append(q)
        return "found"

    def answer(call):  # type: ignore[no-untyped-def]
        if len(call.messages) == 1:
            return ModelResponse(parts=[ToolCallPart("lookup", {"q": "a"})], finish_reason="tool_call")
        return "done"

    result = sd.complete("Q [[answer|use_tools=true]]", model=Script(answer).model(), tools=[lookup])
    assert result["answer"] == "done" and ran == ["a"]


# -- item 22: a failed tool call is counted -----------------------------------------------


def test_failed_tool_calls_count_in_usage_as_the_display_shows_them() -> None:
    def good(q: str) -> str:
        return "x"

    def boom(q: str) -> str:
        raise ValueError("nope")

    def answer(call):  # type: ignore[no-untyped-def]
        if len(call.messages) == 1:
            return ModelResponse(parts=[ToolCallPart("boom", {"q": "a"}), ToolCallPart("good", {"q": "b"})])
        return "done"

    result = sd.complete("Q [[answer|use_tools=true]]", model=Script(answer).model(), tools=[good, boom])
    calls = result.results["answer"].tool_calls
    assert sorted((c.tool_name, c.ok) for c in calls) == [("boom", False), ("good", True)]
    assert result.results["answer"].usage.tool_calls == 2
    assert result.usage.tool_calls == 2


# -- item 17: max_seconds= ---------------------------------------------------------------


class Clock:
    """The deadline's clock: it passes once the model has streamed all it will (no real wait)."""

    def __init__(self) -> None:
        self.asked: list[float] = []
        self.passes = asyncio.Event()

    async def sleep(self, seconds: float) -> None:
        self.asked.append(seconds)
        await self.passes.wait()


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr("struckdown.run.deadline.sleep", fake.sleep)
    return fake


def runaway(clock: Clock, words: tuple[str, ...] = ("Roses ", "are ", "red")) -> FunctionModel:
    """Streams `words`, lets the clock pass, then never finishes (a runaway on a slow model)."""

    async def whole(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        assert info.output_tools, "a free-text answer with a deadline is streamed"
        clock.passes.set()  # a typed answer is asked for whole: it never comes
        await asyncio.Event().wait()
        raise AssertionError("cancelled at the deadline")

    async def stream(messages: list[ModelMessage], info: AgentInfo):  # type: ignore[no-untyped-def]
        for word in words:
            yield word
        clock.passes.set()
        await asyncio.Event().wait()  # never: the deadline ends it
        yield ""

    return FunctionModel(whole, stream_function=stream, model_name="slow")


def test_max_seconds_ends_a_runaway_answer_as_truncated_with_the_text_so_far(clock: Clock) -> None:
    result = sd.complete("Write a poem [[poem]]", model=runaway(clock), max_seconds=5)
    assert result["poem"] == "Roses are red"
    slot = result.results["poem"]
    assert slot.truncated is True and clock.asked == [5]
    assert slot.messages[-1].finish_reason == "length"  # type: ignore[union-attr]
    assert result.usage.requests == 1


def test_a_slot_max_seconds_lowers_the_hosts_never_raises_it(clock: Clock) -> None:
    sd.complete("Write a poem [[poem|max_seconds=2]]", model=runaway(clock), max_seconds=5)
    assert clock.asked == [2]
    clock.passes = asyncio.Event()
    with pytest.warns(UserWarning, match="template asked for max_seconds=10 but the caller's ceiling is 5; using 5"):
        sd.complete("Write a poem [[poem|max_seconds=10]]", model=runaway(clock), max_seconds=5)
    assert clock.asked == [2, 5]
    clock.passes = asyncio.Event()
    sd.complete("Write a poem [[poem|max_seconds=1.5]]", model=runaway(clock))  # no host ceiling
    assert clock.asked == [2, 5, 1.5]


def test_max_seconds_streams_the_text_then_flags_the_answer(clock: Clock) -> None:
    events = list(sd.complete_incremental("Write a poem [[poem]]", model=runaway(clock), max_seconds=5))
    tokens = [e.delta for e in events if type(e).__name__ == "TokenDelta"]
    assert tokens == ["Roses ", "are ", "red"]
    completed = [e for e in events if type(e).__name__ == "SlotCompleted"]
    assert completed[0].result.output == "Roses are red" and completed[0].result.truncated


def test_max_seconds_with_on_truncate_error_or_a_typed_answer_is_a_truncated_error(clock: Clock) -> None:
    with pytest.raises(sd.TruncatedError) as info:
        sd.complete("Write a poem [[poem|on_truncate=error]]", model=runaway(clock), max_seconds=5)
    assert str(info.value) == (
        "model slow: the answer did not finish within max_seconds=5: on_truncate=error refuses a cut answer. "
        "Hint: raise max_seconds= (sd: --max-seconds), ask for a shorter answer, or use a faster model (fallback=)"
    )
    clock.passes = asyncio.Event()
    with pytest.raises(sd.TruncatedError) as typed:
        sd.complete("How many? [[int:n]]", model=runaway(clock), max_seconds=3)
    assert "model slow: the answer did not finish within max_seconds=3: a typed answer cut short cannot be used." in str(
        typed.value
    )


def test_max_seconds_is_checked() -> None:
    with pytest.raises(sd.TemplateSyntaxError, match="max_seconds"):
        sd.parse("Q [[a|max_seconds=0]]")
    with pytest.raises(ValueError, match="max_seconds must be a number of seconds above 0"):
        sd.complete("Q [[a]]", model="test", max_seconds=-1)


# -- item 7: docs/resilience.md says failed attempts count as requests ---------------------


def test_a_failed_attempt_counts_as_a_request_without_tokens() -> None:
    from pydantic_ai.exceptions import ModelHTTPError

    calls: list[int] = []

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.append(1)
        if len(calls) == 1:
            raise ModelHTTPError(503, "m", "overloaded")
        return ModelResponse(parts=[TextPart("ok")])

    result = sd.complete("Q [[a]]", model=FunctionModel(reply), retry_base_delay=0, retry_max_delay=0)
    assert result["a"] == "ok" and len(calls) == 2
    assert result.usage.requests == 2 and result.results["a"].usage.requests == 2


# -- item 7: docs/observability.md names pydantic-ai 2.68's spans ---------------------------


def test_the_span_names_observability_md_shows() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from scripted import Tools, auto_answer

    def look(q: str) -> str:
        return "x"

    def answer(call):  # type: ignore[no-untyped-def]
        if call.tool_names and len(call.messages) == 1:
            return Tools([("look", {"q": "a"})])
        return auto_answer(call)

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    sd.complete("Q [[a|use_tools=true]]", model=Script(answer).model("mm"), tools=[look], instrument=provider)
    names = [span.name for span in exporter.get_finished_spans()]
    assert names == ["chat mm", "struckdown tool", "execute_tool look", "chat mm", "invoke_agent struckdown",
                     "struckdown slot", "struckdown run"]
    page = (Path(__file__).resolve().parents[2] / "docs" / "observability.md").read_text()
    for name in ("invoke_agent struckdown", "execute_tool <tool>", "chat <model>", "struckdown tool"):
        assert name in page
