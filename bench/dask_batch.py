"""Batch on Dask vs batch in this process: `python -m bench.dask_batch [--rows N] [--concurrency C …]`.

The same single-slot template over N rows (default 1,000) whose scripted model answers
after 50 ms, run by `complete_batch_async` on this process's event loop and on a local
Dask cluster (two worker processes, `DaskExecutor`), at the same concurrency: the local
batch runs `concurrency` rows at once, the cluster caps rows in flight at the same
number (`max_in_flight`) with `concurrency / 2` task slots per worker. Reports wall
times, rows per second and the Dask/local ratio against the ideal rows x latency /
concurrency. The cluster's start (and the workers' first import of struckdown) is
timed apart from the warm batch.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from .common import last_user_prompt, scripted_model

TEMPLATE = "Summarise {{ text }} [[summary]]"
LATENCY = 0.050


def latency_model() -> Any:
    """Built on each worker by name (`bench.dask_batch:latency_model`)."""
    return scripted_model(latency=LATENCY, text=lambda messages: f"summary of {last_user_prompt(messages)}")


def rows(n: int) -> list[dict[str, str]]:
    return [{"text": f"row {i}"} for i in range(n)]


def check(results: list[Any], n: int) -> None:
    expected = [f"summary of Summarise row {i}" for i in range(n)]
    got = [r if isinstance(r, BaseException) else r["summary"] for r in results]
    if got != expected:
        bad = next(i for i, (a, b) in enumerate(zip(got, expected)) if a != b)
        raise SystemExit(f"row {bad} came back wrong or out of order: {got[bad]!r}")


async def local(contexts: list[dict[str, str]], concurrency: int) -> float:
    from struckdown import complete_batch_async

    model = latency_model()
    started = time.perf_counter()
    results = await complete_batch_async(TEMPLATE, contexts, concurrency=concurrency, model=model)
    elapsed = time.perf_counter() - started
    check(results, len(contexts))
    return elapsed


async def on_dask(executor: Any, contexts: list[dict[str, str]], concurrency: int) -> float:
    from struckdown import complete_batch_async

    started = time.perf_counter()
    results = await complete_batch_async(
        TEMPLATE, contexts, concurrency=2 * concurrency, executor=executor,
        model_factory="bench.dask_batch:latency_model",
    )  # fmt: skip
    elapsed = time.perf_counter() - started
    check(results, len(contexts))
    return elapsed


async def main(n: int, concurrencies: list[int], repeats: int) -> None:
    from struckdown.distributed import DaskExecutor

    contexts = rows(n)
    table: list[tuple[str, ...]] = []
    for concurrency in concurrencies:
        ideal = n * LATENCY / concurrency
        await local(rows(20), concurrency)  # warm: imports, parse cache
        local_s = min([await local(contexts, concurrency) for _ in range(repeats)])
        started = time.perf_counter()
        executor = DaskExecutor(max_in_flight=concurrency, n_workers=2)
        async with executor:
            up = time.perf_counter() - started
            await executor.probe(model_factory="bench.dask_batch:latency_model")
            first = await on_dask(executor, rows(20), concurrency)
            cold = time.perf_counter() - started
            dask_s = min([await on_dask(executor, contexts, concurrency) for _ in range(repeats)])
        table.append((
            str(concurrency), f"{ideal:.2f} s", f"{local_s:.2f} s", f"{dask_s:.2f} s", f"{n / local_s:.0f}",
            f"{n / dask_s:.0f}", f"{dask_s / local_s:.2f}x", f"{up:.1f} s / {cold:.1f} s ({first:.2f} s)",
        ))  # fmt: skip
    headers = (
        "concurrency", "ideal", "local", "dask (warm)", "local rows/s", "dask rows/s", "dask/local",
        "cluster up / ready (first 20 rows)",
    )  # fmt: skip
    widths = [max(len(h), *(len(r[i]) for r in table)) for i, h in enumerate(headers)]
    print(f"batch: {n} rows x {LATENCY * 1000:.0f} ms scripted latency, best of {repeats}; Dask: 2 local workers")
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths)))
    for row in table:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[8, 50])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    asyncio.run(main(args.rows, args.concurrency, args.repeats))
