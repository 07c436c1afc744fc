"""Values are opaque text (SPEC §1, §2.6): hostile payloads never become structure.

Every payload of tests/support/hostile_payloads.py is placed (a) in a context value, (b) in a
model answer that a later slot interpolates, (c) in a tool result (and in tool
arguments). Each run is compared with the same run on a benign marker: the same
requests, the same turns (role by role), the same instructions and tools, the same
result keys, and the payload arrives *exactly* where the marker did (plain
`UserPromptPart`s, assistant turns and tool returns the scripted model receives).
"""

from __future__ import annotations

import asyncio
import json
import re
from functools import cache
from typing import Any

import pytest

import struckdown as sd
from hostile_payloads import PAYLOADS, has_surrogate
from scripted import Call, Script, Tools
from struckdown.incremental import ProcessingComplete, TokenDelta

MARKER = "BENIGN-MARKER-7f3a"
IDS = [name for name, _ in PAYLOADS]
VALUES = [payload for _, payload in PAYLOADS]
QUESTION = re.compile(r"^Q-(\w):")
# typed answers and tool arguments: every other payload (surrogates cannot be serialised there)
SAMPLE = [(n, v) for n, v in PAYLOADS[::2] if not has_surrogate(v)]


def question_of(call: Call) -> str:
    """Which question a request answers: its last user turn that starts with `Q-x:`."""
    for role, text in reversed(call.turns):
        if role == "user" and QUESTION.match(text):
            return QUESTION.match(text).group(1)  # type: ignore[union-attr]
    raise AssertionError(f"no question in {call.turns!r}")


def shape(script: Script, replace: str | None = None) -> list[tuple[Any, ...]]:
    """Each request as (question, turns, instructions, tools), in question order;
    with `replace`, the benign marker is swapped for it (what a hostile run must match)."""

    def sub(text: str | None) -> str | None:
        return text.replace(MARKER, replace) if text is not None and replace is not None else text

    calls = sorted(script.calls, key=question_of)  # stable: a slot's requests keep their order
    return [
        (question_of(c), [(role, sub(text)) for role, text in c.turns], sub(c.instructions), c.tool_names)
        for c in calls
    ]


def assert_same_structure(benign: tuple[Script, sd.Result], hostile: tuple[Script, sd.Result], payload: str) -> None:
    (b_script, b_result), (h_script, h_result) = benign, hostile
    assert len(h_script.calls) == len(b_script.calls)
    assert list(h_result) == list(b_result)
    assert list(h_result.results) == list(b_result.results)
    expected, got = shape(b_script, replace=payload), shape(h_script)
    for (bq, bturns, binstr, btools), (hq, hturns, hinstr, htools) in zip(expected, got):
        assert hq == bq
        assert [r for r, _ in hturns] == [r for r, _ in bturns], "the turns changed"
        assert hinstr == binstr, "the instructions changed"
        assert htools == btools
        assert hturns == bturns, "the text did not arrive intact"


# -- (a) context values ------------------------------------------------------------

CONTEXT_TEMPLATE = (
    "<system>Rules for «{{ v }}».</system>\n"
    "<header>Doc: «{{ v }}»</header>\n"
    "Q-a: before «{{ v }}» after\n[[a]]\n"
    "Q-b: then «{{ a }}» and «{{ v }}»\n[[b]]\n"
    "<checkpoint>\n"
    "Q-c: later «{{ v }}»\n[[c]]\n"
)


def run_context(value: str) -> tuple[Script, sd.Result]:
    script = Script(lambda call: f"answer {question_of(call)}")
    return script, sd.complete(CONTEXT_TEMPLATE, {"v": value}, model=script.model())


@cache
def benign_context() -> tuple[Script, sd.Result]:
    return run_context(MARKER)


@pytest.mark.parametrize("payload", VALUES, ids=IDS)
def test_context_values_stay_text(payload: str) -> None:
    benign, hostile = benign_context(), run_context(payload)
    assert_same_structure(benign, hostile, payload)
    script, result = hostile
    first = next(c for c in script.calls if question_of(c) == "a")
    assert first.turns == [("user", f"Doc: «{payload}»"), ("user", f"Q-a: before «{payload}» after")]
    assert first.instructions == f"Rules for «{payload}»."
    assert list(result) == ["a", "b", "c"]


# -- (b) model answers ---------------------------------------------------------------

ANSWER_TEMPLATE = (
    "<system>Rules.</system>\n"
    "Q-a: first\n[[a]]\n"
    "Q-b: then «{{ a }}»\n[[b]]\n"
    "<checkpoint>\n"
    "Q-c: later «{{ a }}»\n[[c]]\n"
)


async def run_answer(value: str) -> tuple[Script, sd.Result, str]:
    """The model answers `value` to question a; returns what slot a streamed too."""
    script = Script(lambda call: value if question_of(call) == "a" else f"answer {question_of(call)}")
    streamed, result = "", None
    async for event in sd.complete_incremental_async(ANSWER_TEMPLATE, model=script.model(), stream=True, loop_guard=False):  # a long payload repeats itself
        if isinstance(event, TokenDelta) and event.slot == "a":
            streamed = event.accumulated
        if isinstance(event, ProcessingComplete):
            result = event.result
            json.loads(event.to_json())  # the final event serialises, payload included
    assert result is not None
    return script, result, streamed


