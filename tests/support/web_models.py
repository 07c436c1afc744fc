"""Scripted models for the playground tests, resolved by name in the worker process
(`STRUCKDOWN_MODEL=web_models:playground`), so no network and no keys.

`playground()`: a free-text slot with tools first calls `lookup(word="Ada")`, then
answers `Hello Ada, <tool output>!`; one without tools streams `A short poem for
Ada.` word by word; typed slots answer through their output tool (bool: true, int:
42, anything else: "ok"); a guard trips when the conversation says "trip". With SD_TEST_GATE=PATH a slot without tools streams its
first word, then waits until the test releases the gate at PATH (a FIFO,
process_gates.Release) once it has seen that word on the page, so "tokens stream
live" is decided by what the page shows, not by timing. (A tool slot's text is held until the response proves final,
so it arrives at once.)

`record_steps()`: the same model, but a record answer's pieces after the first each wait for
a gate, `SD_TEST_PIECE_GATES` + the piece's number (`…piece-1`, `…piece-2`), which the test
releases once the page shows the value so far; and the partials' coalescing clock steps a
second per reading, so no piece is coalesced into the next (SPEC §26's 20 a second).
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

from cli_models import tool_returns, user_text
from process_gates import wait_until_released

TYPED = {"boolean": True, "integer": 42, "number": 42}
RECORD_PIECES = ['{"response": {"name": "Ad', 'a", "born": 18', '15}}']  # a record streams in these pieces


def _typed(info: AgentInfo, prompt: str) -> ModelResponse:
    tool = info.output_tools[0]
    if "HaltVerdict" in tool.parameters_json_schema.get("$defs", {}):  # a guard: trips on "trip"
        verdict = {"triggered": "trip" in prompt, "reason": "scripted trip"}
        return ModelResponse(parts=[ToolCallPart(tool.name, {"response": verdict})])
    schema = tool.parameters_json_schema.get("properties", {}).get("response", {})
    kinds = [schema.get("type")] + [option.get("type") for option in schema.get("anyOf", [])]
    if tool.parameters_json_schema.get("title") == "RecordAnswer":
        return ModelResponse(parts=[ToolCallPart(tool.name, "".join(RECORD_PIECES))])
    value = next((TYPED[kind] for kind in kinds if kind in TYPED), "ok")
    return ModelResponse(parts=[ToolCallPart(tool.name, {"response": value})])


def _respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if info.output_tools:
        return _typed(info, user_text(messages))
    returns = tool_returns(messages)
    if info.function_tools and not returns:
        return ModelResponse(parts=[ToolCallPart("lookup", {"word": "Ada"})])
    if returns:
        return ModelResponse(parts=[TextPart(f"Hello Ada, {returns[-1].content}!")])
    return ModelResponse(parts=[TextPart("A short poem for Ada.")])


async def _wait_for_gate() -> None:
    gate = os.environ.get("SD_TEST_GATE")
    if gate:  # blocks a worker thread (not the loop) until the test releases the gate
        await asyncio.to_thread(wait_until_released, gate)


async def _wait_for_piece(number: int) -> None:
    gates = os.environ.get("SD_TEST_PIECE_GATES")
    if gates and number:
        await asyncio.to_thread(wait_until_released, f"{gates}{number}")


def playground() -> FunctionModel:
    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        response = _respond(messages, info)
        for index, part in enumerate(response.parts):
            if isinstance(part, TextPart):
                for number, word in enumerate(re.findall(r"\S+\s*", part.content)):
                    if number == 1 and not info.function_tools:
                        await _wait_for_gate()
                    yield word
            elif isinstance(part, ToolCallPart) and _is_record(info):
                for number, piece in enumerate(RECORD_PIECES):
                    await _wait_for_piece(number)
                    yield {index: DeltaToolCall(part.tool_name if number == 0 else None, piece, tool_call_id=part.tool_call_id)}
            elif isinstance(part, ToolCallPart):
                yield {index: DeltaToolCall(part.tool_name, part.args_as_json_str(), tool_call_id=part.tool_call_id)}

    return FunctionModel(_respond, stream_function=stream, model_name="playground")


def record_steps() -> FunctionModel:
    from struckdown.run import partials

    readings = iter(range(1, 1 << 30))
    partials.monotonic = lambda: float(next(readings))  # type: ignore[assignment]  # each reading a second after the last
    return playground()


def _is_record(info: AgentInfo) -> bool:
    return bool(info.output_tools) and info.output_tools[0].parameters_json_schema.get("title") == "RecordAnswer"


def marker() -> FunctionModel:
    """A `module:factory` with a visible side effect: it writes the file SD_TEST_MARKER names
    (the attack of issue 39 N1 ran `tempfile:mkdtemp` this way)."""
    with open(os.environ["SD_TEST_MARKER"], "a", encoding="utf-8") as handle:
        handle.write("factory ran\n")
    return playground()


def openai_wire() -> Any:
    """OpenAI's own API over an in-process transport: each request body is appended to the
    file SD_TEST_BODIES (one JSON line), and each reply says 600 of its 1,000 input tokens
    were read from the provider's prompt cache (issue 47: whose request put them there?)."""
    import json

    from provider_wire import Wire

    class Recorded(Wire):
        def _reply(self, request: Any) -> Any:
            with open(os.environ["SD_TEST_BODIES"], "a", encoding="utf-8") as handle:
                handle.write(json.dumps(json.loads(request.content)) + "\n")
            return super()._reply(request)

    return Recorded(cached=600).openai("gpt-4o")
