"""(g) Memory: peak RSS of a 10,000-row batch vs a 1,000-row batch (instant model).

Each size runs in a fresh subprocess (`python -m bench.memory --child N`) that
reports its peak RSS after the batch, its peak before the batch (after imports and a
warm-up run) and the deep size of the returned results list. Peak memory should not
grow with the number of rows beyond what the returned results themselves hold.

Peak RSS is the kernel's high-water mark of the child's own address space (`VmHWM`
in /proc/self/status). `getrusage(RUSAGE_SELF).ru_maxrss` is reported too, but it is
not usable here: Linux keeps the maximum across exec, and the child starts as a
(v)fork of the benchmark runner, so its ru_maxrss is never below the runner's RSS
at spawn time (~100 MiB after the other cases), which hides the batch entirely.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import resource
import subprocess
import sys
import types
from typing import Any

from .common import Row

TARGET = 1.20
CONCURRENCY = 50
TEMPLATE = "Classify the ticket: {{ text }} [[label]]"


def deep_size(root: Any) -> int:
    """Bytes reachable from `root`, each object counted once; classes, modules and
    functions (shared program structure, not per-row data) are not followed."""
    skip = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType)
    seen: set[int] = set()
    stack = [root]
    total = 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, skip):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        stack.extend(gc.get_referents(obj))
    return total


def _status_kib(field: str) -> int:
    """A memory field of /proc/self/status (VmHWM = peak RSS, VmRSS = current), in KiB;
    falls back to ru_maxrss where /proc is missing."""
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


async def _child(n: int) -> dict[str, Any]:
    import struckdown

    from .common import scripted_model

    model = scripted_model()
    program = struckdown.parse(TEMPLATE)
    await struckdown.complete_batch_async(program, [{"text": "warm-up"}] * 20, concurrency=CONCURRENCY, model=model)
    gc.collect()
    before = _status_kib("VmHWM")
    contexts = ({"text": f"ticket {i}: my parcel is late"} for i in range(n))
    results = await struckdown.complete_batch_async(program, contexts, concurrency=CONCURRENCY, model=model)
    peak = _status_kib("VmHWM")
    failed = sum(isinstance(r, BaseException) for r in results)
    return {
        "rows": n,
        "before_kib": before,
        "peak_kib": peak,
        "ru_maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "current_kib": _status_kib("VmRSS"),
        "results_kib": deep_size(results) // 1024,
        "failed": failed,
    }


def measure(*sizes: int) -> list[dict[str, Any]]:
    """Run one child per size, side by side (memory, not time, is measured here)."""
    children = [
        subprocess.Popen(
            [sys.executable, "-m", "bench.memory", "--child", str(n)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for n in sizes
    ]
    reports = []
    for n, child in zip(sizes, children):
        out, err = child.communicate(timeout=900)
        if child.returncode != 0:
            raise RuntimeError(f"memory child ({n} rows) failed:\n{err[-2000:]}")
        reports.append(json.loads(out.strip().splitlines()[-1]))
    return reports


def mib(kib: float) -> str:
    return f"{kib / 1024:.1f} MiB"


async def run(quick: bool = False) -> list[Row]:
    small_n, big_n = (50, 500) if quick else (1000, 10000)
    small, big = measure(small_n, big_n)
    ratio = big["peak_kib"] / small["peak_kib"]
    # Without the returned results: what the batch needed while running.
    working_small = small["peak_kib"] - small["results_kib"]
    working_big = big["peak_kib"] - big["results_kib"]
    working_ratio = working_big / working_small
    per_row = (big["results_kib"] - small["results_kib"]) * 1024 / (big_n - small_n)
    problem = ""
    if small["failed"] or big["failed"]:
        problem = f"failed rows: {small['failed']} and {big['failed']}"
    flat = ratio <= TARGET or working_ratio <= TARGET
    return [
        Row(
            case=f"g. peak RSS, {big_n:,} rows vs {small_n:,} rows",
            measured=mib(big["peak_kib"]),
            floor=f"{mib(small['peak_kib'])} ({small_n:,} rows)",
            ratio=ratio,
            target=f"<= {TARGET:.2f}x or explained by results",
            passed=flat and not problem,
            note=problem,
        ),
        Row(
            case="g. peak RSS minus returned results",
            measured=mib(working_big),
            floor=mib(working_small),
            ratio=working_ratio,
            target=f"<= {TARGET:.2f}x",
            passed=working_ratio <= TARGET,
            note=(
                f"results list holds {mib(big['results_kib'])} for {big_n:,} rows "
                f"({per_row / 1024:.1f} KiB/row); peak grew by {mib(small['peak_kib'] - small['before_kib'])} / "
                f"{mib(big['peak_kib'] - big['before_kib'])} during the batch (from {mib(small['before_kib'])} / "
                f"{mib(big['before_kib'])}); ru_maxrss {mib(small['ru_maxrss_kib'])} / {mib(big['ru_maxrss_kib'])}"
            ),
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--child", type=int, required=True, help="rows to run in this process")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(_child(args.child))))


if __name__ == "__main__":
    main()
