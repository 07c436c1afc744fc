"""Per-slot fixes, stock vs fixed vs bare pydantic-ai: `python -m bench.experiments.fixes [N]`.

Landed while this suite was written (so no longer toggled here): one Agent per output
type and plain `str` output for text slots without rules (951f82c); no guard-hook
capability when the template has no guards (b2914ed).

Still open, toggled per trial here:
Fix 2  `run/slot.py::_text_output`: the check for text *with* rules (pattern, lengths)
       is a sync function, so pydantic-ai runs it in a worker thread on every slot:
       make it `async def`.
Fix 4  `run/tools.py::ToolBox.build` (called from `run/engine.py::Run.__post_init__`):
       build the FunctionToolset once per tool list, not once per run.
Fix 5  `run/tools.py::SlotToolWrapper`: the same per-slot logic as a `WrapperToolset`
       (`call_tool`) instead of a run capability, which pydantic-ai dispatches on every
       hook of every step.
"""

from __future__ import annotations

import asyncio
import sys
import types
from dataclasses import dataclass
from typing import Any

import struckdown
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.output import TextOutput
from pydantic_ai.toolsets import WrapperToolset
from struckdown.run import slot as slotmod
from struckdown.run import tools as toolsmod

from .. import guards as guard_case
from .. import tools as tool_case
from ..batch import bare_batch
from ..common import interleaved, median, scripted_model
from ..overhead import bare_conversation, questions, template

ON = {"fixed": False}

_stock_text_output = slotmod._text_output
_text_outputs: dict[int, tuple[Any, Any]] = {}


def _text_output(spec: Any) -> Any:
    if not ON["fixed"] or not getattr(spec, "has_text_rules", True):
        return _stock_text_output(spec)
    if id(spec) not in _text_outputs:

        async def check(text: str) -> str:
            try:
                return spec.check_text(text)  # type: ignore[no-any-return]
            except ValueError as exc:
                raise ModelRetry(str(exc)) from None

        _text_outputs[id(spec)] = (spec, TextOutput(check))
    return _text_outputs[id(spec)][1]




_stock_build = toolsmod.ToolBox.build.__func__  # type: ignore[attr-defined]
_boxes: dict[tuple[Any, ...], Any] = {}


def _build(cls: Any, tools: Any) -> Any:
    if not ON["fixed"]:
        return _stock_build(cls, tools)
    key = tuple(tools)
    if key not in _boxes:
        _boxes[key] = _stock_build(cls, tools)
    return _boxes[key]


@dataclass
class _CachingToolset(WrapperToolset[Any]):
    """SlotToolWrapper's logic (events, single flight, guard join, errors) behind call_tool."""

    slot_wrapper: Any = None

    async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: Any, tool: Any) -> Any:
        inner = super().call_tool
        return await self.slot_wrapper.wrap_tool_execute(
            ctx,
            call=types.SimpleNamespace(tool_name=name),
            tool_def=tool.tool_def,
            args=tool_args,
            handler=lambda args: inner(name, args, ctx, tool),
        )


class _ToolsetInsteadOfCapability:
    def __init__(self, agent: Any) -> None:
        self.agent = agent

    async def run(self, *args: Any, capabilities: Any = (), toolsets: Any = None, **kwargs: Any) -> Any:
        wrappers = [c for c in capabilities or () if isinstance(c, toolsmod.SlotToolWrapper)]
        if ON["fixed"] and toolsets and wrappers:
            capabilities = [c for c in capabilities if c is not wrappers[0]]
            toolsets = [_CachingToolset(wrapped=toolsets[0], slot_wrapper=wrappers[0])]
        return await self.agent.run(*args, capabilities=capabilities, toolsets=toolsets, **kwargs)


_stock_agent_for = slotmod.agent_for


def install() -> None:
    slotmod._text_output = _text_output
    slotmod.agent_for = lambda *args, **kwargs: _ToolsetInsteadOfCapability(_stock_agent_for(*args, **kwargs))
    toolsmod.ToolBox.build = classmethod(_build)  # type: ignore[method-assign, assignment]


