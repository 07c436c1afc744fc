"""(p) Provider batch: `complete_batch(…, provider_batch=…)` against the same job without it.

R rows x S slots through pydantic-ai's in-memory batch API (FunctionModel runs a batch's
requests when the batch is created), the model named `gpt-4o-mini` on `openai` so that
genai-prices prices every answer. Reported:

* requests per batch, and the batches made against the ideal S x ceil(R / max_requests);
* the projected cost: the batched job's answers at batch prices against the same job's
  answers without provider batching at list prices (same requests, same token counts);
* the CPU time of the batched job against the unbatched one (the batching's own cost on
  this machine; a real batch API adds minutes to hours of waiting, not CPU).
"""

from __future__ import annotations

import math
from typing import Any

from .common import Row, interleaved, median, ratio_of, secs, target_row

TEMPLATE = "First {{ n }} [[a]]\nSecond {{ n }} [[b]]\nThird {{ n }} [[c]]"
SLOTS = 3
COST_TARGET = 0.55  # genai-prices has gpt-4o-mini's batch price at half the list price
CPU_TARGET = 1.25


def _model() -> Any:
    from pydantic_ai.messages import ModelResponse, TextPart
    from pydantic_ai.models.function import FunctionModel

    def answer(messages: list[Any], info: Any) -> ModelResponse:
        return ModelResponse(parts=[TextPart("an answer of a few words")])

    model = FunctionModel(answer, model_name="gpt-4o-mini")
    model._system = "openai"
    return model


def _list_cost(results: list[Any]) -> float:
    from struckdown.batch.provider import batch_prices

    total = 0.0
    for result in results:
        for slot in result.results.values():
            prices = batch_prices(slot.messages[-1], provider="openai")
            assert prices is not None, "gpt-4o-mini has no price in genai-prices"
            total += prices[1]
    return total


async def run(quick: bool = False) -> list[Row]:
    from pydantic_ai.capabilities import BatchModelRequests

    import struckdown

    n, size = (100, 50) if quick else (500, 250)
    repeats = 2 if quick else 3
    contexts = [{"n": i} for i in range(n)]
    program = struckdown.parse(TEMPLATE)
    model = _model()
    outcome: dict[str, Any] = {}

    async def batched() -> None:
        job = struckdown.ProviderBatch(BatchModelRequests(max_requests=size, max_wait=None))
        outcome["batched"] = await struckdown.complete_batch_async(
            program, contexts, concurrency=n, model=model, provider_batch=job
        )
        outcome["counts"] = job.counts

    async def plain() -> None:
        outcome["plain"] = await struckdown.complete_batch_async(program, contexts, concurrency=n, model=model)

    cpu: dict[str, list[float]] = {}
    times = await interleaved({"batched": batched, "plain": plain}, repeats=repeats, warmup=0, cpu=cpu)
    counts = outcome["counts"]
    problem = ""
    failed = [r for r in (*outcome["batched"], *outcome["plain"]) if isinstance(r, BaseException)]
    if failed:
        problem = f"{len(failed)} rows failed: {failed[0]!r}"
    elif [r.to_dict() for r in outcome["batched"]] != [r.to_dict() for r in outcome["plain"]]:
        problem = "the batched job answered differently"
    ideal = SLOTS * math.ceil(n / size)
    list_cost = _list_cost(outcome["plain"])
    label = f"{n} rows x {SLOTS} slots, batch size {size}"
    cpu_ratio = ratio_of(median(cpu["batched"]), median(cpu["plain"]))
    return [
        target_row(
            f"p. provider batch: batches for {label}", f"{counts.submitted} batches",
            f"{ideal} = {SLOTS} x ceil({n}/{size})", ratio_of(counts.submitted, ideal), 1.0,
            problem=problem, note=f"{counts.requests_per_batch:.1f} requests per batch ({counts.requests} requests)",
        ),
        target_row(
            "p. provider batch: projected cost vs the same job without it", f"${counts.cost:.5f} at batch prices",
            f"${list_cost:.5f} at list prices", ratio_of(counts.cost, list_cost), COST_TARGET,
            problem=problem if counts.cost is not None else "no batch price", note="gpt-4o-mini on openai, genai-prices",
        ),
        target_row(
            "p. provider batch: CPU of the batched job vs unbatched", f"{median(cpu['batched']):.3f} s CPU",
            f"{median(cpu['plain']):.3f} s CPU unbatched", cpu_ratio, CPU_TARGET, problem=problem,
            note=f"median of {repeats}; wall {secs(median(times['batched']))} vs {secs(median(times['plain']))}",
        ),
    ]
