"""Scripted models for the CLI tests (no network).

`scripted(reply)` turns a plain function `reply(prompt, info) -> value` into a
pydantic-ai FunctionModel that streams text answers word by word and sends typed
answers (guard verdicts included) through the slot's output tool. `rows_held`
is the factory the kill/resume test names with `--model cli_models:rows_held`.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

Reply = Callable[[str, AgentInfo], Any]


def last_prompt(messages: list[ModelMessage]) -> str:
    """The text of the last user turn."""
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            for part in reversed(message.parts):
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    return part.content
    return ""


def tool_returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [
        part
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]


def answer(value: Any, info: AgentInfo) -> ModelResponse:
    """A final answer: through the output tool when the slot has one, else as text."""
    if info.output_tools:
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"response": value})])
    return ModelResponse(parts=[TextPart(value if isinstance(value, str) else json.dumps(value))])


def scripted(reply: Reply, name: str = "scripted") -> FunctionModel:
    """`reply(prompt, info)` returns the answer value, or a ModelResponse to send as is. `name`:
    its model name (another name is another model: a journaled re-run reuses none of its answers)."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        value = reply(last_prompt(messages), info)
        if callable(value):  # a reply that needs the whole conversation (tool loops)
            value = value(messages)
        return value if isinstance(value, ModelResponse) else answer(value, info)

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        response = respond(messages, info)
        for index, part in enumerate(response.parts):
            if isinstance(part, TextPart):
                for word in re.findall(r"\S+\s*", part.content):
                    yield word
            elif isinstance(part, ToolCallPart):
                yield {index: DeltaToolCall(part.tool_name, part.args_as_json_str(), tool_call_id=part.tool_call_id)}

    return FunctionModel(respond, stream_function=stream, model_name=name)


def calls_tool_once(tool: str, arguments: dict[str, Any], final: Callable[[str], Any]) -> Reply:
    """A reply that first calls `tool(**arguments)`, then answers `final(tool_output)`."""

    def reply(prompt: str, info: AgentInfo) -> Any:
        def step(messages: list[ModelMessage]) -> Any:
            returns = tool_returns(messages)
            if not returns:
                return ModelResponse(parts=[ToolCallPart(tool, arguments)])
            return final(str(returns[-1].content))

        return step

    return reply


def rows_held() -> FunctionModel:
    """For the batch kill/resume test: answers `Row N …` with `answer N` and appends N
    to the SD_TEST_CALLS file for every call. With SD_TEST_HOLD=N:FIFO the call for row
    N writes `held` into the FIFO (the test's gate: it reads it, so it knows row N is
    in flight) and then never answers; the test kills the process meanwhile."""
    calls_file = os.environ["SD_TEST_CALLS"]
    hold_row, _, hold_fifo = os.environ.get("SD_TEST_HOLD", "").partition(":")

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        match = re.search(r"Row (\d+)", last_prompt(messages))
        row = match.group(1) if match else "?"
        with open(calls_file, "a", encoding="utf-8") as handle:
            handle.write(row + "\n")
        if row == hold_row:
            with open(hold_fifo, "w", encoding="utf-8") as gate:  # blocks until the test opens it
                gate.write("held")
            await asyncio.Event().wait()  # never set: the process is killed while it waits
        return ModelResponse(parts=[TextPart(f"answer {row}")])

    return FunctionModel(respond, model_name="rows-held")


def guards_trip() -> FunctionModel:
    """Every guard trips ("scripted trip"); text slots echo their prompt (docs/cli.md uses it)."""

    def reply(prompt: str, info: AgentInfo) -> Any:
        if info.output_tools:
            return {"triggered": True, "reason": "scripted trip"}
        return f"echo: {prompt.strip()}"

    return scripted(reply)


def user_text(messages: list[ModelMessage]) -> str:
    """Every user turn of the conversation, joined."""
    return "\n".join(
        part.content
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart) and isinstance(part.content, str)
    )


