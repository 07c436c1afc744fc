"""`sd explain`: the compiled plan of a template as a tree (built by `struckdown.explain.plan`)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from ..explain.plan import PlanTree, to_rich
from .errors import EXIT_OK, CliError
from .loading import load_program, load_tools


def explain_command(
    template: Path,
    tools_file: Path | None,
    include_paths: Sequence[Path],
    *,
    cache: bool = False,
    rows: Path | None = None,
    model: str | None = None,
    prices: Path | None = None,
) -> int:
    program = load_program(template, include_paths)
    tools = load_tools(tools_file)
    if cache:
        return _cache_command(program, tools, rows, model, prices)
    if rows is not None or prices is not None or model is not None:
        raise CliError("--rows, --model and --prices go with --cache")
    console = Console(file=sys.stdout, highlight=False)
    console.print(to_rich(PlanTree(program, tools).build(str(template))))
    return EXIT_OK


def _cache_command(program: Any, tools: Any, rows: Path | None, model: str | None, prices: Path | None) -> int:
    """`sd explain --cache`: the predicted prompt-cache use per slot (struckdown/explain/cache.py)."""
    from ..batch.tables import read_inputs
    from ..explain.cache import cache_report, pricer, report_lines
    from ..models.pricing import load_prices_file

    table = load_prices_file(prices) if prices is not None else None
    price, name, rule = pricer(model, table)
    contexts = read_inputs([str(rows)]) if rows is not None else []
    report = cache_report(program, contexts, rule=rule, tools=tools or (), price=price)
    sys.stdout.write("\n".join(report_lines(report, name)) + "\n")
    return EXIT_OK
