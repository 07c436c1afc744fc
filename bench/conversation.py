"""(l) A long conversation: many slots in one segment through struckdown vs the same
conversation through bare pydantic-ai runs, at two lengths.

Every request carries the whole conversation before it, so for any client the work of
N slots grows as N² (pydantic-ai prepares and checks the history on each request; a
provider reads it). What struckdown may not do is add to that: its own share per slot
must stay flat (it builds two turns per slot and hands pydantic-ai the same message
objects each time, `tests/run/test_long_conversation.py`). The case reports the CPU
ratio to bare pydantic-ai at each length (target ≤ 1.10 at both) and how each side
grows from the short to the long conversation.
"""

from __future__ import annotations

from .common import Row, interleaved, median, ratio_of, scripted_model, secs, target_row
from .overhead import bare_conversation

TARGET = 1.10


def _prompts(n: int) -> list[str]:
    return [f"Question {i}: describe item {i} in one word." for i in range(n)]


async def _measure(n: int, repeats: int) -> tuple[float, float]:
    from pydantic_ai import Agent

    import struckdown

    prompts = _prompts(n)
    program = struckdown.parse("\n".join(f"{q} [[a{i}]]" for i, q in enumerate(prompts)))
    sd_model, agent = scripted_model(), Agent(scripted_model())

    async def run_struckdown() -> None:
        await struckdown.complete_async(program, {}, model=sd_model, cache=False)

    async def run_bare() -> None:
        await bare_conversation(agent, prompts, str)

    cpu: dict[str, list[float]] = {}
    await interleaved({"struckdown": run_struckdown, "bare": run_bare}, repeats=repeats, warmup=1, cpu=cpu)
    return median(cpu["struckdown"]), median(cpu["bare"])


async def run(quick: bool = False) -> list[Row]:
    short, long = (20, 60) if quick else (50, 200)
    sd_short, bare_short = await _measure(short, 4 if quick else 15)
    sd_long, bare_long = await _measure(long, 2 if quick else 5)
    grows = f"from {short} to {long} slots: struckdown ×{sd_long / sd_short:.1f}, bare ×{bare_long / bare_short:.1f}"
    return [
        target_row(f"l. long conversation, {short} slots", f"{secs(sd_short)} CPU", f"{secs(bare_short)} bare pydantic-ai",
                   ratio_of(sd_short, bare_short), TARGET),
        target_row(f"l. long conversation, {long} slots", f"{secs(sd_long)} CPU", f"{secs(bare_long)} bare pydantic-ai",
                   ratio_of(sd_long, bare_long), TARGET, note=grows),
    ]  # fmt: skip
