"""SPEC §26: typed answers stream as `SlotPartial` events, field by field.

Scripted streaming FunctionModels send the answer's tool-call arguments in pieces
(`DeltaToolCall`); the coalescing clock is `partials.monotonic`, replaced by a fake one
(no test sleeps).
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

import struckdown as sd
from struckdown.incremental import SlotCompleted, SlotPartial, SlotRetracted, SlotRetry
from struckdown.run import partials
from struckdown.run.wrappers import retries


class FakeClock:
    """Each reading is `step` seconds after the one before."""

    def __init__(self, step: float) -> None:
        self.t, self.step = 0.0, step

    def __call__(self) -> float:
        self.t += self.step
        return self.t


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Callable[[float], FakeClock]:
    def set_step(step: float) -> FakeClock:
        fake = FakeClock(step)
        monkeypatch.setattr(partials, "monotonic", fake)
        return fake

    set_step(1.0)  # by default every piece is a second after the last: none coalesced
    return set_step


def streaming(*attempts: list[str]) -> tuple[FunctionModel, list[int]]:
    """A model that streams the answer's arguments in the given pieces, one attempt per request."""
    calls: list[int] = []

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[dict[int, DeltaToolCall]]:
        calls.append(1)
        pieces = attempts[min(len(calls), len(attempts)) - 1]
        name = info.output_tools[0].name
        for i, piece in enumerate(pieces):
            if piece == "FAIL":
                raise ModelHTTPError(503, "scripted", {"error": {"message": "overloaded"}})
            yield {0: DeltaToolCall(name=name if i == 0 else None, json_args=piece)}

    def whole(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.append(1)
        text = "".join(attempts[-1])
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, text)])

    return FunctionModel(whole, stream_function=stream, model_name="scripted"), calls


def events_of(template: str, **options: Any) -> list[Any]:
    async def collect() -> list[Any]:
        return [e async for e in sd.complete_incremental_async(template, **options) if e.type != "model_responded"]

    return asyncio.run(collect())


def view(events: list[Any], slot: str) -> list[tuple[str, Any, Any]]:
    """(type, value, reason) of the slot's events."""
    return [(e.type, getattr(e, "value", None), getattr(e, "reason", None)) for e in events if getattr(e, "slot", None) == slot]


def partial_pairs(events: list[Any]) -> list[tuple[Any, tuple[str | int, ...]]]:
    return [(e.value, e.complete_fields) for e in events if isinstance(e, SlotPartial)]


RECORD = ['{"response": {"name": "Al', 'ice", "age": 3', '1, "tags": ["a", ', '"b"]', "}}"]


def test_a_record_streams_growing_values_with_the_fields_it_moved_past(clock: Any) -> None:
    model, _ = streaming(RECORD)
    events = events_of("Who? [[record:who]]", model=model)
    assert partial_pairs(events) == [
        ({"name": "Al"}, ()),
        ({"name": "Alice", "age": 3}, ("name",)),
        ({"name": "Alice", "age": 31, "tags": ["a"]}, ("name", "age")),
        ({"name": "Alice", "age": 31, "tags": ["a", "b"]}, ("name", "age")),
        ({"name": "Alice", "age": 31, "tags": ["a", "b"]}, ("name", "age", "tags")),
    ]
    kinds = [e.type for e in events]
    assert kinds == ["slot_partial"] * 5 + ["slot_completed", "checkpoint_reached", "processing_complete"]
    (completed,) = [e for e in events if isinstance(e, SlotCompleted)]
    last = [e for e in events if isinstance(e, SlotPartial)][-1]
    assert last.value == completed.result.output  # the last partial is the final answer


def test_a_list_streams_items_and_marks_the_finished_ones_by_index(clock: Any) -> None:
    model, _ = streaming(['{"response": ["ab', 'c", "d', 'e", "f"', "]}"])
    events = events_of("Quote [[extract*:bits]]", model=model)
    assert partial_pairs(events) == [
        (["ab"], ()),
        (["abc", "d"], (0,)),
        (["abc", "de", "f"], (0, 1)),
        (["abc", "de", "f"], (0, 1, 2)),
    ]
    assert events[-1].result["bits"] == ["abc", "de", "f"]


def test_numbers_with_a_star_quantifier_stream_too(clock: Any) -> None:
    model, _ = streaming(['{"response": [1', "0, 2", "0, 30]}"])
    events = events_of("Count [[int*:n]]", model=model)
    assert partial_pairs(events) == [([1], ()), ([10, 2], (0,)), ([10, 20, 30], (0, 1, 2))]


