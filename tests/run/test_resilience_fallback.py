"""SPEC §14 fallback and truncation: a slot that cannot finish on its model starts again
on the next one (after a provider failure that outlasted its retries: the original
request; after a tool loop at its limit or answers that failed validation every time:
plus the hint turn), with the full ceiling and every attempt billed; an answer cut at its
token limit is flagged, or raised as `TruncatedError` when it cannot be used.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from pydantic_ai.usage import RequestUsage, UsageLimits

import struckdown as sd
from scripted import Call, Script, Tools, value_for
from struckdown.incremental import SlotCompleted, SlotFallback, SlotRetracted, SlotRetry, SlotStreamStart, TokenDelta

OVERLOADED = "the provider failed (HTTP 503): overloaded"


def down() -> Script:
    """A model that always answers 503."""

    def answer(call: Call) -> Any:
        raise ModelHTTPError(503, "primary", {"error": {"message": "overloaded"}})

    return Script(answer)


def events_of(template: str, **options: Any) -> list[Any]:
    async def collect() -> list[Any]:
        # the usage ledger (one ModelResponded per response) is pinned in test_budgets.py
        return [e async for e in sd.complete_incremental_async(template, **options) if e.type != "model_responded"]

    return asyncio.run(collect())


def slot_events(events: list[Any], slot: str = "a") -> list[Any]:
    return [e for e in events if getattr(e, "slot", None) == slot]


def test_a_persistent_failure_is_answered_by_the_fallback_model() -> None:
    primary, backup = down(), Script(lambda call: "from the backup")
    events = events_of(
        "Hi [[a]]", model=primary.model("primary"), fallback=backup.model("backup"), retries=1, stream=False
    )
    kinds = [type(e).__name__ for e in slot_events(events)]
    assert kinds == ["SlotRetry", "SlotFallback", "SlotCompleted"]
    assert slot_events(events)[1] == SlotFallback("a", "primary", "backup", OVERLOADED)
    assert slot_events(events)[1].to_dict() == {
        "type": "slot_fallback", "slot": "a", "from_model": "primary", "to_model": "backup", "reason": OVERLOADED,
    }  # fmt: skip
    completed = slot_events(events)[2]
    assert completed.result.output == "from the backup"
    assert completed.result.fallback_used == "backup"
    assert len(primary.calls) == 2  # one attempt, one retry
    assert [c.turns for c in backup.calls] == [[("user", "Hi")]]  # the original request, no hint (the provider failed)
    # every request sent counts (SPEC §13): the primary's two attempts (no tokens) and the backup's answer
    assert completed.result.usage.requests == 3


def test_the_fallbacks_are_tried_in_order() -> None:
    first, second = down(), Script(lambda call: "second")
    events = events_of(
        "Hi [[a]]", model=down().model("primary"), fallback=[first.model("first"), second.model("second")], retries=0,
        stream=False,
    )
    assert [(e.from_model, e.to_model) for e in events if isinstance(e, SlotFallback)] == [
        ("primary", "first"), ("first", "second"),
    ]  # fmt: skip
    assert slot_events(events)[-1].result.fallback_used == "second"
    assert len(first.calls) == 1 and len(second.calls) == 1


def test_the_slot_option_names_the_fallbacks_and_wins_over_the_call() -> None:
    other = Script(lambda call: "not me")
    env = sd.Environment(retries=0, fallback=other.model("other"))
    result = env.complete('Hi [[a|fallback="test"]] Then [[b]]', model=Script(lambda call: "b").model("primary"))
    assert result.results["a"].fallback_used is None  # the primary answered: no fallback
    primary = down()
    result = env.complete('Hi [[a|fallback="test"]]', model=primary.model("primary"))
    assert result["a"] == "success (no tool calls)" and result.results["a"].fallback_used == "test"
    assert other.calls == []
    with pytest.raises(sd.ConfigurationError, match="nosuchprovider"):
        env.complete('Hi [[a|fallback="nosuchprovider:x"]]', model=primary.model("primary"))


def test_no_fallback_for_a_template_error_or_a_foreign_error() -> None:
    backup = Script(lambda call: "never")

    def broken(call: Call) -> Any:
        raise ValueError("a bug in the model function")

    with pytest.raises(ValueError, match="a bug"):
        sd.complete("Hi [[a]]", model=Script(broken).model(), fallback=backup.model("backup"))
    assert backup.calls == []


def test_a_tool_loop_at_its_limit_restarts_on_the_fallback_with_the_hint_turn() -> None:
    ran: list[str] = []

    def lookup(word: str) -> str:
        """Look a word up."""
        ran.append(word)
        return f"{word}: a small animal"

    looping = Script(lambda call: Tools([("lookup", {"word": f"w{len(looping.calls)}"})]))
    backup = Script(lambda call: "a cat is a small animal")
    events = events_of(
        "Define cat. [[a|use_tools=true]]", model=looping.model("primary"), fallback=backup.model("backup"),
        tools=[lookup], limits=UsageLimits(request_limit=3, tool_calls_limit=10), stream=False,
    )  # fmt: skip
    hint = "A previous attempt could not finish: its tool loop hit its limit (the next request would exceed the request_limit of 3)."
    (fallback,) = [e for e in events if isinstance(e, SlotFallback)]
    assert (fallback.slot, fallback.from_model, fallback.to_model) == ("a", "primary", "backup")
    assert f"A previous attempt could not finish: {fallback.reason}." == hint
    assert len(looping.calls) == 3 and ran == ["w1", "w2", "w3"]
    assert [c.turns for c in backup.calls] == [[("user", "Define cat."), ("user", hint)]]
    result = slot_events(events)[-1].result
    assert result.output == "a cat is a small animal" and result.fallback_used == "backup"
    assert result.usage.requests == 3 + 1  # every attempt that got a response is billed
    assert result.usage.tool_calls == 3
    assert [c.tool_name for c in result.tool_calls] == ["lookup"] * 3


def test_each_fallback_attempt_gets_the_full_ceiling() -> None:
    def lookup(word: str) -> str:
        """Look a word up."""
        return "ok"

    def loop_then_answer(script: Script, answer_after: int) -> Script:
        def answer(call: Call) -> Any:
            return "done" if len(script.calls) > answer_after else Tools([("lookup", {"word": str(len(script.calls))})])

        script.answer = answer
        return script

    primary = loop_then_answer(Script(lambda call: None), 99)
    backup = loop_then_answer(Script(lambda call: None), 2)  # needs 3 requests: all of a fresh ceiling of 3
    result = sd.complete(
        "Go [[a|use_tools=true]]", model=primary.model("primary"), fallback=backup.model("backup"), tools=[lookup],
        limits=UsageLimits(request_limit=3),
    )  # fmt: skip
    assert result["a"] == "done" and len(backup.calls) == 3


def test_answers_that_fail_validation_every_time_fall_back_with_the_hint_turn() -> None:
    stubborn = Script(lambda call: ModelResponse(parts=[ToolCallPart(call.info.output_tools[0].name, {"response": "many"})]))
    backup = Script(lambda call: 4)
    result = sd.complete("How many legs? [[int:legs]]", model=stubborn.model("primary"), fallback=backup.model("backup"))
    assert result["legs"] == 4 and result.results["legs"].fallback_used == "backup"
    (request,) = backup.calls
    hint = request.turns[-1]
    assert hint[0] == "user"
    assert hint[1] == (
        "A previous attempt could not finish: its answer failed validation every time (last problem: input should "
        "be a valid integer, unable to parse string as an integer (the answer was 'many'))."
    )
    assert request.turns[0] == ("user", "How many legs?")
    assert result.results["legs"].usage.requests == len(stubborn.calls) + 1


def test_without_a_fallback_the_errors_are_as_before() -> None:
    looping = Script(lambda call: Tools([("lookup", {"word": "x"})]))
    with pytest.raises(sd.ToolLimitExceeded):
        sd.complete("Go [[a|use_tools=true]]", model=looping.model(), tools=[lambda word: word],
                    limits=UsageLimits(request_limit=2))  # fmt: skip
    stubborn = Script(lambda call: ModelResponse(parts=[ToolCallPart(call.info.output_tools[0].name, {"response": "x"})]))
    with pytest.raises(sd.BadModelOutput):
        sd.complete("N [[int:n]]", model=stubborn.model())


def test_a_failure_after_streamed_tokens_retracts_them_before_the_fallback_streams() -> None:
    async def broken(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        yield "half an "
        raise ModelHTTPError(500, "primary", "boom")

    backup = Script(lambda call: "whole answer")
    events = events_of("Hi [[a]]", model=FunctionModel(stream_function=broken, model_name="primary"),
                       fallback=backup.model("backup"), retries=0)  # fmt: skip
    assert [e for e in slot_events(events) if not isinstance(e, SlotCompleted)] == [
        SlotStreamStart("a"),
        TokenDelta("a", "half an ", "half an "),
        SlotRetracted("a", "fallback"),
        SlotFallback("a", "primary", "backup", "the provider failed (HTTP 500): boom"),
        SlotStreamStart("a"),
        TokenDelta("a", "whole ", "whole "),
        TokenDelta("a", "answer", "whole answer"),
    ]


# -- truncation -----------------------------------------------------------------------------


def cut(text: str) -> ModelResponse:
    return ModelResponse(parts=[TextPart(text)], finish_reason="length")


def test_a_cut_free_text_answer_is_kept_and_flagged() -> None:
    events = events_of("Tell a story [[a]] Then [[b]]", model=Script(lambda call: cut("Once upon a")).model(), stream=False)
    completed = [e for e in events if isinstance(e, SlotCompleted)]
    assert [(e.slot, e.result.output, e.truncated, e.result.truncated) for e in completed] == [
        ("a", "Once upon a", True, True), ("b", "Once upon a", True, True),
    ]  # fmt: skip
    assert completed[0].to_dict()["truncated"] is True
    whole = sd.complete("Hi [[a]]", model=Script(lambda call: "whole").model())
    assert whole.results["a"].truncated is False and whole.results["a"].fallback_used is None


def test_on_truncate_error_raises_truncated_error_from_the_slot_option_or_the_argument() -> None:
    model = Script(lambda call: cut("Once upon a")).model()
    with pytest.raises(sd.TruncatedError) as info:
        sd.complete("Tell [[a|on_truncate=error]]", model=model)
    assert isinstance(info.value, sd.ModelError) and info.value.slot == "a"
    assert "cut off at the output token limit" in str(info.value) and "max_tokens" in info.value.hint
    with pytest.raises(sd.TruncatedError):
        sd.complete("Tell [[a]]", model=model, on_truncate="error")
    assert sd.complete("Tell [[a|on_truncate=keep]]", model=model, on_truncate="error")["a"] == "Once upon a"


def test_a_cut_typed_answer_is_a_truncated_error_after_the_fallback() -> None:
    def cut_json(call: Call) -> Any:
        return ModelResponse(parts=[TextPart('{"response": 4')], finish_reason="length")

    def cut_call(call: Call) -> Any:
        return ModelResponse(parts=[ToolCallPart(call.info.output_tools[0].name, '{"response": 4')], finish_reason="length")

    for answer in (cut_json, cut_call):
        with pytest.raises(sd.TruncatedError) as info:
            sd.complete("Legs? [[int:n]]", model=Script(answer).model())
        assert info.value.slot == "n"
    backup = Script(lambda call: 8)
    result = sd.complete("Legs? [[int:n]]", model=Script(cut_call).model("primary"), fallback=backup.model("backup"))
    assert result["n"] == 8 and result.results["n"].fallback_used == "backup"
    hint = "A previous attempt could not finish: its answer was cut off at the output token limit."
    assert backup.calls[0].turns[-1] == ("user", hint)


def test_a_typed_answer_that_parses_but_was_cut_is_a_truncated_error_too() -> None:
    """A list that closed before the cut may still lack its last items: a typed answer whose
    response stopped at the limit is never used, even when it validates (docs/resilience.md)."""

    def complete_but_cut(call: Call) -> Any:
        return ModelResponse(parts=[ToolCallPart(call.info.output_tools[0].name, '{"response": ["a"]}')], finish_reason="length")

    with pytest.raises(sd.TruncatedError, match="output token limit: a typed answer cut short cannot be used. Hint") as info:
        sd.complete("Name three [[items*]]", model=Script(complete_but_cut).model())
    assert info.value.slot == "items"
    backup = Script(lambda call: ["a", "b", "c"])
    result = sd.complete("Name three [[items*]]", model=Script(complete_but_cut).model("primary"), fallback=backup.model("backup"))
    assert result["items"] == ["a", "b", "c"] and result.results["items"].truncated is False
    text = Script(lambda call: ModelResponse(parts=[TextPart("Once upon")], finish_reason="length"))
    assert sd.complete("Tell [[a]]", model=text.model()).results["a"].truncated is True  # free text: kept, flagged


def test_a_cut_tool_call_is_a_truncated_error() -> None:
    def answer(call: Call) -> Any:
        return ModelResponse(parts=[ToolCallPart("lookup", '{"word": "ca')], finish_reason="length")

    with pytest.raises(sd.TruncatedError, match=r"output token limit: a tool call cut short cannot be used \(max_tokens: 1024\)\. Hint"):
        sd.complete("Go [[a|use_tools=true]]", model=Script(answer).model(), tools=[lambda word: word])


# -- the default output cap (issue 23 item 1) ------------------------------------------------


def runaway(seen: list[Any]) -> FunctionModel:
    """A model that never stops on its own: it writes until its max_tokens, then is cut."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        cap = (info.model_settings or {}).get("max_tokens")
        seen.append(cap)
        if info.output_tools:
            schema = info.output_tools[0].parameters_json_schema
            value = value_for(schema["properties"]["response"], schema.get("$defs"))
            return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"response": value})])
        return ModelResponse(
            parts=[TextPart(" ".join(f"word{n}" for n in range(min(cap or 10**6, 50))))], finish_reason="length", usage=RequestUsage(output_tokens=cap or 0)
        )

    return FunctionModel(respond)


