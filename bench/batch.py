"""(d) Batch: one single-slot template over many rows, 50 ms per model call.

struckdown's `complete_batch_async` against the same rows run by bare pydantic-ai at
the same concurrency (an asyncio semaphore), and against the ideal
rows x latency / concurrency. The model echoes its prompt, so the case also checks
that results come back in input order.

At these settings the batch is CPU-bound (bare pydantic-ai needs ~2.5 ms of CPU per
run, so one core completes ~400 runs/s, well under the 1,000/s the latency allows), so
its wall time tracks the CPU the machine gives us. The ratio uses the median of N
wall times; the best wall times and the CPU-time ratio (steadier on a shared machine)
are in the note.
"""

from __future__ import annotations

import asyncio
from typing import Any

from .common import Row, best, interleaved, last_user_prompt, median, ratio_of, scripted_model, secs, target_row

TARGET = 1.15
LATENCY = 0.050
CONCURRENCY = 50
TEMPLATE = "Summarise {{ text }} [[summary]]"


def rows(n: int) -> list[dict[str, str]]:
    return [{"text": f"row {i}"} for i in range(n)]


def echo_model() -> Any:
    return scripted_model(latency=LATENCY, text=lambda messages: f"summary of {last_user_prompt(messages)}")


async def bare_batch(agent: Any, contexts: list[dict[str, str]], concurrency: int) -> list[Any]:
    semaphore = asyncio.Semaphore(concurrency)

    async def one(context: dict[str, str]) -> Any:
        async with semaphore:
            return (await agent.run(f"Summarise {context['text']}")).output

    return await asyncio.gather(*(one(c) for c in contexts))


def _order_problem(results: list[Any], n: int) -> str:
    for i, result in enumerate(results):
        if isinstance(result, BaseException):
            return f"row {i} failed: {type(result).__name__}: {result}"
        if result["summary"] != f"summary of Summarise row {i}":
            return f"row {i} out of order: {result['summary']!r}"
    return "" if len(results) == n else f"{len(results)} results for {n} rows"


async def run(quick: bool = False) -> list[Row]:
    from pydantic_ai import Agent

    import struckdown

    n = 100 if quick else 1000
    repeats = 2 if quick else 5
    contexts = rows(n)
    program = struckdown.parse(TEMPLATE)
    sd_model = echo_model()
    agent = Agent(echo_model())
    outcome: dict[str, list[Any]] = {}

    async def run_struckdown() -> None:
        outcome["results"] = await struckdown.complete_batch_async(
            program, contexts, concurrency=CONCURRENCY, model=sd_model
        )

    async def run_bare() -> None:
        await bare_batch(agent, contexts, CONCURRENCY)

    cpu: dict[str, list[float]] = {}
    times = await interleaved({"struckdown": run_struckdown, "bare": run_bare}, repeats=repeats, warmup=0, cpu=cpu)
    problem = _order_problem(outcome["results"], n)
    sd, bare = median(times["struckdown"]), median(times["bare"])
    cpu_ratio = median(cpu["struckdown"]) / median(cpu["bare"])
    detail = (
        f"median of {repeats}; best wall {secs(best(times['struckdown']))} vs {secs(best(times['bare']))}; "
        f"CPU {cpu_ratio:.2f}x"
    )
    ideal = n * LATENCY / CONCURRENCY
    ratio = ratio_of(sd, bare)
    label = f"{n} rows x {LATENCY * 1000:.0f} ms, concurrency {CONCURRENCY}"
    return [
        target_row(
            f"d. batch {label}", secs(sd), f"{secs(bare)} bare pydantic-ai", ratio, TARGET,
            problem=problem, note=detail,
        ),
        Row(
            case="d. batch vs ideal rows x latency / concurrency",
            measured=secs(sd),
            floor=f"{secs(ideal)} ideal",
            ratio=ratio_of(sd, ideal),
            target=f"info (bare: {bare / ideal:.2f}x)",
            passed=None,
        ),
    ]