def toggled(fixed: bool, fn: Any) -> Any:
    async def run() -> Any:
        ON["fixed"] = fixed
        try:
            return await fn()
        finally:
            ON["fixed"] = False

    return run


async def compare(name: str, sd: Any, bare: Any, repeats: int, stat: Any = median, use_cpu: bool = True) -> None:
    """Median CPU time per trial by default (instant models: pure CPU); wall time for
    workloads that wait (`use_cpu=False`)."""
    cpu: dict[str, list[float]] = {}
    times = await interleaved(
        {"stock": toggled(False, sd), "fixed": toggled(True, sd), "bare": bare}, repeats=repeats, warmup=2, cpu=cpu
    )
    t = {k: stat(v) for k, v in (cpu if use_cpu else times).items()}
    print(
        f"{name:30s} stock {t['stock'] * 1000:8.1f} ms  fixed {t['fixed'] * 1000:8.1f} ms  bare {t['bare'] * 1000:8.1f} ms"
        f"   stock/bare {t['stock'] / t['bare']:.2f}x  fixed/bare {t['fixed'] / t['bare']:.2f}x"
    )


async def main(repeats: int) -> None:
    install()
    model = scripted_model()
    for kind, output_type in (("text", str), ("int", int)):
        program = struckdown.parse(template(kind))
        agent = Agent(scripted_model())
        prompts = questions(kind)
        await compare(
            f"a. 10 {kind} slots (CPU)",
            lambda: struckdown.complete_async(program, {}, model=model),
            lambda: bare_conversation(agent, prompts, output_type),
            repeats,
        )
    ruled = "\n".join(f"Question {i}: one word please. [[a{i}|max_length=40]]" for i in range(10))
    ruled_program = struckdown.parse(ruled)
    ruled_agent = Agent(scripted_model())
    ruled_prompts = [f"Question {i}: one word please." for i in range(10)]
    await compare(
        "a. 10 text slots, max_length (CPU)",
        lambda: struckdown.complete_async(ruled_program, {}, model=model),
        lambda: bare_conversation(ruled_agent, ruled_prompts, str),
        repeats,
    )
    program = struckdown.parse(tool_case.TEMPLATE)
    counter = tool_case.Lookup()
    loop_model, tools = tool_case.loop_model(), [counter.tool()]
    tool_agent = Agent(tool_case.loop_model(), tools=[tool_case.Lookup().tool()])
    await compare(
        "c. tool loop (CPU)",
        lambda: struckdown.complete_async(program, {}, model=loop_model, tools=tools),
        lambda: tool_agent.run("Look the word up, then answer."),
        repeats,
    )
    ON["fixed"] = True
    before = counter.executions
    await struckdown.complete_async(program, {}, model=tool_case.loop_model(parallel=True), tools=tools)
    ON["fixed"] = False
    print(f"{'':30s} fixed, 5 identical parallel calls: {counter.executions - before} execution(s)")
    contexts = [{"text": f"row {i}"} for i in range(200)]
    batch_program = struckdown.parse("Summarise {{ text }} [[summary]]")
    batch_agent = Agent(scripted_model())
    await compare(
        "d. batch 200 rows, 0 ms (CPU)",
        lambda: struckdown.complete_batch_async(batch_program, contexts, concurrency=50, model=model),
        lambda: bare_batch(batch_agent, contexts, 50),
        max(3, repeats // 4),
    )
    guard_model = scripted_model(latency=guard_case.LATENCY, typed=guard_case.VERDICT)
    guard_program = struckdown.parse(guard_case.TEMPLATE)
    guard_agent = Agent(scripted_model(latency=guard_case.LATENCY, typed=guard_case.VERDICT))
    verdict = guard_case.verdict_type()
    question = guard_case.CONTEXT["x"]

    async def bare_guard() -> None:
        await asyncio.gather(
            guard_agent.run(f"Judge: {question}", output_type=verdict), guard_agent.run(f"Answer: {question}")
        )

    await compare(
        "b. guard overlap (wall)",
        lambda: struckdown.complete_async(guard_program, guard_case.CONTEXT, model=guard_model),
        bare_guard,
        max(5, repeats // 2),
        use_cpu=False,
    )


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 20))
