"""`sd cache stats|clear`: the response cache on disk (the work is in cache_cmd.py,
imported when a command runs)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from .errors import reporting_errors

cache_app = typer.Typer(
    name="cache",
    help="The response cache on disk (STRUCKDOWN_CACHE_DIR, default ~/.cache/struckdown).",
    no_args_is_help=True,
    rich_markup_mode=None,
)
CacheDirOpt = Annotated[
    Optional[Path],
    typer.Option("--dir", help="The cache directory. Default: STRUCKDOWN_CACHE_DIR or ~/.cache/struckdown.",
                 show_default=False),
]


@cache_app.command("stats", epilog="Exit codes: 0 ok, 1 the cache cannot be read.")
def cache_stats(
    directory: CacheDirOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the numbers as JSON.")] = False,
) -> None:
    """Show where the cache is, how many answers it holds and how big it is."""
    with reporting_errors():
        from .cache_cmd import stats_command

        code = stats_command(directory, as_json)
    raise typer.Exit(code)


@cache_app.command("clear", epilog="Exit codes: 0 ok, 1 the cache cannot be cleared.")
def cache_clear(directory: CacheDirOpt = None) -> None:
    """Delete every cached answer."""
    with reporting_errors():
        from .cache_cmd import clear_command

        code = clear_command(directory)
    raise typer.Exit(code)
