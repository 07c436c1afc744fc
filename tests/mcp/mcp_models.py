"""A model factory importable by name (`mcp_models:lookup_model`), for Dask workers."""

from __future__ import annotations

from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel


def lookup_model() -> FunctionModel:
    """Calls the first `*_lookup` tool with the prompt's last word, then answers with its return."""

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        if returns:
            return ModelResponse(parts=[TextPart(f"got {returns[-1].content}")])
        prompt = str(messages[-1].parts[-1].content)  # type: ignore[union-attr]
        tool = next(t.name for t in info.function_tools if t.name.endswith("_lookup"))
        return ModelResponse(parts=[ToolCallPart(tool, {"word": prompt.split()[-1]})])

    return FunctionModel(reply)
