"""Typed answers that stream (SPEC §26): the first `SlotPartial` of a record slot vs bare
pydantic-ai's first `stream_output()` item on the same scripted stream (target <= 1.1x).

The model streams the answer's tool-call arguments in pieces after `LATENCY`; both sides
ask for the same output type (struckdown's own record answer), and bare pydantic-ai
streams without debouncing (`debounce_by=None`), its fastest first item.

The ratio is taken on the median process CPU time from the call to the first item (the
model's wait is no CPU), interleaved, as case a does: wall times to the first item moved
1.05-1.16x between runs of the same tree on the shared machine. Before each trial the
previous one is settled: both runs stop early, and a stopped run's async generators are
closed by the event loop after the run returned (pydantic-ai's stream guard, finalized),
so without `settle()` that clean-up landed in the next trial's window.
"""

from __future__ import annotations

import asyncio
import gc
import time
from typing import Any

from .common import Row, median, ms, target_row

LATENCY = 0.020  # seconds before the model's first piece
TARGET = 1.10
PIECES = ('{"response": {"name": "Ad', 'a", "born": 18', '15, "field": "math', 'ematics"}}')


def streaming_model() -> Any:
    from pydantic_ai.models.function import DeltaToolCall, FunctionModel

    async def stream(messages: list[Any], info: Any) -> Any:
        await asyncio.sleep(LATENCY)
        name = info.output_tools[0].name
        for i, piece in enumerate(PIECES):
            yield {0: DeltaToolCall(name if i == 0 else None, piece)}

    async def whole(messages: list[Any], info: Any) -> Any:
        raise AssertionError("the benchmark streams")

    return FunctionModel(whole, stream_function=stream)


async def run(quick: bool = False) -> list[Row]:
    from pydantic_ai import Agent

    import struckdown
    from struckdown.incremental import SlotPartial

    trials = 30 if quick else 100
    program = struckdown.parse("Who was she? [[record:who]]")
    (plan,) = program.plans.values()
    output_type = plan.spec.output_type  # the same answer type on both sides
    sd_model, agent = streaming_model(), Agent(streaming_model(), output_type=output_type)
    cpu: dict[str, list[float]] = {"struckdown": [], "bare": []}
    wall: dict[str, list[float]] = {"struckdown": [], "bare": []}
    seen: dict[str, Any] = {}

    def first(name: str, cpu_started: float, started: float, value: Any) -> None:
        cpu[name].append(time.process_time() - cpu_started)
        wall[name].append(time.perf_counter() - started)
        seen[name] = value

    async def run_struckdown() -> None:
        cpu_started, started = time.process_time(), time.perf_counter()
        events = struckdown.complete_incremental_async(program, {}, model=sd_model)
        async for event in events:
            if isinstance(event, SlotPartial):
                first("struckdown", cpu_started, started, event.value)
                break
        await events.aclose()

    async def run_bare() -> None:
        cpu_started, started = time.process_time(), time.perf_counter()
        async with agent.run_stream("Who was she?") as result:
            async for output in result.stream_output(debounce_by=None):
                first("bare", cpu_started, started, output.response)
                break

    contenders = {"struckdown": run_struckdown, "bare": run_bare}
    for _ in range(3):  # warm-up
        for run_one in contenders.values():
            await run_one()
            await settle()
    for values in (*cpu.values(), *wall.values()):
        values.clear()
    for round_ in range(trials):
        for name in list(contenders) if round_ % 2 == 0 else list(contenders)[::-1]:
            await settle()
            await contenders[name]()
    sd_first, bare_first = median(cpu["struckdown"]), median(cpu["bare"])
    sd_wall, bare_wall = median(wall["struckdown"]), median(wall["bare"])
    problem = "" if seen["struckdown"] == seen["bare"] else f"first values differ: {seen['struckdown']!r} vs {seen['bare']!r}"
    return [
        target_row(
            "s. first SlotPartial, record slot", f"{ms(sd_first)} CPU", f"{ms(bare_first)} bare stream_output",
            sd_first / bare_first, TARGET, problem=problem,
            note=f"CPU medians of {trials}; the model's first piece comes after {LATENCY * 1000:.0f} ms; "
            f"wall medians {ms(sd_wall)} vs {ms(bare_wall)} ({sd_wall / bare_wall:.2f}x); "
            f"first value {seen['struckdown']!r}",
        )  # fmt: skip
    ]


async def settle() -> None:
    """Let the last trial's leftovers run before the next trial's clock starts: the async
    generators a stopped run left open are closed by the loop (a task each) after it returned."""
    gc.collect()  # an unreachable generator is finalized now, its aclose() scheduled
    me = asyncio.current_task()
    for _ in range(1000):
        await asyncio.sleep(0)
        if all(task is me for task in asyncio.all_tasks()):
            break