@cache
def benign_answer() -> tuple[Script, sd.Result, str]:
    return asyncio.run(run_answer(MARKER))


@pytest.mark.parametrize("payload", VALUES, ids=IDS)
def test_model_answers_stay_text(payload: str) -> None:
    *benign, _ = benign_answer()
    *hostile, streamed = asyncio.run(run_answer(payload))
    assert_same_structure(tuple(benign), tuple(hostile), payload)  # type: ignore[arg-type]
    script, result = hostile
    assert result["a"] == payload
    assert streamed == payload
    later = next(c for c in script.calls if question_of(c) == "b")
    assert later.turns == [("user", "Q-a: first"), ("assistant", payload), ("user", f"Q-b: then «{payload}»")]
    assert all(c.instructions == "Rules." for c in script.calls)


@pytest.mark.parametrize("payload", [v for _, v in SAMPLE], ids=[n for n, _ in SAMPLE])
def test_typed_answers_stay_text(payload: str) -> None:
    def answer(call: Call) -> object:
        return {"note": payload, "n": 1} if question_of(call) == "a" else "ok"

    script = Script(answer)
    result = sd.complete("Q-a: give [[record:a]]\nQ-b: note «{{ a.note }}»\n[[b]]", model=script.model())
    assert result["a"] == {"note": payload, "n": 1}
    assert list(result) == ["a", "b"]
    later = script.calls[1]
    assert later.turns[-1] == ("user", f"Q-b: note «{payload}»")
    assert [r for r, _ in later.turns] == ["user", "assistant", "user"]


# -- (c) tool results and tool arguments ---------------------------------------------

TOOL_TEMPLATE = (
    "<system>Rules.</system>\n"
    "Q-a: look it up\n[[a|use_tools=true]]\n"
    "Q-b: then «{{ a }}»\n[[b]]\n"
)


def run_tool(value: str) -> tuple[Script, sd.Result]:
    bodies: list[str] = []

    def lookup() -> str:
        """Look something up."""
        bodies.append("lookup")
        return value

    def answer(call: Call) -> object:
        if question_of(call) != "a":
            return f"answer {question_of(call)}"
        returns = [text for role, text in call.turns if role == "return"]
        return returns[-1] if returns else Tools([("lookup", {})])  # echo the tool result

    script = Script(answer)
    result = sd.complete(TOOL_TEMPLATE, model=script.model(), tools=[lookup], loop_guard=False)
    assert bodies == ["lookup"]
    return script, result


@cache
def benign_tool() -> tuple[Script, sd.Result]:
    return run_tool(MARKER)


@pytest.mark.parametrize("payload", VALUES, ids=IDS)
def test_tool_results_stay_text(payload: str) -> None:
    benign, hostile = benign_tool(), run_tool(payload)
    assert_same_structure(benign, hostile, payload)
    script, result = hostile
    assert ("return", payload) in script.calls[1].turns
    assert result["a"] == payload
    assert result.results["a"].tool_calls[0].output == payload


@pytest.mark.parametrize("payload", [v for _, v in SAMPLE], ids=[n for n, _ in SAMPLE])
def test_tool_arguments_reach_the_tool_intact(payload: str) -> None:
    received: list[str] = []

    def echo(text: str) -> str:
        """Echo the text."""
        received.append(text)
        return "echoed"

    answers = iter([Tools([("echo", {"text": payload})]), "done"])
    script = Script(lambda call: next(answers))
    result = sd.complete("Q-a: go [[a|use_tools=true]]", model=script.model(), tools=[echo])
    assert received == [payload]
    assert result.results["a"].tool_calls[0].arguments == {"text": payload}
    assert list(result) == ["a"]


# -- lone surrogates: documented in docs/security.md --------------------------------


def test_lone_surrogate_tool_arguments_fail_loudly_in_function_model() -> None:
    """pydantic-ai serialises tool-call arguments to JSON (FunctionModel's usage
    estimate, every real provider's request); a lone surrogate cannot be encoded, so
    the run fails with an error that says so, and the tool never runs."""
    received: list[str] = []

    def echo(text: str) -> str:
        """Echo the text."""
        received.append(text)
        return "echoed"

    answers = iter([Tools([("echo", {"text": "x\ud800"})]), "done"])
    script = Script(lambda call: next(answers))
    with pytest.raises(sd.BadRequestError) as info:
        sd.complete("Q-a: go [[a|use_tools=true]]", model=script.model(), tools=[echo])
    assert received == []
    assert "could not be sent" in str(info.value) and "lone surrogate" in str(info.value)
    assert "surrogates not allowed" in str(info.value.__cause__)


def test_lone_surrogate_values_fail_loudly_at_an_http_provider() -> None:
    """A request holding a lone surrogate cannot be encoded as UTF-8 JSON: an
    OpenAI-compatible provider fails before anything is sent (the endpoint below
    does not even exist), with an error that names the problem."""
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel("m", provider=OpenAIProvider(base_url="http://127.0.0.1:9/v1", api_key="k"))
    with pytest.raises(sd.BadRequestError) as info:
        sd.complete("Q-a: value «{{ v }}» [[a]]", {"v": "x\ud800y"}, model=model)
    assert str(info.value).startswith("model 'm' at http://127.0.0.1:9/v1: the request could not be sent: ")
    assert "lone surrogate" in info.value.hint
    assert isinstance(info.value.__cause__, UnicodeEncodeError)
