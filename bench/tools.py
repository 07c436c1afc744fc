"""(c) Tool loop: an agent slot whose model calls the same tool with the same arguments
five times, then answers.

SPEC §3: an identical call inside one slot runs once; later calls get the first
result (also within one parallel batch: single flight). The case counts tool body
executions and times the slot against the same loop driven by a bare pydantic-ai
agent (which runs the body every time).
"""

from __future__ import annotations

import asyncio
from typing import Any

from .common import Row, best, interleaved, median, ms, ratio_of, target_row

CALLS = 5
TARGET = 1.10
TOOL_LATENCY = 0.020
TEMPLATE = "Look the word up, then answer. [[answer|use_tools=true, max_iter=10]]"


class Lookup:
    """A tool that counts how often its body runs."""

    def __init__(self, latency: float = 0.0) -> None:
        self.latency = latency
        self.executions = 0

    def tool(self) -> Any:
        async def lookup(word: str) -> str:
            """Look a word up in the dictionary."""
            self.executions += 1
            if self.latency:
                await asyncio.sleep(self.latency)
            return f"{word}: a small domesticated feline"

        return lookup


def loop_model(*, parallel: bool = False) -> Any:
    """Calls `lookup(word="cat")` CALLS times (one per response, or all in one
    response when `parallel`), then answers with text."""
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    async def function(messages: list[Any], info: AgentInfo) -> ModelResponse:
        returned = sum(
            isinstance(p, ToolReturnPart) for m in messages if isinstance(m, ModelRequest) for p in m.parts
        )
        if returned >= CALLS or not info.function_tools:
            return ModelResponse(parts=[TextPart("a cat is a small feline")])
        name = info.function_tools[0].name
        count = CALLS if parallel else 1
        return ModelResponse(parts=[ToolCallPart(name, {"word": "cat"}) for _ in range(count)])

    return FunctionModel(function=function)


async def _executions(parallel: bool) -> tuple[int, str]:
    """Tool body executions of one struckdown run, and a problem description if any."""
    import struckdown

    counter = Lookup()
    result = await struckdown.complete_async(
        TEMPLATE, {}, model=loop_model(parallel=parallel), tools=[counter.tool()]
    )
    calls = result.results["answer"].tool_calls
    problem = ""
    if result["answer"] != "a cat is a small feline":
        problem = f"unexpected answer {result['answer']!r}"
    elif len(calls) != CALLS or sum(c.was_cached for c in calls) != CALLS - counter.executions:
        problem = f"{len(calls)} tool calls reported, {sum(c.was_cached for c in calls)} cached"
    return counter.executions, problem


async def _times(
    latency: float, repeats: int, cpu: dict[str, list[float]] | None = None
) -> tuple[list[float], list[float], int]:
    from pydantic_ai import Agent

    import struckdown

    program = struckdown.parse(TEMPLATE)
    sd_tool, bare_tool = Lookup(latency), Lookup(latency)
    sd_model, bare_model = loop_model(), loop_model()
    agent = Agent(bare_model, tools=[bare_tool.tool()])
    sd_tools = [sd_tool.tool()]

    async def run_struckdown() -> None:
        await struckdown.complete_async(program, {}, model=sd_model, tools=sd_tools)

    async def run_bare() -> None:
        await agent.run("Look the word up, then answer.")

    times = await interleaved({"struckdown": run_struckdown, "bare": run_bare}, repeats=repeats, warmup=2, cpu=cpu)
    runs = repeats + 2
    return times["struckdown"], times["bare"], bare_tool.executions // runs


async def run(quick: bool = False) -> list[Row]:
    repeats = 6 if quick else 40
    sequential, seq_problem = await _executions(parallel=False)
    parallel, par_problem = await _executions(parallel=True)
    cpu: dict[str, list[float]] = {}
    sd_times, bare_times, bare_execs = await _times(0.0, repeats, cpu)
    sd_slow, bare_slow, _ = await _times(TOOL_LATENCY, max(3, repeats // 4))
    sd, bare = median(cpu["struckdown"]), median(cpu["bare"])
    ratio = ratio_of(sd, bare)
    return [
        target_row(
            f"c. tool loop ({CALLS} identical calls, instant tool)",
            f"{ms(sd)} CPU",
            f"{ms(bare)} bare pydantic-ai",
            ratio,
            TARGET,
            note=(
                f"CPU medians of {repeats} (instant model and tool: pure CPU); best wall "
                f"{ms(best(sd_times))} vs {ms(best(bare_times))} ({best(sd_times) / best(bare_times):.2f}x)"
            ),
        ),
        Row(
            case=f"c. tool loop wall, tool takes {TOOL_LATENCY * 1000:.0f} ms",
            measured=ms(median(sd_slow)),
            floor=f"{ms(median(bare_slow))} bare pydantic-ai",
            ratio=ratio_of(median(sd_slow), median(bare_slow)),
            target="info (bare runs the body 5x)",
            passed=None,
        ),
        Row(
            case=f"c. tool body executions, {CALLS} sequential identical calls",
            measured=str(sequential),
            floor=f"1 (bare: {bare_execs})",
            ratio=float(sequential),
            target="== 1",
            passed=sequential == 1 and not seq_problem,
            note=seq_problem,
        ),
        Row(
            case=f"c. tool body executions, {CALLS} identical calls in one batch",
            measured=str(parallel),
            floor="1",
            ratio=float(parallel),
            target="== 1",
            passed=parallel == 1 and not par_problem,
            note=par_problem,
        ),
    ]
