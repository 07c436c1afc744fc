"""(j) Durable runs: what the effect journal costs (SPEC §25, issue 35).

A batch of rows, each an agent slot that calls a write tool once and then answers, run with
`journal=` (every call journaled as started and done, every slot's answer under its request key
for re-runs) and without, interleaved, CPU time per
row. Target: journaling costs at most 1.10× the CPU of the same rows without it.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from .common import Row, best, interleaved, ratio_of, target_row

TARGET = 1.10
TEMPLATE = "Refund order {{ n }}. [[reply|use_tools=true, max_iter=3]]"


def _model() -> Any:
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel

    def reply(messages: list[Any], info: Any) -> ModelResponse:
        if not any(isinstance(p, ToolReturnPart) for m in messages for p in m.parts):
            return ModelResponse(parts=[ToolCallPart("refund", {"order": "R7"})])
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(reply)


def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


async def run(quick: bool) -> list[Row]:
    import struckdown

    rows = [{"n": i} for i in range(100 if quick else 400)]
    folder = Path(tempfile.mkdtemp(prefix="sd-bench-journal-"))
    runs = [0]
    problems: list[str] = []

    async def batch(journal: bool) -> None:
        runs[0] += 1
        path = folder / f"{runs[0]}.jsonl" if journal else None  # a fresh journal: every call runs
        results = await struckdown.complete_batch_async(
            TEMPLATE, rows, model=_model(), tools=[refund], concurrency=20, journal=path
        )
        if any(not isinstance(r, struckdown.Result) or r["reply"] != "done" for r in results):
            problems.append("a row did not answer 'done'")
        if path is not None and sum(1 for _ in path.open()) != 1 + 3 * len(rows):
            problems.append("the journal does not hold a started, a done and an answer line per row")

    cpu: dict[str, list[float]] = {}
    await interleaved({"plain": lambda: batch(False), "journal": lambda: batch(True)},
                      repeats=3 if quick else 7, cpu=cpu)
    plain, journaled = best(cpu["plain"]) / len(rows), best(cpu["journal"]) / len(rows)
    return [target_row(
        "j. effect journal (CPU per row, one write tool call)", f"{journaled * 1000:.2f} ms CPU",
        f"{plain * 1000:.2f} ms without a journal", ratio_of(journaled, plain), TARGET,
        problem="; ".join(sorted(set(problems))),
    )]
