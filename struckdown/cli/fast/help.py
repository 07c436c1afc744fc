"""`sd --help` (and `sd COMMAND --help`) without importing typer, click or rich.

Building the typer app costs several times what printing its help does, so the help
pages are generated from that same app (`python -m struckdown.cli.generate --write`
writes `help_pages.py`) and printed from there when the command line is exactly
`sd [COMMAND…] --help` on a terminal at least 80 columns wide (click wraps help at
78 columns there). Anything else goes through typer as before.
tests/cli/test_fast_help.py compares every stored page with the one typer prints, so
a flag added without regenerating the pages fails the unit tests. `--write` also writes
`run_params.py`, the table the start-up paths of `sd run` and `sd check` read their flags
from (fast/run.py).

This module imports only `os` and `sys` (already loaded by the interpreter).
"""

from __future__ import annotations

import os
import sys

PROG = "sd"
#: click's help width: min(terminal columns, 80) - 2.
WIDTH = 78
HELP_FLAGS = ("--help", "-h")


def _columns() -> int:
    """The terminal width as `shutil.get_terminal_size` (which click asks) reports it."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns > 0:
        return columns
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns if sys.__stdout__ else 80
    except (AttributeError, ValueError, OSError):
        return 80


def stored_page(argv: list[str]) -> str | None:
    """The help page for `sd ARGV` when it is a plain help request the stored pages answer
    exactly as typer would; None otherwise (typer then builds the app and answers)."""
    if not argv or argv[-1] not in HELP_FLAGS or any(a.startswith("-") for a in argv[:-1]):
        return None
    if os.path.basename(sys.argv[0]) != PROG or _columns() < WIDTH + 2:
        return None
    from .help_pages import PAGES

    return PAGES.get(" ".join(argv[:-1]))
