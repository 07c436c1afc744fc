"""A model factory importable by name (`mcp_models:lookup_model`), for Dask workers."""

from __future__ import annotations

from typing import Any

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


def clean_up_agent(first: Any) -> Any:
    """A `Script` answer for the approval tests: the tool slot's first request is `first`
    (a `scripted.Tools`), then `done: <the tool returns>`; other slots `ok: <their question>`."""

    def answer(call: Any) -> Any:
        if not call.tool_names:
            return "ok: " + call.last_user.splitlines()[-1]
        if not [text for role, text in call.turns if role == "call"]:
            return first
        return "done: " + " | ".join(text for role, text in call.turns if role == "return")

    return answer


def look_and_erase_model() -> FunctionModel:
    """`--model mcp_models:look_and_erase_model`: looks owl up and erases it (notes server)."""
    from scripted import Script, Tools

    return Script(clean_up_agent(Tools([("notes_lookup", {"word": "owl"}), ("notes_erase", {"name": "owl"})]))).model()
