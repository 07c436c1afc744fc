"""Typed answers that stream (SPEC §26): the first `SlotPartial` of a record slot vs bare
pydantic-ai's first `stream_output()` item on the same scripted stream (target <= 1.1x).

The model streams the answer's tool-call arguments in pieces after `LATENCY`; both sides
ask for the same output type (struckdown's own record answer), and bare pydantic-ai
streams without debouncing (`debounce_by=None`), its fastest first item.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from .common import Row, interleaved, median, ms, target_row

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
    firsts: dict[str, list[float]] = {"struckdown": [], "bare": []}
    seen: dict[str, Any] = {}

    async def run_struckdown() -> None:
        started = time.perf_counter()
        events = struckdown.complete_incremental_async(program, {}, model=sd_model)
        async for event in events:
            if isinstance(event, SlotPartial):
                firsts["struckdown"].append(time.perf_counter() - started)
                seen["struckdown"] = event.value
                break
        await events.aclose()

    async def run_bare() -> None:
        started = time.perf_counter()
        async with agent.run_stream("Who was she?") as result:
            async for output in result.stream_output(debounce_by=None):
                firsts["bare"].append(time.perf_counter() - started)
                seen["bare"] = output.response
                break

    await interleaved({"struckdown": run_struckdown, "bare": run_bare}, repeats=trials, warmup=3)
    sd_first, bare_first = median(firsts["struckdown"]), median(firsts["bare"])
    problem = "" if seen["struckdown"] == seen["bare"] else f"first values differ: {seen['struckdown']!r} vs {seen['bare']!r}"
    return [
        target_row(
            "s. first SlotPartial, record slot", ms(sd_first), f"{ms(bare_first)} bare stream_output",
            sd_first / bare_first, TARGET, problem=problem,
            note=f"median of {trials}; the model's first piece comes after {LATENCY * 1000:.0f} ms; "
            f"struckdown adds {1000 * (sd_first - bare_first):.2f} ms; first value {seen['struckdown']!r}",
        )  # fmt: skip
    ]
