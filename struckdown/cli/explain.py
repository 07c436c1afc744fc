"""`sd explain`: the compiled plan of a template as a tree (built by `struckdown.explain`)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from ..explain import PlanTree, to_rich
from .errors import EXIT_OK
from .loading import load_program, load_tools


def explain_command(template: Path, tools_file: Path | None, include_paths: Sequence[Path]) -> int:
    program = load_program(template, include_paths)
    tools = load_tools(tools_file)
    console = Console(file=sys.stdout, highlight=False)
    console.print(to_rich(PlanTree(program, tools).build(str(template))))
    return EXIT_OK
