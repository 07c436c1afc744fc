"""The `sd` command line: run, chat, check, explain, batch (SPEC §8).

`main` is the console-script entry point; the typer app lives in `app.py` and
every command imports its heavy parts (pydantic-ai, rich.live) only when it runs.
`sd --help`, `sd check` and `sd run` start without typer: `cli/fast/` reads their
command lines (standard library only), and the commands run from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .fast.check import CheckArgs


def current_folder_importable() -> None:
    """`sd` imports from the current folder as `python -m` does: `--model mymod:factory`
    finds mymod.py there (so does a tools module for Dask workers, which start with this
    sys.path). The folder goes last, so a file there never shadows an installed module."""
    import os
    import sys

    folder = os.getcwd()
    if folder not in sys.path:
        sys.path.append(folder)


def main() -> None:
    import sys

    from .fast.help import stored_page

    current_folder_importable()  # `--model mymod:factory` finds ./mymod.py, as under `python -m`

    page = stored_page(sys.argv[1:])  # `sd --help`: the stored page, no typer (fast/help.py)
    if page is not None:
        sys.stdout.write(page)
        return
    if sys.argv[1:2] == ["check"]:  # `sd check`: its flags read without typer (fast/check.py)
        from .fast.check import parse_check_args

        args = parse_check_args(sys.argv[2:])
        if args is not None:
            sys.exit(run_check(args))
    if sys.argv[1:2] == ["run"]:  # `sd run`: its flags read without typer (fast/run.py)
        from .. import heap
        from .fast.run import parse_run_args

        heap.pause()  # no cyclic collections until the run's first event (heap.py)
        try:
            values = parse_run_args(sys.argv[2:])
            if values is not None:
                sys.exit(run_fast(values))
        finally:
            heap.end()
    from .app import app

    app()


def run_fast(values: dict[str, Any]) -> int:
    """What the typer command `run` does (app.py) with the values `fast/run.py` read, with
    the app's callback and `reporting_errors` around it; returns the exit code."""
    from .errors import reported
    from .fast.run_params import FLAG_PARAMS
    from .text import prepare

    prepare()
    flags = {name: values.pop(name) for name in FLAG_PARAMS}

    def body() -> int:
        from .run_cmd import run_cli

        return run_cli(flags=flags, **values)

    return reported(body)


def run_check(args: CheckArgs) -> int:
    """What the typer command `check` does (app.py) with the flags `fast/check.py` read, with
    the app's callback and `reporting_errors` around it; returns the exit code."""
    from .errors import reported
    from .text import prepare

    prepare()

    def body() -> int:
        from .check import check_command, mcp_tool_names

        listed = mcp_tool_names(args.mcp, args.mcp_config)
        return check_command(args.templates, args.context, args.pairs, args.tools, args.include_paths, listed)

    return reported(body)