class Person(BaseModel):
    name: str
    age: int


def test_a_registered_pydantic_type_shows_once_its_required_fields_validate(clock: Any) -> None:
    env = sd.Environment()
    env.register_type("person", Person)
    model, _ = streaming(['{"response": {"name": "Bo', 'b", "ag', 'e": 4', "2}}"])

    async def collect() -> list[Any]:
        return [e async for e in env.complete_incremental_async("Who? [[person:p]]", model=model)]

    events = asyncio.run(collect())
    # pydantic-ai's partial validation: a model validates once every required field has begun
    assert partial_pairs(events) == [(Person(name="Bob", age=4), ("name",)), (Person(name="Bob", age=42), ("name", "age"))]
    assert isinstance(events[-1].result["p"], Person)


def test_a_fast_stream_is_coalesced_to_twenty_a_second_and_ends_on_the_answer(clock: Any) -> None:
    clock(0.02)  # every reading 20 ms after the last: pieces come faster than 50 ms apart
    pieces = ['{"response": {"a": 1', ', "b": 2', ', "c": 3', ', "d": 4', ', "e": 5', ', "f": 6', "}}"]
    model, _ = streaming(pieces)
    events = events_of("Go [[json:x]]", model=model)
    # one reading per piece: the first goes out (at 20 ms), the next once 50 ms have passed
    # since (the 4th piece, at 80 ms), then the 7th (140 ms), which closes the answer
    assert partial_pairs(events) == [
        ({"a": 1}, ()),
        ({"a": 1, "b": 2, "c": 3, "d": 4}, ("a", "b", "c")),
        ({"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6}, ("a", "b", "c", "d", "e", "f")),
    ]


def test_a_stream_that_never_leaves_the_window_shows_the_first_and_the_final_value(clock: Any) -> None:
    clock(0.0)  # the clock stands still: everything after the first partial is coalesced
    model, _ = streaming(RECORD)
    events = events_of("Who? [[record:who]]", model=model)
    assert partial_pairs(events) == [
        ({"name": "Al"}, ()),
        ({"name": "Alice", "age": 31, "tags": ["a", "b"]}, ("name", "age", "tags")),
    ]


def test_a_retry_after_partials_retracts_them_and_the_next_attempt_starts_empty(
    clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def no_wait(seconds: float) -> None:
        return None

    monkeypatch.setattr(retries, "sleep", no_wait)
    monkeypatch.setattr(retries, "uniform", random.Random(7).uniform)
    model, calls = streaming(['{"response": {"a": 1', ', "b": 2', "FAIL"], ['{"response": {"z": 9', "}}"])
    events = events_of("Go [[json:x]]", model=model)
    x_events = [e for e in events if getattr(e, "slot", None) == "x" and not isinstance(e, SlotCompleted)]
    assert [(e.type, getattr(e, "value", None), getattr(e, "reason", None)) for e in x_events] == [
        ("slot_partial", {"a": 1}, None),
        ("slot_partial", {"a": 1, "b": 2}, None),
        ("slot_retracted", None, "retry"),
        ("slot_retry", None, None),
        ("slot_partial", {"z": 9}, None),
        ("slot_partial", {"z": 9}, None),
    ]
    assert [e.complete_fields for e in x_events if isinstance(e, SlotPartial)] == [(), ("a",), (), ("z",)]
    assert len(calls) == 2 and isinstance(x_events[3], SlotRetry)
    assert events[-1].result["x"] == {"z": 9}


def test_an_answer_that_fails_validation_retracts_its_partials_before_the_model_is_asked_again(clock: Any) -> None:
    model, calls = streaming(['{"response": [1, ', '"x"]}'], ['{"response": [7]}'])
    events = events_of("Count [[int*:n]]", model=model)
    assert [
        (e.type, getattr(e, "value", None), getattr(e, "reason", None)) for e in events if getattr(e, "slot", None) == "n"
    ] == [
        ("slot_partial", [1], None),
        ("slot_retracted", None, "retry"),
        ("slot_partial", [7], None),
        ("slot_completed", None, None),
    ]
    assert len(calls) == 2


def test_a_fallback_retracts_the_failed_models_partials(clock: Any) -> None:
    primary, _ = streaming(['{"response": {"a": 1', ', "b": 2', "FAIL"])
    backup, _ = streaming(['{"response": {"c": 3}}'])
    events = events_of("Go [[json:x]]", model=primary, fallback=backup, retries=0)
    assert [
        (e.type, getattr(e, "value", None), getattr(e, "reason", None)) for e in events if getattr(e, "slot", None) == "x"
    ] == [
        ("slot_partial", {"a": 1}, None),
        ("slot_partial", {"a": 1, "b": 2}, None),
        ("slot_retracted", None, "fallback"),
        ("slot_fallback", None, "the provider failed (HTTP 503): overloaded"),
        ("slot_partial", {"c": 3}, None),
        ("slot_completed", None, None),
    ]
    assert events[-1].result["x"] == {"c": 3}


def test_without_streaming_no_partials_are_sent(clock: Any) -> None:
    model, _ = streaming(RECORD)
    events = events_of("Who? [[record:who]]", model=model, stream=False)
    assert [e.type for e in events] == ["slot_completed", "checkpoint_reached", "processing_complete"]


def test_scalar_typed_slots_send_no_partials(clock: Any) -> None:
    model, _ = streaming(['{"response": 4', "2}"])
    events = events_of("How many? [[int:n]]", model=model)
    assert [e.type for e in events] == ["slot_completed", "checkpoint_reached", "processing_complete"]


def test_slot_partial_is_an_event_like_the_others() -> None:
    assert sd.SlotPartial is SlotPartial
    event = SlotPartial("who", {"name": "Al"}, ("name",))
    assert event.type == "slot_partial"
    assert event.to_dict() == {"type": "slot_partial", "slot": "who", "value": {"name": "Al"}, "complete_fields": ["name"]}
    assert json.loads(event.to_json()) == event.to_dict()
    assert SlotRetracted("who", "retry").slot_key == "who"


def test_a_guard_trip_after_partials_retracts_them_as_halted(clock: Any) -> None:
    """A guard in a concurrent segment trips while a record streams (as text is retracted)."""
    release = asyncio.Event()
    first_partial = asyncio.Event()

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[dict[int, DeltaToolCall]]:
        yield {0: DeltaToolCall(info.output_tools[0].name, '{"response": {"a": 1')}
        await release.wait()  # never released: the trip cancels it
        yield {0: DeltaToolCall(None, "}}")}

    async def guard(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        await first_partial.wait()
        verdict = {"triggered": True, "reason": "stop"}
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"response": verdict})])

    async def run() -> tuple[list[Any], BaseException | None]:
        got: list[Any] = []
        model = FunctionModel(guard, stream_function=stream)
        try:
            async for event in sd.complete_incremental_async("Write [[record:a]]<checkpoint>Judge [[halt:g]]", model=model):
                got.append(event)
                if event.type == "slot_partial":
                    first_partial.set()
        except sd.Halted as exc:
            return got, exc
        return got, None

    events, error = asyncio.run(run())
    assert isinstance(error, sd.Halted)
    assert [(e.type, getattr(e, "slot", None)) for e in events if e.type not in ("checkpoint_reached", "model_responded")] == [
        ("slot_partial", "a"),
        ("slot_completed", "g"),
        ("slot_retracted", "a"),
        ("processing_complete", None),
    ]
    assert [e.reason for e in events if isinstance(e, SlotRetracted)] == ["halted"]
    assert [e.value for e in events if isinstance(e, SlotPartial)] == [{"a": 1}]


@pytest.mark.parametrize(
    ("template", "pieces", "partials"),
    [
        ("Who? [[record:who]]", ['{"response": {', '"name": "Al', 'ice"}}'], [{"name": "Al"}, {"name": "Alice"}]),
        ("Who? [[record:who]]", ['{"resp', 'onse": {"na', 'me": "Al', 'ice"}}'], [{"name": "Al"}, {"name": "Alice"}]),
        ("Who? [[json:who]]", ['{"response": {', '"a": 1', "}}"], [{"a": 1}, {"a": 1}]),
        ("Quote [[extract*:bits]]", ['{"response": [', '"ab', '"]}'], [["ab"], ["ab"]]),
        ("Who? [[record:who]]", ['{"response": {', "}}"], [{}]),  # an answer that is empty shows when it ends
    ],
)
def test_an_object_shows_from_its_first_key_and_a_list_from_its_first_item(
    clock: Any, template: str, pieces: list[str], partials: list[Any]
) -> None:
    """Issue 48 item 3: a record's first SlotPartial was `{}` (docs/streaming.md: records show
    from the first key)."""
    model, _ = streaming(pieces)
    events = events_of(template, model=model)
    assert [e.value for e in events if isinstance(e, SlotPartial)] == partials