def dask_rows() -> FunctionModel:
    """For the Dask tests, resolved on the workers by name (`cli_models:dask_rows`).

    Answers a conversation mentioning `Row N` with `answer N` (typed slots get the
    number N). Directives in the user turns, `name=value` (empty value: off):
    `log=PATH` appends `start N t pid` / `end N t pid` lines to PATH (one atomic
    write each) so a test can measure how many calls overlapped; `gate=DIR` holds
    the first call of row N until the test releases it (`process_gates.RowGates`: the
    call writes `N pid` into the FIFO DIR/started, then waits on the gate DIR/N);
    `flaky=DIR` raises an HTTP 429 on the first call for row N (marker file DIR/N);
    `fail=yes` raises ValueError. From the environment: SD_TEST_CALLS=PATH appends N for every call;
    SD_TEST_FAIL_ROWS=1,3 makes those rows raise ValueError.
    """
    import time

    from pydantic_ai.exceptions import ModelHTTPError

    def note(path: str, line: str) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        text = user_text(messages)
        match = re.search(r"Row (\d+)", text)
        row = int(match.group(1)) if match else -1
        options = dict(re.findall(r"\b(\w+)=(\S*)", text))
        if os.environ.get("SD_TEST_CALLS"):
            note(os.environ["SD_TEST_CALLS"], str(row))
        log = options.get("log")
        if log:
            note(log, f"start {row} {time.time():.6f} {os.getpid()}")
        try:
            gate = options.get("gate")
            if gate and not any(isinstance(m, ModelResponse) for m in messages):  # the row's first call
                from process_gates import wait_until_released

                note(os.path.join(gate, "started"), f"{row} {os.getpid()}")
                await asyncio.to_thread(wait_until_released, os.path.join(gate, str(row)))
            flaky = options.get("flaky")
            if flaky:
                marker = os.path.join(flaky, str(row))
                if not os.path.exists(marker):
                    open(marker, "w").close()
                    raise ModelHTTPError(429, "dask-rows", {"error": {"message": "slow down"}})
            failing = os.environ.get("SD_TEST_FAIL_ROWS", "")
            if options.get("fail") == "yes" or str(row) in failing.split(","):
                raise ValueError(f"row {row} is cursed")
            return answer(row if info.output_tools else f"answer {row}", info)
        finally:
            if log:
                note(log, f"end {row} {time.time():.6f} {os.getpid()}")

    return FunctionModel(respond, model_name="dask-rows")


def peak_overlap(lines: list[tuple[str, int, float, int]]) -> int:
    """Most `dask_rows` calls in flight at once, from their start and end lines (an end
    at the same instant as a start counts first)."""
    events = sorted((when, 0 if kind == "end" else 1) for kind, _, when, _ in lines)
    now = peak = 0
    for _, starts in events:
        now += 1 if starts else -1
        peak = max(peak, now)
    return peak


def refund_agent() -> FunctionModel:
    """examples/refund_agent.sd, scripted: the guard passes; `reply` looks order 5531 up and
    issues its refund in one response, then tells what the refund tool returned; `refunded`
    is whether that text says "refunded". With SD_TEST_CALLS=PATH, each request appends
    one line to PATH: `abusive`, `reply <tool returns seen>` or `refunded`."""

    def log(line: str) -> None:
        path = os.environ.get("SD_TEST_CALLS")
        if path:
            with open(path, "a", encoding="utf-8") as handle:
                handle.write(line + "\n")

    def reply(prompt: str, info: AgentInfo) -> Any:
        def step(messages: list[ModelMessage]) -> Any:
            if info.function_tools:
                returns = tool_returns(messages)
                log(f"reply {len(returns)}")
                if not returns:
                    return ModelResponse(parts=[
                        ToolCallPart("lookup_order", {"order_id": "5531"}, tool_call_id="call_lookup"),
                        ToolCallPart("issue_refund", {"order_id": "5531", "amount": 49.0}, tool_call_id="call_refund"),
                    ])
                refund = next(r for r in returns if r.tool_name == "issue_refund")
                return f"Order 5531: {refund.content}"
            if "abusive" in prompt:
                log("abusive")
                return {"triggered": False, "reason": "a polite request"}
            log("refunded")
            said = "\n".join(p.content for m in messages for p in m.parts if isinstance(p, TextPart))
            return "refunded " in said

        return step

    return scripted(reply)


def echo() -> FunctionModel:
    """Answers each slot with the prompt it was sent: whatever reached the model shows in the output."""
    return scripted(lambda prompt, info: f"echo: {prompt.strip()}")
