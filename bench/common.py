"""Shared pieces of the benchmark suite: result rows, timing, scripted models, the table.

Every case measures struckdown side by side with its floor in one process run,
interleaving the contenders (A B B A …) so that drift on a noisy machine hits both
alike, and reports medians of N trials.
"""

from __future__ import annotations

import asyncio
import gc
import json
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

RESULTS_PATH = Path(__file__).resolve().parent / "results.json"


@dataclass
class Row:
    """One line of the table. `passed` is None for informational rows."""

    case: str
    measured: str
    floor: str
    ratio: float | None
    target: str
    passed: bool | None
    note: str = ""

    @property
    def verdict(self) -> str:
        if self.passed is None:
            return "info"
        return "PASS" if self.passed else "FAIL"


# -- formatting ----------------------------------------------------------------


def ms(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds * 1000:.1f} ms"


def secs(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds:.3f} s"


def ratio_of(measured: float | None, floor: float | None) -> float | None:
    if measured is None or floor is None or floor <= 0:
        return None
    return measured / floor


def target_row(
    case: str, measured: str, floor: str, ratio: float | None, target: float, *, problem: str = "", note: str = ""
) -> Row:
    """A row judged against a ratio target: it passes at or under the target and
    only if the case's own result checks found no problem."""
    return Row(
        case=case,
        measured=measured,
        floor=floor,
        ratio=ratio,
        target=f"<= {target:.2f}x",
        passed=ratio is not None and ratio <= target and not problem,
        note=f"{problem}; {note}" if problem and note else (problem or note),
    )


def print_table(rows: Sequence[Row], title: str = "struckdown benchmarks") -> None:
    headers = ("case", "measured", "floor/ideal", "ratio", "target", "result")
    cells = [
        (r.case, r.measured, r.floor, "n/a" if r.ratio is None else f"{r.ratio:.2f}x", r.target, r.verdict)
        for r in rows
    ]
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:  # plain text when rich is missing
        widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]
        print(title)
        print("  ".join(h.ljust(w) for h, w in zip(headers, widths)))
        for c in cells:
            print("  ".join(v.ljust(w) for v, w in zip(c, widths)))
    else:
        table = Table(title=title)
        for h in headers:
            table.add_column(h, justify="right" if h in ("measured", "floor/ideal", "ratio") else "left")
        styles = {"PASS": "green", "FAIL": "bold red", "info": "dim"}
        for c in cells:
            table.add_row(*c[:-1], f"[{styles[c[-1]]}]{c[-1]}[/]")
        Console(width=max(200, Console().width)).print(table)
    for r in rows:
        if r.note:
            print(f"  - {r.case}: {r.note}")


def markdown_table(path: Path = RESULTS_PATH) -> str:
    """The last results as a markdown table (for docs/performance.md)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    lines = [
        f"{data.get('mode', '?')} run of {data.get('date', '?')}, {data.get('elapsed_s', '?')} s, "
        f"Python {data.get('python', '?')}",
        "",
        "| case | measured | floor/ideal | ratio | target | result |",
        "|---|---|---|---|---|---|",
    ]
    for r in data["rows"]:
        ratio = "n/a" if r["ratio"] is None else f"{r['ratio']:.2f}x"
        cells = [r["case"], r["measured"], r["floor"], ratio, r["target"], r["result"]]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    notes = [f"- {r['case']}: {r['note']}" for r in data["rows"] if r.get("note")]
    return "\n".join(lines + ([""] + notes if notes else []))


def write_json(rows: Sequence[Row], extra: dict[str, Any] | None = None, path: Path = RESULTS_PATH) -> None:
    payload = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        **(extra or {}),
        "rows": [{**asdict(r), "result": r.verdict} for r in rows],
    }
    path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")


# -- timing --------------------------------------------------------------------


async def interleaved(
    contenders: dict[str, Callable[[], Awaitable[Any]]],
    *,
    repeats: int,
    warmup: int = 1,
    cpu: dict[str, list[float]] | None = None,
) -> dict[str, list[float]]:
    """Wall time (s) of each contender, `repeats` trials each, alternating the order
    every round so that neither always runs first. When `cpu` is given it receives the
    process CPU time (all threads) of each trial too."""
    names = list(contenders)
    for _ in range(warmup):
        for name in names:
            await contenders[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    if cpu is not None:
        cpu.update({name: [] for name in names})
    for round_ in range(repeats):
        order = names if round_ % 2 == 0 else names[::-1]
        for name in order:
            gc.collect()
            cpu_started = time.process_time()
            started = time.perf_counter()
            await contenders[name]()
            times[name].append(time.perf_counter() - started)
            if cpu is not None:
                cpu[name].append(time.process_time() - cpu_started)
    return times


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def best(values: Sequence[float]) -> float:
    """Best of N: other processes only ever add time, so on a shared machine the
    minimum is the most repeatable estimate of a wall time (as `timeit` does)."""
    return min(values)


# -- scripted models -------------------------------------------------------------


def scripted_model(*, latency: float = 0.0, text: str | Callable[[list[Any]], str] = "ok", typed: Any = 7) -> Any:
    """A FunctionModel answering every request after `latency` seconds: plain text when
    text output is allowed, else the first output tool with `{"response": typed}`."""
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

    def reply(messages: list[Any]) -> str:
        return text(messages) if callable(text) else text

    def arguments(tool: Any) -> Any:
        """Scalars and struckdown's answer models wrap the value in `response`; an object
        output type (a bare pydantic-ai BaseModel) takes its fields directly."""
        wrapped = "response" in tool.parameters_json_schema.get("properties", {})
        return {"response": typed} if wrapped else typed

    async def function(messages: list[Any], info: AgentInfo) -> ModelResponse:
        if latency:
            await asyncio.sleep(latency)
        if info.output_tools:
            tool = info.output_tools[0]
            return ModelResponse(parts=[ToolCallPart(tool.name, arguments(tool))])
        return ModelResponse(parts=[TextPart(reply(messages))])

    async def stream_function(messages: list[Any], info: AgentInfo) -> Any:
        if latency:
            await asyncio.sleep(latency)
        if info.output_tools:
            tool = info.output_tools[0]
            yield {0: DeltaToolCall(tool.name, json.dumps(arguments(tool)))}
        else:
            yield reply(messages)

    return FunctionModel(function=function, stream_function=stream_function)


def last_user_prompt(messages: list[Any]) -> str:
    from pydantic_ai.messages import ModelRequest, UserPromptPart

    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            for part in reversed(message.parts):
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    return part.content
    return ""


def transcript(messages: list[Any]) -> list[tuple[str, str]]:
    """The conversation as (role, text) pairs, for checking two runs sent the same thing."""
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

    out: list[tuple[str, str]] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            out += [("user", str(p.content)) for p in message.parts if isinstance(p, UserPromptPart)]
        elif isinstance(message, ModelResponse):
            out += [("assistant", p.content) for p in message.parts if isinstance(p, TextPart)]
    return out