def test_a_model_that_never_stops_is_cut_at_the_default_cap_and_flagged() -> None:
    seen: list[Any] = []
    result = sd.complete("Tell me everything [[a]]", model=runaway(seen))
    assert seen == [1024]
    slot = result.results["a"]
    assert slot.truncated is True and slot.usage.output_tokens == 1024


def test_the_default_cap_is_sized_per_type_family() -> None:
    seen: list[Any] = []
    sd.complete("A [[a]] B [[int:b]] C [[pick:c|x, y]] D [[json:d]] E [[int*:e]] F [[halt:f|when=false]]", model=runaway(seen))
    assert seen == [1024, 1024, 1024, 4096, 4096, 1024]
    seen.clear()
    sd.complete("A [[int:b|thinking=low]]", model=runaway(seen))
    assert seen == [16384]  # reasoning tokens count too


def test_the_cap_is_overridden_by_the_slot_the_call_the_environment_and_the_model() -> None:
    seen: list[Any] = []
    sd.complete("A [[a|max_tokens=50]]", model=runaway(seen))
    sd.complete("A [[a]]", model=runaway(seen), settings={"max_tokens": 77})
    sd.Environment(settings={"max_tokens": 88}).complete("A [[a]]", model=runaway(seen))
    sd.complete("A [[a|max_tokens=5]]", model=runaway(seen), settings={"max_tokens": 77})

    def own(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append((info.model_settings or {}).get("max_tokens"))
        return ModelResponse(parts=[TextPart("ok")])

    sd.complete("A [[a]]", model=FunctionModel(own, settings={"max_tokens": 99}))
    assert seen == [50, 77, 88, 5, 99]


def test_tool_call_streams_are_untouched_by_the_retry_wrapper() -> None:
    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        if not any(isinstance(p, ToolCallPart) for m in messages for p in getattr(m, "parts", [])):
            yield {1: DeltaToolCall(name="lookup", json_args='{"word": "cat"}')}
        else:
            yield "It is an animal."

    def lookup(word: str) -> str:
        """Look a word up."""
        return f"{word}!"

    events = events_of("Cat? [[a|use_tools=true]]", model=FunctionModel(stream_function=stream), tools=[lookup])
    assert [type(e).__name__ for e in slot_events(events)] == [
        "ToolStarted", "ToolCompleted", "SlotStreamStart", "TokenDelta", "SlotCompleted",
    ]  # fmt: skip
    assert not [e for e in events if isinstance(e, SlotRetry)]
    assert slot_events(events)[-1].result.output == "It is an animal."


def test_on_retry_sees_retries_and_fallbacks_where_no_event_stream_is_read() -> None:
    seen: list[Any] = []
    backup = Script(lambda call: "ok")
    sd.complete("Hi [[a]]", model=down().model("primary"), fallback=backup.model("backup"), retries=2, on_retry=seen.append)
    assert [(type(e).__name__, getattr(e, "attempt", None)) for e in seen] == [
        ("SlotRetry", 1), ("SlotRetry", 2), ("SlotFallback", None),
    ]  # fmt: skip

    async def collect() -> list[Any]:
        got: list[Any] = []

        async def note(event: Any) -> None:  # a coroutine function works too
            got.append(event.type)

        await sd.complete_batch_async("Hi [[a]]", [{}, {}], model=down().model("primary"), retries=0,
                                      fallback=backup.model("backup"), on_retry=note)  # fmt: skip
        return got

    assert asyncio.run(collect()) == ["slot_fallback", "slot_fallback"]
