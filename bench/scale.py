"""(h) Scale (SPEC §20, issue 22): `sd batch` as a user runs it, with an instant model.

- peak RSS of `sd batch` over 100,000 rows vs 1,000 rows (target <= 1.3x);
- rows per second over 100,000 rows vs 1,000 rows (target >= 0.95x);
- rows per second of `--workers 2` vs one process (target >= 1.7x on 2 cores);
- time to first token of a streamed slot vs bare pydantic-ai streaming (<= 1.05x).

Every `sd batch` is a fresh subprocess (`python -m bench.scale --child REPORT -- ARGS`)
that runs the CLI in-process and reports its peak RSS (`VmHWM`, see bench/memory.py),
its exit code, and the times of its first and last finished row. Rows per second are
`(rows - 1) / (last - first)`: the steady rate, without the start-up (imports, a
cluster's start) that a short run would otherwise be measured by. The model is the
`module:factory` name `bench.scale:instant_model`, a FunctionModel that answers at once,
so the batch is pure CPU and the numbers are struckdown's (and Dask's) own cost.

The machine the suite runs on is shared: the rows also record the load average and
the CPU time all processes of a run used per row (the sd process and its workers,
sampled twice a second, between the first and the last finished row), which does
not depend on how many cores other work left us. On 2 cores that are
also running other jobs, two workers cannot get twice the CPU; the CPU per row says
what they would give on idle cores.

`python -m bench.scale --row-cost ROWS [--repeat N] [--tree NAME=CHECKOUT ...]` measures
only the CPU per row of `sd batch` next to bare `agent.run` (docs/performance.md, "The
cost of a row"): each tree's `sd batch` and the bare run in fresh processes, interleaved,
median of N; `--tree` adds another checkout's `sd batch` (e.g. `git archive main`
unpacked in /tmp) to compare before and after in one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .common import Row, interleaved, median, ms, scripted_model, target_row

TEMPLATE = "Classify the ticket: {{ text }} [[label]]\n"
MODEL = "bench.scale:instant_model"
ROOT = Path(__file__).resolve().parents[1]
JOBS = 64  # rows in flight: enough for two workers to be busy with instant rows
RSS_TARGET = 1.30
RATE_TARGET = 0.95
WORKERS_TARGET = 1.70
TTFT_TARGET = 1.05
PARTS = ("rows", "workers", "ttft")  # what `run` measures: row count, --workers, time to first token
TTFT_LATENCY = 0.020  # seconds before the scripted model's first token


def instant_model() -> Any:
    """Built by name in each `sd batch` process and on each Dask worker."""
    return scripted_model(text="ok")


# -- a child: one `sd batch` ------------------------------------------------------------------


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def child(report: Path, args: list[str]) -> None:
    """Run `sd ARGS` here; write what the parent measures to `report`."""
    from struckdown.cli import batch

    seen: dict[str, Any] = {"rows": 0, "first": 0.0, "last": 0.0, "tenths": []}
    finish = batch.BatchRun.finish

    def timed_finish(self: Any, position: int, outcome: Any) -> None:
        finish(self, position, outcome)
        now = time.perf_counter()
        if not seen["rows"]:
            seen["first"] = now
        seen["last"] = now
        seen["rows"] += 1
        if seen["rows"] % max(1, self.total // 10) == 0:  # this process's CPU time at each tenth of the rows
            seen["tenths"].append(time.process_time())

    batch.BatchRun.finish = timed_finish  # type: ignore[method-assign]
    from struckdown.cli.app import app

    code = 0
    try:
        app(args)
    except SystemExit as exc:
        code = int(exc.code or 0)
    except Exception as exc:  # noqa: BLE001 - reported to the parent
        code = 99
        seen["error"] = f"{type(exc).__name__}: {exc}"
    seen.update(code=code, peak_kib=_status_kib("VmHWM"))
    report.write_text(json.dumps(seen))


def bare_child(report: Path, inputs: Path) -> None:
    """The floor: bare pydantic-ai over the same rows (read from the same JSONL file),
    the same concurrency, the same instant model; reported like `child`."""
    from pydantic_ai import Agent

    seen: dict[str, Any] = {"rows": 0, "first": 0.0, "last": 0.0}
    agent = Agent(instant_model())

    async def main() -> None:
        semaphore = asyncio.Semaphore(JOBS)

        async def one(text: str) -> None:
            async with semaphore:
                await agent.run(f"Classify the ticket: {text}")
            now = time.perf_counter()
            if not seen["rows"]:
                seen["first"] = now
            seen["last"] = now
            seen["rows"] += 1

        with inputs.open(encoding="utf-8") as handle:
            texts = [json.loads(line)["text"] for line in handle]
        await asyncio.gather(*(one(text) for text in texts))

    asyncio.run(main())
    seen.update(code=0, peak_kib=_status_kib("VmHWM"))
    report.write_text(json.dumps(seen))


def _cpu_of_tree(pid: int) -> float:
    """CPU seconds (user + system) of `pid` and its living descendants."""
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(stat[1]), []).append(int(entry))
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        try:
            stat = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(stat[11]) + int(stat[12]) + int(stat[13]) + int(stat[14])) / tick  # children waited for too
        todo += children.get(current, [])
    return total


def sd_batch(workdir: Path, rows: int, *extra: str, bare: bool = False, root: Path = ROOT) -> dict[str, Any]:
    """One `sd batch` over `rows` rows in a fresh process (with `bare`, bare pydantic-ai
    over the same rows): its report, plus its wall time and the CPU its process tree
    used per row while rows finished. `root`: the source tree the child imports
    (struckdown and bench from there: another checkout measures its own code)."""
    inputs = workdir / f"in{rows}.jsonl"
    if not inputs.exists():
        with inputs.open("w", encoding="utf-8") as handle:
            for i in range(rows):
                handle.write(json.dumps({"id": i, "text": f"ticket {i}: my parcel is late"}) + "\n")
    template = workdir / "t.sd"
    template.write_text(TEMPLATE, encoding="utf-8")
    out = workdir / f"out{rows}{''.join(extra)}.jsonl"
    out.unlink(missing_ok=True)
    report = workdir / "report.json"
    report.unlink(missing_ok=True)
    args = ["batch", str(template), str(inputs), "-o", str(out), "--model", MODEL, "--no-cache", "-j", str(JOBS)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    command = ["--bare-child", str(report), "--", str(inputs)] if bare else ["--child", str(report), "--", *args, *extra]
    started = time.perf_counter()
    # stderr to a file, not a pipe: a pipe nobody reads until the end fills up (sd batch
    # prints a progress line a second when stderr is not a terminal) and blocks the child
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8") as errors:
        process = subprocess.Popen(
            [sys.executable, "-m", "bench.scale", *command],
            cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=errors, text=True,
        )  # fmt: skip
        samples: list[tuple[float, float]] = []  # (perf_counter, CPU of the tree): comparable across processes
        while process.poll() is None:
            samples.append((time.perf_counter(), _cpu_of_tree(process.pid)))
            time.sleep(0.5)
        wall = time.perf_counter() - started
        errors.seek(0)
        err = errors.read()
    if process.returncode != 0 or not report.exists():
        raise RuntimeError(f"sd batch over {rows} rows {' '.join(extra)} failed ({process.returncode}):\n{err[-2000:]}")
    data: dict[str, Any] = json.loads(report.read_text())
    if data.get("code") or data["rows"] != rows:
        raise RuntimeError(f"sd batch over {rows} rows: {data}\n{err[-2000:]}")
    lines = rows if bare else sum(1 for _ in out.open(encoding="utf-8"))
    if lines != rows:
        raise RuntimeError(f"sd batch over {rows} rows wrote {lines} rows")
    data["rate"] = (rows - 1) / (data["last"] - data["first"])
    tenths = data.get("tenths") or []
    data["tenth_ms"] = [1000 * (b - a) / (rows // 10) for a, b in zip(tenths, tenths[1:])]
    data["wall"] = wall
    data["cpu_ms_per_row"] = 1000 * _cpu_between(samples, data["first"], data["last"]) / (rows - 1)
    return data


def _cpu_between(samples: list[tuple[float, float]], start: float, end: float) -> float:
    """CPU seconds the tree used from `start` to `end`, read off the samples around them
    (the steady part of the run: no imports, no cluster start or stop)."""

    def at(moment: float) -> float:
        before = [cpu for when, cpu in samples if when <= moment]
        after = [cpu for when, cpu in samples if when >= moment]
        if not before or not after:
            return (before or after or [0.0])[-1 if before else 0]
        return (before[-1] + after[0]) / 2

    return max(0.0, at(end) - at(start))


def cores_available(seconds: float = 2.0) -> float:
    """How many cores two CPU-bound processes get right now (2.0 on two idle cores): the
    condition the --workers row is measured in, on a machine other work shares."""
    code = (
        "import time\nend = time.perf_counter() + %r\nstart = time.process_time()\n"
        "while time.perf_counter() < end: pass\nprint(time.process_time() - start)" % seconds
    )
    burners = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    return sum(float(b.communicate()[0]) for b in burners) / seconds


def _load() -> str:
    try:
        one, five, _ = os.getloadavg()
        return f"load {one:.1f}/{five:.1f} on {os.cpu_count()} cores"
    except OSError:
        return "load unknown"


# -- time to first token ------------------------------------------------------------------------


def streaming_model() -> Any:
    from pydantic_ai.models.function import FunctionModel

    async def stream(messages: list[Any], info: Any) -> Any:
        await asyncio.sleep(TTFT_LATENCY)
        for word in ("the ", "first ", "answer"):
            yield word

    async def whole(messages: list[Any], info: Any) -> Any:
        raise AssertionError("the benchmark streams")

    return FunctionModel(whole, stream_function=stream)


async def first_token_rows(quick: bool) -> list[Row]:
    from pydantic_ai import Agent

    import struckdown
    from struckdown.incremental import TokenDelta

    trials = 30 if quick else 100
    program = struckdown.parse("Tell me about {{ topic }} [[answer]]")
    sd_model, agent = streaming_model(), Agent(streaming_model())
    firsts: dict[str, list[float]] = {"struckdown": [], "bare": []}

    async def run_struckdown() -> None:
        started = time.perf_counter()
        events = struckdown.complete_incremental_async(program, {"topic": "tea"}, model=sd_model)
        async for event in events:
            if isinstance(event, TokenDelta):
                firsts["struckdown"].append(time.perf_counter() - started)
                break
        await events.aclose()

    async def run_bare() -> None:
        started = time.perf_counter()
        async with agent.run_stream("Tell me about tea") as result:
            async for _ in result.stream_text(delta=True):
                firsts["bare"].append(time.perf_counter() - started)
                break

    await interleaved({"struckdown": run_struckdown, "bare": run_bare}, repeats=trials, warmup=3)
    sd_first, bare_first = median(firsts["struckdown"]), median(firsts["bare"])
    return [
        target_row(
            "h. time to first token, streamed slot", ms(sd_first), f"{ms(bare_first)} bare run_stream",
            sd_first / bare_first, TTFT_TARGET,
            note=f"median of {trials}; the model's first token comes after {TTFT_LATENCY * 1000:.0f} ms; "
            f"struckdown adds {1000 * (sd_first - bare_first):.2f} ms",
        )  # fmt: skip
    ]


# -- the case ------------------------------------------------------------------------------------


async def run(quick: bool = False, parts: tuple[str, ...] = PARTS) -> list[Row]:
    small, big = (1_000, 10_000) if quick else (1_000, 100_000)
    worker_rows = 3_000 if quick else 20_000
    out: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="sd-bench-scale-") as tmp:
        workdir = Path(tmp)
        if "rows" in parts:
            out += _row_count_rows(workdir, small, big)
        if "workers" in parts:
            out += _worker_rows(workdir, worker_rows)
    if "ttft" in parts:
        out += await first_token_rows(quick)
    return out


def _row_count_rows(workdir: Path, small: int, big: int) -> list[Row]:
    """Peak RSS and rows per second of `big` rows vs `small` rows (run before and after)."""
    out: list[Row] = []
    load_before = _load()
    first = sd_batch(workdir, small)
    large = sd_batch(workdir, big)
    second = sd_batch(workdir, small)
    rss_ratio = large["peak_kib"] / max(first["peak_kib"], second["peak_kib"])
    small_rate = (first["rate"] + second["rate"]) / 2
    rate_ratio = large["rate"] / small_rate
    out.append(Row(
        case=f"h. sd batch peak RSS, {big:,} rows vs {small:,}",
        measured=f"{large['peak_kib'] / 1024:.1f} MiB",
        floor=f"{max(first['peak_kib'], second['peak_kib']) / 1024:.1f} MiB ({small:,} rows)",
        ratio=rss_ratio, target=f"<= {RSS_TARGET:.2f}x", passed=rss_ratio <= RSS_TARGET,
        note=f"{small:,} rows twice: {first['peak_kib'] / 1024:.1f} / {second['peak_kib'] / 1024:.1f} MiB",
    ))  # fmt: skip
    out.append(Row(
        case=f"h. sd batch rows/s, {big:,} rows vs {small:,}",
        measured=f"{large['rate']:.0f} rows/s", floor=f"{small_rate:.0f} rows/s ({small:,} rows)",
        ratio=rate_ratio, target=f">= {RATE_TARGET:.2f}x", passed=rate_ratio >= RATE_TARGET,
        note=f"{small:,} rows before and after: {first['rate']:.0f} / {second['rate']:.0f} rows/s; "
        f"CPU per row {first['cpu_ms_per_row']:.2f} / {large['cpu_ms_per_row']:.2f} / "
        f"{second['cpu_ms_per_row']:.2f} ms; CPU per row of the {big:,}-row process by tenth of its rows: "
        f"{' '.join(f'{v:.2f}' for v in large['tenth_ms'])} ms; {load_before} before, {_load()} after",
    ))  # fmt: skip
    bare = sd_batch(workdir, big, bare=True)
    out.append(Row(
        case=f"h. sd batch CPU per row vs bare pydantic-ai ({big:,} rows, -j {JOBS})",
        measured=f"{large['cpu_ms_per_row']:.2f} ms", floor=f"{bare['cpu_ms_per_row']:.2f} ms bare agent.run",
        ratio=large["cpu_ms_per_row"] / bare["cpu_ms_per_row"],
        target="info (inputs read 3x, journal, output included)", passed=None,
        note=f"rows/s {large['rate']:.0f} vs {bare['rate']:.0f} bare; peak RSS {large['peak_kib'] / 1024:.1f} MiB "
        f"vs {bare['peak_kib'] / 1024:.1f} MiB bare (which holds its {big:,} runs)",
    ))  # fmt: skip
    return out


def _worker_rows(workdir: Path, worker_rows: int) -> list[Row]:
    """Rows per second of `--workers 2` vs one process (run before and after)."""
    out: list[Row] = []
    load_before = _load()
    cores_before = cores_available()
    one = sd_batch(workdir, worker_rows)
    two = sd_batch(workdir, worker_rows, "--workers", "2")
    one_again = sd_batch(workdir, worker_rows)
    cores_after = cores_available()
    one_rate = (one["rate"] + one_again["rate"]) / 2
    speedup = two["rate"] / one_rate
    cpu_one = (one["cpu_ms_per_row"] + one_again["cpu_ms_per_row"]) / 2
    out.append(Row(
        case=f"h. sd batch --workers 2 vs 1 process, {worker_rows:,} rows",
        measured=f"{two['rate']:.0f} rows/s", floor=f"{one_rate:.0f} rows/s (1 process)",
        ratio=speedup, target=f">= {WORKERS_TARGET:.2f}x", passed=speedup >= WORKERS_TARGET,
        note=f"1 process before and after: {one['rate']:.0f} / {one_again['rate']:.0f} rows/s; "
        f"CPU per row (all processes) {cpu_one:.2f} ms in 1, {two['cpu_ms_per_row']:.2f} ms with 2 workers: "
        f"on 2 idle cores 2 workers would give {2 * cpu_one / two['cpu_ms_per_row']:.2f}x; "
        f"two CPU-bound processes got {cores_before:.2f} cores before, {cores_after:.2f} after; "
        f"wall with the cluster's start {two['wall']:.1f} s vs {one['wall']:.1f} s; "
        f"{load_before} before, {_load()} after",
    ))  # fmt: skip
    return out


def row_cost(rows: int = 4_000, repeats: int = 3, others: dict[str, Path] | None = None) -> list[Row]:
    """CPU per row of `sd batch` (this tree and each checkout in `others`) next to bare
    `agent.run` over the same rows, interleaved (A B bare, then bare B A, ...), median of
    `repeats`: the row-cost line of docs/performance.md, quick to repeat
    (`python -m bench.scale --row-cost 4000 --tree before=/tmp/old-checkout`)."""
    trees = {"this tree": ROOT, **(others or {})}
    names = [*trees, "bare"]
    cpu: dict[str, list[float]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory(prefix="sd-bench-rowcost-") as tmp:
        workdir = Path(tmp)
        for round_ in range(repeats):
            for name in names if round_ % 2 == 0 else names[::-1]:
                data = sd_batch(workdir, rows, bare=True) if name == "bare" else sd_batch(workdir, rows, root=trees[name])
                cpu[name].append(data["cpu_ms_per_row"])
                print(f"  {name}: {data['cpu_ms_per_row']:.2f} ms/row ({_load()})", file=sys.stderr, flush=True)
    bare = median(cpu["bare"])
    return [
        Row(
            case=f"r. sd batch CPU per row vs bare agent.run ({name}, -j {JOBS})",
            measured=f"{median(cpu[name]):.2f} ms", floor=f"{bare:.2f} ms bare agent.run",
            ratio=median(cpu[name]) / bare, target="<= 1.20x", passed=median(cpu[name]) / bare <= 1.20,
            note=f"{rows:,} rows, median of {repeats}: {' '.join(f'{v:.2f}' for v in cpu[name])} ms; "
            f"bare {' '.join(f'{v:.2f}' for v in cpu['bare'])} ms",
        )  # fmt: skip
        for name in trees
    ]


async def row_cost_case(quick: bool = False) -> list[Row]:
    """Case r of `python -m bench` (SPEC §28's per-row target; `--check --quick` in CI)."""
    return row_cost(1_500 if quick else 4_000, 3 if quick else 5)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--child", type=Path, help="run `sd ARGS` here and write the report to this file")
    parser.add_argument("--bare-child", type=Path, help="run bare pydantic-ai over the rows of the JSONL file ARGS[0]")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--part", action="append", choices=PARTS, help="measure only this part (repeatable)")
    parser.add_argument("--row-cost", type=int, metavar="ROWS", help="only CPU per row of sd batch vs bare agent.run")
    parser.add_argument("--repeat", type=int, default=3, help="--row-cost: runs of each (median)")
    parser.add_argument("--tree", action="append", default=[], metavar="NAME=PATH",
                        help="--row-cost: measure the sd batch of this checkout too (repeatable)")
    parser.add_argument("args", nargs="*")
    options = parser.parse_args()
    if options.child is not None:
        child(options.child, options.args)
        return
    if options.bare_child is not None:
        bare_child(options.bare_child, Path(options.args[0]))
        return
    from .common import print_table

    if options.row_cost:
        others = {n: Path(p).resolve() for n, _, p in (t.partition("=") for t in options.tree)}
        print_table(row_cost(options.row_cost, options.repeat, others), title="sd batch: the cost of a row")
        return
    print_table(asyncio.run(run(options.quick, tuple(options.part or PARTS))), title="scale")


if __name__ == "__main__":
    main()
