"""Provider faults through scripted models: errors surface clearly once retries are spent.

* HTTP errors (429/500/503) and timeouts raised by the model surface to the caller as
  the mapped `struckdown.models.errors` type (`RateLimitError`, `ModelError`,
  `ModelConnectionError`), on the plain, streaming and guard paths, once struckdown's
  retries (SPEC §14, 3 by default; tests/test_resilience.py) are spent.
* Malformed tool calls (unknown tool, arguments that are not JSON or have the wrong
  types) and invalid typed answers are sent back to the model with the error and
  asked again (pydantic-ai's retry, at least once); when they persist the slot
  fails with pydantic-ai's `UnexpectedModelBehavior`, and no tool body ever ran.
* In a batch a failing row is returned as its exception and the others complete.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic_ai.exceptions import ModelHTTPError, UnexpectedModelBehavior
from pydantic_ai.messages import ModelResponse, ToolCallPart
from scripted import Call, Script, Tools, answered_last

import struckdown as sd
from struckdown.codec import jsonable
from struckdown.incremental import ProcessingError, SlotCompleted
from struckdown.models.errors import ModelConnectionError, ModelError, RateLimitError

TRIP = {"triggered": True, "reason": "bad"}
PASS = {"triggered": False, "reason": "ok"}


def failing(exc: BaseException, *, after: int = 0) -> Script:
    """A model that answers `after` requests, then raises `exc` on every request."""

    def answer(call: Call) -> object:
        if len(script.calls) > after:
            raise exc
        return "fine"

    script = Script(answer)
    return script


FAULTS = [
    pytest.param(ModelHTTPError(429, "scripted", {"error": {"message": "slow down"}}), RateLimitError, 429, id="429"),
    pytest.param(ModelHTTPError(500, "scripted", "internal error"), ModelError, 500, id="500"),
    pytest.param(ModelHTTPError(503, "scripted", {"error": {"message": "overloaded"}}), ModelError, 503, id="503"),
    pytest.param(asyncio.TimeoutError(), ModelConnectionError, None, id="timeout"),
    pytest.param(TimeoutError("read timed out"), ModelConnectionError, None, id="read-timeout"),
]


@pytest.mark.parametrize(("fault", "mapped", "status"), FAULTS)
def test_provider_errors_surface_as_mapped_errors(fault: BaseException, mapped: type, status: int | None) -> None:
    script = failing(fault, after=1)
    with pytest.raises(mapped) as info:
        sd.complete("First [[a]] Second [[b]]", model=script.model())
    error = info.value
    assert isinstance(error, sd.StruckdownError)
    assert error.status == status
    assert error.model == "scripted"  # the FunctionModel's model_name=
    assert error.hint and "Hint:" in str(error)
    if isinstance(fault, asyncio.TimeoutError | TimeoutError):
        assert "timed out" in str(error)
    assert len(script.calls) == 2 + 3  # one answer, then the failing request and its 3 retries (SPEC §14)


@pytest.mark.parametrize(("fault", "mapped", "status"), FAULTS)
def test_provider_errors_while_streaming_end_the_event_stream(fault: BaseException, mapped: type, status: int | None) -> None:
    script = failing(fault, after=1)
    seen: list[Any] = []

    async def consume() -> None:
        async for event in sd.complete_incremental_async("First [[a]] Second [[b]]", model=script.model(), stream=True):
            seen.append(event)

    asyncio.run(consume())  # the generator ends after ProcessingError (the error is on the event)
    assert [e.slot for e in seen if isinstance(e, SlotCompleted)] == ["a"]
    errors = [e for e in seen if isinstance(e, ProcessingError)]
    assert len(errors) == 1 and isinstance(errors[0].error, mapped)
    assert errors[0].slot == "b"
    assert seen[-1] is errors[0]


def test_a_failing_guard_is_an_error_not_a_pass() -> None:
    """A guard whose model call fails must not let the run go on as if it had passed."""
    writes: list[str] = []

    def write(x: str) -> str:
        """Write."""
        writes.append(x)
        return "ok"

    def answer(call: Call) -> object:
        if call.schema and "triggered" in str(call.schema):
            raise ModelHTTPError(503, "scripted", "overloaded")
        return Tools([("write", {"x": "1"})]) if call.tool_names and len(call.turns) == 1 else "done"

    # the guard's failure comes last, when the run stands still: the slot is held at its join by then
    script = Script(answer, gate=answered_last(lambda c: bool(c.schema)))
    with pytest.raises(ModelError) as info:
        sd.complete("Judge [[halt:g]] Act [[act|use_tools=true]]", model=script.model(), tools=[write])
    assert info.value.status == 503
    assert writes == []


def test_a_fault_in_the_middle_of_an_agent_loop_surfaces() -> None:
    ran: list[str] = []

    def lookup(city: str) -> str:
        """Look up a city."""
        ran.append(city)
        return "sunny"

    def answer(call: Call) -> object:
        if len(script.calls) >= 3:  # from the third request on: every retry fails too
            raise ModelHTTPError(429, "scripted", "slow down")
        return Tools([("lookup", {"city": f"c{len(script.calls)}"})])

    script = Script(answer)
    with pytest.raises(RateLimitError):
        sd.complete("Go [[w|use_tools=true]]", model=script.model(), tools=[lookup])
    assert ran == ["c1", "c2"]
    assert len(script.calls) == 3 + 3  # the failing request and its 3 retries


# -- malformed tool calls and invalid typed answers: pydantic-ai's retry ------------------


def lookup_tool(ran: list[str]) -> Any:
    def lookup(city: str) -> str:
        """Look up a city."""
        ran.append(city)
        return f"sunny in {city}"

    return lookup


MALFORMED_CALLS = [
    pytest.param(Tools([("nope", {"city": "Oslo"})]), "Unknown tool name: 'nope'", id="unknown-tool"),
    pytest.param(ModelResponse(parts=[ToolCallPart("lookup", "{city: Oslo")]), "Invalid JSON", id="args-not-json"),
    pytest.param(Tools([("lookup", {"city": {"not": "a string"}})]), "string", id="wrong-type"),
    pytest.param(Tools([("lookup", {})]), "missing", id="missing-argument"),
    pytest.param(Tools([("lookup", {"city": "Oslo", "extra": 1})]), "extra", id="invented-argument"),
]


@pytest.mark.parametrize(("bad", "words"), MALFORMED_CALLS)
def test_a_malformed_tool_call_is_sent_back_and_asked_again(bad: object, words: str) -> None:
    ran: list[str] = []
    answers = iter([bad, Tools([("lookup", {"city": "Rome"})]), "done"])
    script = Script(lambda call: next(answers))
    result = sd.complete("Go [[w|use_tools=true]]", model=script.model(), tools=[lookup_tool(ran)])
    assert result["w"] == "done"
    assert ran == ["Rome"]  # the malformed call never reached the tool body
    feedback = [text for role, text in script.calls[1].turns if role == "return"]
    assert len(feedback) == 1 and words in feedback[0], feedback


@pytest.mark.parametrize(("bad", "words"), MALFORMED_CALLS)
def test_a_persistently_malformed_tool_call_fails_clearly(bad: object, words: str) -> None:
    ran: list[str] = []
    script = Script(lambda call: bad)
    with pytest.raises(UnexpectedModelBehavior, match="exceeded max retries"):
        sd.complete("Go [[w|use_tools=true]]", model=script.model(), tools=[lookup_tool(ran)])
    assert ran == []
    assert len(script.calls) == 3  # the first try and two retries
    assert all(words in text for c in script.calls[1:] for role, text in c.turns[-1:] if role == "return")


INVALID_ANSWERS = [
    pytest.param("[[int:n]]", ModelResponse(parts=[ToolCallPart("final_result", "{bad json")]), 5, "Invalid JSON", id="int-not-json"),
    pytest.param("[[int:n]]", "five", 5, "valid integer", id="int-wrong-type"),
    pytest.param("[[record:n]]", ["a", "list"], {"k": 1}, "dictionary", id="record-not-object"),
    pytest.param("[[pick:n|red, blue]]", "green", "red", "red", id="pick-not-a-choice"),
    pytest.param("[[date:n]]", "next tuesday", "2024-05-01", "date", id="date-not-iso"),
    pytest.param("[[!bool:n]]", None, True, "bool", id="required-null"),
]


@pytest.mark.parametrize(("slot", "bad", "good", "words"), INVALID_ANSWERS)
def test_an_invalid_typed_answer_is_sent_back_and_asked_again(slot: str, bad: object, good: object, words: str) -> None:
    answers = iter([bad, good])
    script = Script(lambda call: next(answers))
    result = sd.complete(f"Q {slot}", model=script.model())
    assert len(script.calls) == 2
    feedback = [text for role, text in script.calls[1].turns if role in ("return", "retry", "user")][-1]
    assert words.lower() in feedback.lower(), feedback
    assert jsonable(result["n"]) == good


@pytest.mark.parametrize(("slot", "bad", "good", "words"), INVALID_ANSWERS)
def test_a_persistently_invalid_typed_answer_fails_clearly(slot: str, bad: object, good: object, words: str) -> None:
    script = Script(lambda call: bad)
    with pytest.raises(UnexpectedModelBehavior, match="gave no usable answer in 3 tries"):
        sd.complete(f"Q {slot}", model=script.model())
    assert len(script.calls) == 3


def test_an_invalid_text_answer_is_retried_with_the_reason() -> None:
    answers = iter(["lowercase", "UPPER"])
    script = Script(lambda call: next(answers))
    result = sd.complete('Q [[code|pattern="^[A-Z]+$"]]', model=script.model())
    assert result["code"] == "UPPER"
    assert "pattern" in script.calls[1].turns[-1][1]


# -- batches keep the rows that worked ---------------------------------------------------


def test_a_failing_row_is_returned_as_its_exception_and_the_others_complete() -> None:
    def answer(call: Call) -> object:
        if "ROW-1" in call.last_user:
            raise ModelHTTPError(503, "scripted", "overloaded")
        if "ROW-3" in call.last_user:
            return Tools([("nope", {})])  # malformed forever
        return f"ok {call.last_user}"

    script = Script(answer)
    contexts = [{"row": f"row-{i}"} for i in range(6)]
    contexts[4] = {}  # {{ row.upper() }} on an undefined value: a template error, in that row only
    seen: list[int] = []
    with pytest.warns(UserWarning, match="undefined variable 'row' \\(line 1\\)"):  # row 4's context has no row
        results = sd.complete_batch(
            "Item {{ row.upper() if row else row.missing.deeper }} [[a]] then [[b]]",
            contexts,
            model=script.model(),
            concurrency=3,
            on_result=lambda index, outcome: seen.append(index),
        )
    assert len(results) == 6 and sorted(seen) == list(range(6))
    assert isinstance(results[1], ModelError) and results[1].status == 503
    assert isinstance(results[3], UnexpectedModelBehavior)
    assert isinstance(results[4], sd.TemplateRuntimeError)
    for index in (0, 2, 5):
        result = results[index]
        assert isinstance(result, sd.Result), result
        assert result["a"] == f"ok Item ROW-{index}"
        assert list(result) == ["a", "b"]


def test_a_batch_where_every_row_fails_still_returns_every_row() -> None:
    script = failing(ModelHTTPError(429, "scripted", "slow down"))
    results = sd.complete_batch("Q {{ i }} [[a]]", [{"i": i} for i in range(4)], model=script.model())
    assert [type(r) for r in results] == [RateLimitError] * 4


def test_a_persistently_invalid_answer_is_a_struckdown_error_naming_slot_model_and_problem() -> None:
    script = Script(lambda call: "five")
    with pytest.raises(sd.StruckdownError) as info:
        sd.complete("Q [[int:n]]", model=script.model())
    error = info.value
    assert isinstance(error, UnexpectedModelBehavior) and type(error).__name__ == "BadModelOutput"
    assert error.slot == "n" and "model scripted" in str(error) and "Hint:" in str(error)
    assert error.reason == "Input should be a valid integer, unable to parse string as an integer (the answer was 'five')"


def test_errors_name_their_slot_and_foreign_ones_pass_through_with_only_a_note() -> None:
    class Boom(Exception):
        pass

    def explode(call: Call) -> str:
        raise Boom("provider exploded")

    with pytest.raises(Boom) as foreign:
        sd.complete("A [[a]]", model=Script(explode).model())
    assert type(foreign.value) is Boom and vars(foreign.value) == {"__notes__": ["struckdown: raised in slot 'a'"]}
    with pytest.raises(sd.TemplateRuntimeError) as ours:
        sd.complete("A [[a|temperature={{ 1 / 0 }}]]", model=Script(lambda c: "x").model())
    assert ours.value.slot == "a"
