"""The slot's two stacks are lists the code folds (run/wrappers MODEL_STACK, run/tools
TOOL_STACK): a slot's requests and tool calls go down the layers in the lists' order, and
changing a list changes the stack."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic_ai.models import Model
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.models.wrapper import WrapperModel
from scripted import Script, Tools

import struckdown as sd
from struckdown.run import tools as tool_stack
from struckdown.run.tools import TOOL_STACK, ToolCallRun, fold_tools, run_tool
from struckdown.run.wrappers import MODEL_STACK
from struckdown.run.wrappers.flow import FlowGuardModel
from struckdown.run.wrappers.cached import CachedModel
from struckdown.run.wrappers.metered import MeteredModel
from struckdown.run.wrappers.retries import RetryingModel


def _chain(model: Any) -> list[type]:
    """The classes of a model stack, outermost first."""
    kinds = [type(model)]
    while isinstance(model, WrapperModel):
        model = model.wrapped
        kinds.append(type(model))
    return kinds


class Recorder(WrapperModel):
    """A model layer that records the stack below it at each request."""

    below: list[list[type]] = []

    @classmethod
    def wrap(cls, model: Model, *, cached: bool) -> Model:
        return cls(model)

    async def request(self, *args: Any) -> Any:
        Recorder.below.append(_chain(self.wrapped))
        return await self.wrapped.request(*args)


def _run_with(layers: list[Any], **options: Any) -> list[list[type]]:
    """One slot run with MODEL_STACK as `layers` (a Recorder first): what the Recorder saw."""
    saved = list(MODEL_STACK)
    MODEL_STACK[:] = [Recorder, *layers]
    Recorder.below = []
    try:
        result = sd.complete("Say one word. [[a]]", model=Script(lambda call: "ok").model(), **options)
    finally:
        MODEL_STACK[:] = saved
    assert result["a"] == "ok"
    return Recorder.below


def test_a_slot_request_goes_down_the_model_stack_in_the_lists_order(tmp_path: Any) -> None:
    assert MODEL_STACK == [CachedModel, RetryingModel, FlowGuardModel, MeteredModel]
    assert _run_with(list(MODEL_STACK), cache=str(tmp_path)) == [
        [CachedModel, RetryingModel, FlowGuardModel, MeteredModel, FunctionModel]
    ]
    # without a cache the cache layer leaves itself out
    assert _run_with(list(MODEL_STACK), cache=False) == [[RetryingModel, FlowGuardModel, MeteredModel, FunctionModel]]


def test_reordering_the_list_reorders_the_model_stack(tmp_path: Any) -> None:
    swapped = [CachedModel, MeteredModel, RetryingModel]
    assert _run_with(swapped, cache=str(tmp_path)) == [[CachedModel, MeteredModel, RetryingModel, FunctionModel]]


def _partials(handler: Any) -> list[Any]:
    """The layers of a folded tool chain, outermost first, then the tool."""
    out = []
    while hasattr(handler, "keywords"):
        out.append(handler.func)
        handler = handler.keywords["inner"]
    return [*out, handler]


def test_the_tool_chain_is_the_tool_stack_folded() -> None:
    names = [layer.__name__ for layer in TOOL_STACK]
    assert names == ["approval", "budget", "single_flight", "effect_journal", "guard_join", "timeout"]
    assert _partials(tool_stack.TOOL_CHAIN) == [*TOOL_STACK, run_tool]


def test_fold_tools_puts_the_first_layer_outermost() -> None:
    seen: list[str] = []

    def layer(label: str) -> Any:
        async def run(call: Any, inner: Any) -> Any:
            seen.append(f"{label} in")
            outcome = await inner(call)
            seen.append(f"{label} out")
            return outcome

        return run

    async def tool(call: Any) -> Any:
        seen.append("tool")
        return ("done", True, None)

    chain = fold_tools([layer("a"), layer("b"), layer("c")], tool)
    assert asyncio.run(chain(None)) == ("done", True, None)
    assert seen == ["a in", "b in", "c in", "tool", "c out", "b out", "a out"]


def test_every_tool_call_of_an_agent_slot_goes_down_the_chain(monkeypatch: Any) -> None:
    calls: list[tuple[str, dict[str, Any]]] = []

    async def recording(call: ToolCallRun, inner: Any) -> Any:
        calls.append((call.name, dict(call.tool_args)))
        return await inner(call)

    monkeypatch.setattr(tool_stack, "TOOL_CHAIN", fold_tools([recording, *TOOL_STACK], run_tool))

    def lookup(city: str) -> str:
        """Look up the weather in a city."""
        return f"sunny in {city}"

    def answer(call: Any) -> Any:
        return Tools([("lookup", {"city": "Oslo"})]) if len(call.messages) == 1 else "sunny"

    result = sd.complete("Weather? [[w|use_tools=true]]", model=Script(answer).model(), tools=[lookup])
    assert result["w"] == "sunny"
    assert calls == [("lookup", {"city": "Oslo"})]
    assert [(c.tool_name, c.output) for c in result.results["w"].tool_calls] == [("lookup", "sunny in Oslo")]
