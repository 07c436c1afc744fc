"""Run the struckdown benchmark suite: `python -m bench [--quick] [--only a,b,...]`.

Prints one table (case, measured, floor/ideal, ratio, target, pass/fail) and writes it
to bench/results.json. Exit status is 0 whatever the targets' verdicts: benchmarks
report. `--check` gates: it compares each ratio with the one recorded in
docs/performance.md and exits 1 when a row is more than 20 % worse (bench/check.py);
`--check --quick` runs the cases `.ci/run` checks.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import sys
import time
import traceback
from collections.abc import Awaitable, Callable

from . import (
    batch, check, conversation, durable, evals, flow, guards, html_text, lsp, memory, overhead, parse, partials,
    prompt_cache, provider_batch, scale, startup, tools,
)
from .common import RESULTS_PATH, Row, markdown_table, print_table, write_json

CASES: dict[str, tuple[str, Callable[[bool], Awaitable[list[Row]]]]] = {
    "a": ("per-slot overhead", overhead.run),
    "b": ("guard overlap", guards.run),
    "c": ("tool loop", tools.run),
    "d": ("batch", batch.run),
    "e": ("start-up", startup.run),
    "f": ("parse", parse.run),
    "g": ("memory", memory.run),
    "h": ("scale: sd batch memory, rows/s, --workers, first token", scale.run),
    "j": ("effect journal", durable.run),
    "k": ("language server: 1 MB diagnostics, a burst of edits", lsp.run),
    "l": ("long conversation", conversation.run),
    "p": ("provider batch", provider_batch.run),
    "q": ("provider prompt caching: explain --cache vs what the responses report", prompt_cache.run),
    "r": ("sd batch: CPU per row vs bare agent.run", scale.row_cost_case),
    "s": ("typed answers that stream: first SlotPartial", partials.run),
    "v": ("eval: sd.evaluate vs the same rows as a batch", evals.run),
    "w": ("html_to_text on hostile pages", html_text.run),
    "x": ("flow check (SPEC §33): 200 slots with labels vs without", flow.run),
}


async def run_cases(selected: list[str], quick: bool) -> list[Row]:
    rows: list[Row] = []
    for letter in selected:
        title, case = CASES[letter]
        started = time.perf_counter()
        print(f"[{letter}] {title} ...", file=sys.stderr, flush=True)
        try:
            rows += await case(quick)
        except Exception as exc:  # one broken case must not hide the others
            traceback.print_exc()
            rows.append(Row(f"{letter}. {title}", "error", "-", None, "-", False, f"{type(exc).__name__}: {exc}"))
        print(f"[{letter}] done in {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes for a fast sanity run (< 30 s)")
    parser.add_argument("--only", default="", help="comma-separated case letters, e.g. a,d")
    parser.add_argument("--no-json", action="store_true", help=f"do not write {RESULTS_PATH.name}")
    parser.add_argument(
        "--check",
        action="store_true",
        help="fail (exit 1) when a ratio is more than 20%% worse than recorded in docs/performance.md; "
        f"with --quick and no --only, runs cases {','.join(check.QUICK_CASES)}",
    )
    parser.add_argument("--markdown", action="store_true", help=f"print {RESULTS_PATH.name} as markdown and exit")
    args = parser.parse_args()
    if args.markdown:
        print(markdown_table())
        return
    selected = [c.strip() for c in args.only.split(",") if c.strip()]
    if not selected:
        selected = list(check.QUICK_CASES) if args.check and args.quick else list(CASES)
    recorded = check.recorded_ratios() if args.check else {}  # a missing table fails before the run
    unknown = [c for c in selected if c not in CASES]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; choose from {', '.join(CASES)}")
    started = time.perf_counter()
    rows = asyncio.run(run_cases(selected, args.quick))
    elapsed = time.perf_counter() - started
    mode = "quick" if args.quick else "full"
    print_table(rows, title=f"struckdown benchmarks ({mode}, {elapsed:.0f} s)")
    if not args.no_json:
        write_json(
            rows,
            {
                "mode": mode,
                "cases": selected,
                "elapsed_s": round(elapsed, 1),
                "python": platform.python_version(),
                "machine": platform.platform(),
            },
        )
        print(f"wrote {RESULTS_PATH}")
    if args.check:
        verdicts = check.judge(rows, recorded)
        again = check.failed_cases(verdicts)
        if again:
            print(f"bench --check: case(s) {','.join(again)} worse than recorded; measuring them once more "
                  "(a regression shows twice, a slow spell of the shared host does not)", file=sys.stderr)
            rows = check.best_of(rows, asyncio.run(run_cases(again, args.quick)))
            verdicts = check.judge(rows, recorded)
        if not check.report(verdicts):
            sys.exit(1)


if __name__ == "__main__":
    main()
