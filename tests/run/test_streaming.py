"""Events from the one engine: exact sequences, guards, failures and cancellation (SPEC §5, §6)."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel

import struckdown as sd
from scripted import Call, Script, Tools, answered_last

TRIP = {"triggered": True, "reason": "stop"}


def is_guard(call: Call) -> bool:
    return bool(call.schema) and "triggered" in str(call.schema)


def shape(events: list[Any]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for e in events:
        if e.type == "token_delta":
            out.append((e.type, e.slot, e.delta, e.accumulated))
        elif e.type in ("slot_stream_start", "slot_completed", "slot_retracted"):
            out.append((e.type, e.slot) + ((e.reason,) if e.type == "slot_retracted" else ()))
        elif e.type in ("tool_started", "tool_completed"):
            out.append((e.type, e.tool_name, json.dumps(e.arguments)))
        elif e.type == "checkpoint_reached":
            out.append((e.type, e.segment, e.name))
        elif e.type == "processing_complete":
            out.append((e.type, e.early_termination))
        elif e.type == "model_responded":  # the usage ledger (SPEC §13): once per request, after its response
            out.append((e.type, e.slot))
        else:
            out.append((e.type,))
    return out


async def collect(template: str, context: dict[str, Any] | None = None, **kwargs: Any) -> list[Any]:
    return [e async for e in sd.complete_incremental_async(template, context, **kwargs)]


def test_free_text_slot_event_sequence() -> None:
    script = Script(lambda c: "Hello there world")
    events = asyncio.run(collect("Greet [[g]]", model=script.model()))
    assert shape(events) == [
        ("slot_stream_start", "g"),
        ("token_delta", "g", "Hello ", "Hello "),
        ("token_delta", "g", "there ", "Hello there "),
        ("token_delta", "g", "world", "Hello there world"),
        ("model_responded", "g"),
        ("slot_completed", "g"),
        ("checkpoint_reached", 0, None),
        ("processing_complete", False),
    ]
    assert events[-1].result["g"] == "Hello there world"


def test_pick_slot_only_completes() -> None:
    script = Script(lambda c: "red")
    events = asyncio.run(collect("Colour? [[pick:c|red, blue]]", model=script.model()))
    assert shape(events) == [
        ("model_responded", "c"), ("slot_completed", "c"), ("checkpoint_reached", 0, None), ("processing_complete", False),
    ]


def test_tool_events_come_before_the_answer_tokens() -> None:
    @sd.readonly
    def lookup(q: str) -> str:
        """Look up."""
        return "42"

    script = Script(lambda c: Tools([("lookup", {"q": "x"})]) if c.turns[-1][0] == "user" else "It is 42")
    events = asyncio.run(collect("Ask [[a|use_tools=true]]", model=script.model(), tools=[lookup]))
    assert shape(events) == [
        ("model_responded", "a"),
        ("tool_started", "lookup", '{"q": "x"}'),
        ("tool_completed", "lookup", '{"q": "x"}'),
        ("model_responded", "a"),
        ("slot_stream_start", "a"),
        ("token_delta", "a", "It ", "It "),
        ("token_delta", "a", "is ", "It is "),
        ("token_delta", "a", "42", "It is 42"),
        ("slot_completed", "a"),
        ("checkpoint_reached", 0, None),
        ("processing_complete", False),
    ]
    done = events[2]
    assert done.arguments == {"q": "x"} and done.output == "42" and done.ok and done.error is None


def test_text_before_a_tool_call_is_not_streamed() -> None:
    @sd.readonly
    def lookup(q: str) -> str:
        """Look up."""
        return "42"

    def answer(call: Call) -> Any:
        if call.turns[-1][0] == "user":
            from pydantic_ai.messages import ToolCallPart

            return ModelResponse(parts=[TextPart("let me check"), ToolCallPart("lookup", {"q": "x"})])
        return "final"

    script = Script(answer)
    events = asyncio.run(collect("Ask [[a|use_tools=true]]", model=script.model(), tools=[lookup]))
    deltas = [e.delta for e in events if e.type == "token_delta"]
    assert deltas == ["final"]


def test_guard_trip_before_tokens_yields_no_stream_start() -> None:
    # the verdict comes only when the run stands still: the answer's first token is there by
    # then, held back by the guard join (were it not, the test would see it stream)
    script = Script(lambda c: TRIP if is_guard(c) else "never shown", gate=answered_last(is_guard))

    async def run() -> tuple[list[Any], BaseException | None]:
        got: list[Any] = []
        try:
            async for event in sd.complete_incremental_async("Judge [[halt:g]] Answer [[a]]", model=script.model()):
                got.append(event)
        except sd.Halted as exc:
            return got, exc
        return got, None

    events, error = asyncio.run(run())
    assert isinstance(error, sd.Halted)
    assert shape(events) == [("model_responded", "g"), ("slot_completed", "g"), ("processing_complete", True)]
    assert sorted(c.last_user for c in script.calls) == ["Answer", "Judge"]  # the answer was asked beside it


def test_guard_trip_after_tokens_retracts_the_streamed_slot() -> None:
    """A guard in a concurrent segment trips while an earlier slot streams."""
    release = asyncio.Event()
    first_token_seen = asyncio.Event()

    async def stream(messages: Any, info: Any) -> Any:
        yield "partial "
        await release.wait()
        yield "rest"

    async def guard(messages: Any, info: Any) -> ModelResponse:
        from pydantic_ai.messages import ToolCallPart

        await first_token_seen.wait()
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"response": TRIP})])

    def function(messages: Any, info: Any) -> Any:
        return guard(messages, info)

    model = FunctionModel(function, stream_function=stream)

    async def run() -> tuple[list[Any], BaseException | None]:
        got: list[Any] = []
        try:
            async for event in sd.complete_incremental_async(
                "Write [[a]]<checkpoint>Judge [[halt:g]]", model=model
            ):
                got.append(event)
                if event.type == "token_delta":
                    first_token_seen.set()
        except sd.Halted as exc:
            return got, exc
        return got, None

    events, error = asyncio.run(run())
    assert isinstance(error, sd.Halted)
    assert [s for s in shape(events) if s[0] != "checkpoint_reached"] == [
        ("slot_stream_start", "a"),
        ("token_delta", "a", "partial ", "partial "),
        ("model_responded", "g"),
        ("slot_completed", "g"),
        ("slot_retracted", "a", "halted"),
        ("processing_complete", True),
    ]
    assert "rest" not in [getattr(e, "delta", None) for e in events]


def test_on_halt_return_ends_the_stream_cleanly() -> None:
    script = Script(lambda c: TRIP if is_guard(c) else "x")
    events = asyncio.run(collect("Judge [[halt:g]] A [[a]]", model=script.model(), on_halt="return"))
    assert events[-1].type == "processing_complete" and events[-1].early_termination
    assert isinstance(events[-1].result.halted, sd.Halted)


def test_failing_slot_after_tokens_is_retracted_and_the_error_reaches_the_consumer() -> None:
    class Boom(RuntimeError):
        pass

    async def stream(messages: Any, info: Any) -> Any:
        yield "half "
        raise Boom("connection dropped")

    model = FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("x")]), stream_function=stream)

    async def run() -> list[Any]:
        # the generator ends after ProcessingError (as 0.x's did): the error is on the event
        return [event async for event in sd.complete_incremental_async("Write [[a]]", model=model)]

    events = asyncio.run(run())
    error = events[-1].error
    assert isinstance(error, Boom)
    assert shape(events) == [
        ("slot_stream_start", "a"),
        ("token_delta", "a", "half ", "half "),
        ("slot_retracted", "a", "errored"),
        ("processing_error",),
    ]
    assert events[-1].slot == "a" and events[-1].error is error
    with pytest.raises(Boom):
        sd.complete("Write [[a]]", model=FunctionModel(lambda m, i: (_ for _ in ()).throw(Boom("x"))))


def test_concurrent_segments_stream_without_loss() -> None:
    # gate: every segment's request is held until all five are in flight, so they stream together
    script = Script(lambda c: f"answer to {c.last_user}", meet=5)
    template = "".join(f"Q{i} [[s{i}]]<checkpoint>" for i in range(5)).removesuffix("<checkpoint>")
    events = asyncio.run(collect(template, model=script.model()))
    for i in range(5):
        deltas = "".join(e.delta for e in events if e.type == "token_delta" and e.slot == f"s{i}")
        assert deltas == f"answer to Q{i}"
    assert sorted(e.segment for e in events if e.type == "checkpoint_reached") == [0, 1, 2, 3, 4]
    assert events[-1].type == "processing_complete"
    assert script.peak == 5  # the five segments were in flight together


def test_every_event_serialises_to_json() -> None:
    @sd.readonly
    def lookup(q: str) -> str:
        """Look up."""
        return "42"

    script = Script(
        lambda c: "2024-01-02" if c.schema else Tools([("lookup", {"q": "x"})]) if c.turns[-1][0] == "user" else "done"
    )
    events = asyncio.run(collect("A [[a|use_tools=true]] D [[date:d]]", model=script.model(), tools=[lookup]))
    for event in events:
        data = json.loads(event.to_json())
        assert data["type"] == event.type
    final = json.loads(events[-1].to_json())
    assert final["result"] == {"a": "done", "d": "2024-01-02"}


def test_sync_incremental_is_really_incremental() -> None:
    gate = threading.Event()

    async def stream(messages: Any, info: Any) -> Any:
        yield "first "
        await asyncio.to_thread(gate.wait)  # the consumer must see "first" before this releases
        yield "second"

    model = FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("x")]), stream_function=stream)
    seen: list[str] = []
    for event in sd.complete_incremental("Go [[a]]", model=model):
        if event.type == "token_delta":
            seen.append(event.delta)
            gate.set()
    assert seen == ["first ", "second"]


# -- cancellation ---------------------------------------------------------------


class Hanging:
    """A model whose requests block until cancelled; records what happened."""

    def __init__(self, expect: int = 1) -> None:
        self.started = asyncio.Event()  # set once `expect` requests are in flight
        self.expect = expect
        self.cancelled = 0
        self.requests = 0

    def model(self) -> FunctionModel:
        async def function(messages: Any, info: Any) -> ModelResponse:
            return await self._hang()

        async def stream(messages: Any, info: Any) -> Any:
            await self._hang()
            yield "never"

        return FunctionModel(function, stream_function=stream)

    async def _hang(self) -> ModelResponse:
        self.requests += 1
        if self.requests >= self.expect:
            self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        raise AssertionError("unreachable")


def test_aclose_cancels_the_in_flight_request() -> None:
    hanging = Hanging()

    async def run() -> None:
        gen = sd.complete_incremental_async("A [[a]] B [[b]]", model=hanging.model())
        first = asyncio.ensure_future(gen.__anext__())
        await hanging.started.wait()
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        await gen.aclose()
        await asyncio.sleep(0)
        assert hanging.cancelled == 1 and hanging.requests == 1
        assert asyncio.all_tasks() == {asyncio.current_task()}

    asyncio.run(run())


def test_cancelling_the_consuming_task_cancels_everything() -> None:
    hanging = Hanging(expect=2)  # the guard and the one call beside it (the second segment waits for the guard)

    async def consume() -> None:
        async for _ in sd.complete_incremental_async(
            "G [[halt:g]] A [[a]]<checkpoint>B [[b]]", model=hanging.model()
        ):
            pass

    async def run() -> None:
        task = asyncio.create_task(consume())
        await hanging.started.wait()  # the gate: every branch has reached its model call
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert hanging.cancelled == hanging.requests == 2
        assert asyncio.all_tasks() == {asyncio.current_task()}

    asyncio.run(run())


def test_generator_can_be_advanced_under_wait_for_and_closed_from_another_task() -> None:
    hanging = Hanging()

    async def run() -> None:
        gen = sd.complete_incremental_async("A [[a]]", model=hanging.model())
        advancing = asyncio.create_task(asyncio.wait_for(gen.__anext__(), timeout=30))
        await hanging.started.wait()
        advancing.cancel()  # as a wait_for timeout would
        with pytest.raises(asyncio.CancelledError):
            await advancing
        await asyncio.create_task(gen.aclose())
        assert hanging.cancelled == 1
        assert asyncio.all_tasks() == {asyncio.current_task()}

    asyncio.run(run())


def test_leaving_the_sync_iterator_early_leaves_nothing_running() -> None:
    cancelled = threading.Event()
    requests: list[str] = []

    async def stream(messages: Any, info: Any) -> Any:
        requests.append("call")
        try:
            yield "first "
            await asyncio.Event().wait()  # only cancellation ends this answer
            yield "never"
        except (asyncio.CancelledError, GeneratorExit):  # cancelled, or closed at its yield
            cancelled.set()
            raise

    model = FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("x")]), stream_function=stream)
    before = threading.active_count()
    iterator = sd.complete_incremental("Go [[a]] More [[b]]", model=model)
    for event in iterator:
        if event.type == "token_delta":
            break
    iterator.close()  # type: ignore[attr-defined]
    assert cancelled.is_set()  # the in-flight request was stopped
    assert threading.active_count() == before  # the run's thread is gone
    assert requests == ["call"]  # slot b never started


def test_thinking_streams_as_thinking_deltas_before_the_answer() -> None:
    from pydantic_ai.models.function import DeltaThinkingPart

    async def stream(messages: Any, info: Any) -> Any:
        yield {0: DeltaThinkingPart(content="Let me ")}
        yield {0: DeltaThinkingPart(content="think.")}
        yield "Answer"

    model = FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("x")]), stream_function=stream)
    events = asyncio.run(collect("Q [[a]]", model=model))
    assert [(e.type, getattr(e, "delta", None)) for e in events[:4]] == [
        ("thinking_delta", "Let me "),
        ("thinking_delta", "think."),
        ("slot_stream_start", None),
        ("token_delta", "Answer"),
    ]
    assert events[-1].result["a"] == "Answer"
