"""The model of the durable-batch kill tests (tests/cli/test_durable_workers.py), built by
name wherever a row runs (`--model durable_rows:refunds`: this process, a `--workers`
process, a Dask worker).

A row's prompt says `Refund order RN. dir=DIR`. The first request of a row asks for the
`refund` tool; the next answers `done: <what the tool returned>`. Everything a test
decides is in DIR, so nothing has to be set in a worker's environment:

- DIR/point: where row 0 stops for the kill: `call` (before its first answer, the tool
  call, is returned: nothing journaled yet) or `answered` (the tool's result came back:
  journaled as done). The tool stops at `before`, `during` and `after` (its file).
- DIR/go: a `process_gates.Release` gate row 0 waits on before its first request (when
  there is one), so that the test lets it go only once row 1 has finished (the FIFO
  DIR/row1 is told so).
- DIR/stopped: the FIFO the stop point writes `POINT PID` into; then it blocks until killed.
Each signal is given once (a marker file DIR/NAME.once), so a row run again after the
kill (by Dask or `--resume`) goes through.
"""

from __future__ import annotations

import asyncio
import os
import re
import time

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel


def once(folder: str, name: str) -> bool:
    """True the first time `name` is claimed in `folder` by any process."""
    try:
        os.close(os.open(os.path.join(folder, name + ".once"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    except FileExistsError:
        return False
    return True


def tell(fifo: str, text: str) -> None:
    with open(fifo, "w") as gate:
        gate.write(text)


def stop_here(folder: str, point: str) -> None:
    """Tell the test this process reached `point`, then block until it is killed."""
    tell(os.path.join(folder, "stopped"), f"{point} {os.getpid()}")
    time.sleep(3600)


def _prompt(messages: list[ModelMessage]) -> str:
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if getattr(part, "part_kind", "") == "user-prompt" and isinstance(part.content, str):
                    return part.content
    return ""


async def _answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    prompt = _prompt(messages)
    order = re.search(r"order (R\d+)", prompt)
    folder = re.search(r"dir=(\S+)", prompt)
    assert order and folder, prompt
    name, where = order.group(1), folder.group(1)
    point_file = os.path.join(where, "point")
    point = open(point_file).read().strip() if os.path.exists(point_file) else ""
    returns = [p for m in messages for p in getattr(m, "parts", ()) if isinstance(p, ToolReturnPart)]
    if not returns:
        if name == "R0" and os.path.exists(os.path.join(where, "go")):
            from process_gates import wait_until_released

            await asyncio.to_thread(wait_until_released, os.path.join(where, "go"))
            if point == "call" and once(where, "stop"):
                await asyncio.to_thread(stop_here, where, point)
        return ModelResponse(parts=[ToolCallPart("refund", {"order": name}, tool_call_id=f"call_{name}")])
    if name == "R0" and point == "answered" and once(where, "stop"):
        await asyncio.to_thread(stop_here, where, point)
    if name == "R1" and once(where, "row1"):
        await asyncio.to_thread(tell, os.path.join(where, "row1"), "1")
    return ModelResponse(parts=[TextPart(f"done: {returns[-1].content}")])


async def _stream(messages: list[ModelMessage], info: AgentInfo):  # type: ignore[no-untyped-def]
    part = (await _answer(messages, info)).parts[0]
    if isinstance(part, TextPart):
        yield part.content
    else:
        assert isinstance(part, ToolCallPart)
        yield {0: DeltaToolCall(part.tool_name, part.args_as_json_str(), tool_call_id=part.tool_call_id)}


def refunds() -> FunctionModel:
    return FunctionModel(_answer, stream_function=_stream, model_name="durable-rows")
