"""End to end with pydantic-ai: the output tool's schema and its retries on an
invalid answer."""

from __future__ import annotations

import datetime as dt
from typing import Any

from types_support import spec_of


def test_pydantic_ai_output_tool_round_trip() -> None:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    spec = spec_of("date", required=True)
    expected = {
        "type": "object",
        "title": "DateAnswer",
        "properties": {
            "response": {"type": "string", "format": "date", "description": "ISO 8601 date (YYYY-MM-DD)"}
        },
        "required": ["response"],
        "additionalProperties": False,
    }
    assert expected["properties"] == {"response": spec.answer_schema}

    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        tool = info.output_tools[0]
        assert tool.parameters_json_schema == expected
        return ModelResponse(parts=[ToolCallPart(tool.name, {"response": "2024-05-01"})])

    result = Agent(FunctionModel(fn), output_type=spec.output_type).run_sync("When?")
    answer = spec.to_value(result.output)
    assert answer == dt.date(2024, 5, 1)
    assert type(answer) is dt.date


def test_pydantic_ai_retries_invalid_answers() -> None:
    from pydantic_ai import Agent
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        RetryPromptPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def is_retry(part: Any) -> bool:
        # pydantic-ai 2.x reports a failed output validation as a ToolReturnPart with
        # outcome='retried' (RetryPromptPart is deprecated); older versions used RetryPromptPart.
        if isinstance(part, RetryPromptPart):
            return True
        return isinstance(part, ToolReturnPart) and getattr(part, "outcome", None) == "retried"

    spec = spec_of("int", min=0, max=130, required=True)
    seen: list[list[ModelMessage]] = []

    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        age = 200 if len(seen) == 1 else 42
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"response": age})])

    result = Agent(FunctionModel(fn), output_type=spec.output_type).run_sync("How old?")
    assert spec.to_value(result.output) == 42
    assert len(seen) == 2
    retries = [
        part
        for message in seen[1]
        if isinstance(message, ModelRequest)
        for part in message.parts
        if is_retry(part)
    ]
    assert retries and "less than or equal to 130" in str(retries[0].content)
