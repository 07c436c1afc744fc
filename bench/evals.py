"""(v) Eval: `sd.evaluate` over 200 cases x 2 repeats with an instant model (SPEC §23).

Against the same 400 rows through `complete_batch_async` (the core `sd batch` runs), at
the same concurrency: what the eval adds per run is reading the cases, checking each
answer against its expectations and building the report. CPU time, median of N.
"""

from __future__ import annotations

from typing import Any

from .common import Row, interleaved, median, ratio_of, scripted_model, secs, target_row

TARGET = 1.3
CONCURRENCY = 50
TEMPLATE = "Classify {{ text }} [[pick:label|spam,ham]]\n\nWhy? [[reason]]"


def cases(n: int) -> list[dict[str, Any]]:
    return [
        {"name": f"case {i}", "context": {"text": f"message {i}"},
         "expect": {"label": "ham", "reason": {"contains": "ok", "length": {"max": 200}}}}
        for i in range(n)
    ]


async def run(quick: bool = False) -> list[Row]:
    import struckdown
    from struckdown.eval import evaluate_async
    from struckdown.eval.runner import read_cases

    n, repeat = (50, 2) if quick else (200, 2)
    repeats = 3 if quick else 5
    program = struckdown.parse(TEMPLATE)
    model = scripted_model(text="ok", typed="ham")
    suite = read_cases(cases(n))
    contexts = [case.context for case in suite.cases for _ in range(repeat)]
    outcome: dict[str, Any] = {}

    async def run_eval() -> None:
        outcome["report"] = await evaluate_async(program, suite, model=model, repeat=repeat, concurrency=CONCURRENCY)

    async def run_batch() -> None:
        await struckdown.complete_batch_async(program, contexts, concurrency=CONCURRENCY, model=model, cache=False)

    cpu: dict[str, list[float]] = {}
    times = await interleaved({"eval": run_eval, "batch": run_batch}, repeats=repeats, warmup=1, cpu=cpu)
    report = outcome["report"]
    problem = "" if report.pass_rate == 1.0 and len(report.outcomes) == n * repeat else (
        f"pass rate {report.pass_rate} over {len(report.outcomes)} runs"
    )
    eval_cpu, batch_cpu = median(cpu["eval"]), median(cpu["batch"])
    return [target_row(
        f"v. eval {n} cases x {repeat} repeats, CPU", secs(eval_cpu), f"{secs(batch_cpu)} complete_batch",
        ratio_of(eval_cpu, batch_cpu), TARGET, problem=problem,
        note=f"median of {repeats}; wall {secs(median(times['eval']))} vs {secs(median(times['batch']))}",
    )]
