"""What a new user and a real model run into (issue 40): the engine's side."""

from __future__ import annotations

import warnings

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
        "model function:scripted: the answer was cut off at the output token limit: the response holding the "
        "tool call lookup() was cut there (finish_reason 'length'), so the call did not run. Hint: "
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
