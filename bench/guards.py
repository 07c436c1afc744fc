"""(b) Guard overlap: a guard and the answer after it, each model call taking 100 ms.

A guard whose prompt uses no answer of its own segment runs beside the next model
call (SPEC §4), so the template should take one call's time, as two bare pydantic-ai
runs overlapped with `asyncio.gather` do.
"""

from __future__ import annotations

import asyncio
from typing import Any

from .common import Row, interleaved, median, ms, ratio_of, scripted_model, target_row

TARGET = 1.05
LATENCY = 0.100
TEMPLATE = "Judge: {{x}} [[halt:g]]\nAnswer: {{x}} [[a]]"
CONTEXT = {"x": "is the sky blue?"}
VERDICT = {"triggered": False, "reason": "harmless"}


def verdict_type() -> Any:
    from pydantic import BaseModel

    class Verdict(BaseModel):
        triggered: bool
        reason: str

    return Verdict


async def run(quick: bool = False) -> list[Row]:
    from pydantic_ai import Agent

    import struckdown

    repeats = 3 if quick else 9
    program = struckdown.parse(TEMPLATE)
    sd_model = scripted_model(latency=LATENCY, typed=VERDICT)
    agent = Agent(scripted_model(latency=LATENCY, typed=VERDICT))
    verdict = verdict_type()
    question = CONTEXT["x"]

    check = await struckdown.complete_async(program, CONTEXT, model=sd_model)
    problem = ""
    if check.halted or check["g"] != VERDICT or check["a"] != "ok":
        problem = f"unexpected result {dict(check)!r}"

    async def run_struckdown() -> None:
        await struckdown.complete_async(program, CONTEXT, model=sd_model)

    async def run_bare() -> None:
        await asyncio.gather(
            agent.run(f"Judge: {question}", output_type=verdict),
            agent.run(f"Answer: {question}"),
        )

    times = await interleaved({"struckdown": run_struckdown, "bare": run_bare}, repeats=repeats)
    sd, bare = median(times["struckdown"]), median(times["bare"])
    ratio = ratio_of(sd, bare)
    return [
        target_row(
            "b. guard overlap (2 calls x 100 ms)", ms(sd), f"{ms(bare)} bare gather", ratio, TARGET,
            problem=problem,
        ),
        Row(
            case="b. guard overlap vs max(guard, answer)",
            measured=ms(sd),
            floor=f"{ms(LATENCY)} ideal",
            ratio=ratio_of(sd, LATENCY),
            target=f"info (sequential: {2 * LATENCY / LATENCY:.2f}x)",
            passed=None,
        ),
    ]
