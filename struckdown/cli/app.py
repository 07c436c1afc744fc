"""The `sd` typer app: flags and help only; each command's work lives in its own module.

Nothing heavy is imported here, so `sd --help` stays fast: the command modules
(and pydantic-ai with them) load when a command runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from .errors import reporting_errors

app = typer.Typer(
    name="sd",
    help="struckdown: run markdown templates whose \\[\\[slots]] a language model fills in.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: `sd --help` need not import rich's markdown and syntax stack
    context_settings={"help_option_names": ["-h", "--help"]},
)

EXIT_CODES = "Exit codes: 0 ok, 1 model or runtime error, 2 template or input error, 3 halted by a guard."

TemplateArg = Annotated[Path, typer.Argument(help="The .sd template.", show_default=False)]
ContextOpt = Annotated[
    Optional[Path], typer.Option("--context", help="Context variables from a JSON or YAML file.", show_default=False)
]
SetOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "-c",
        "--set",
        metavar="KEY=VALUE",
        help="Set a context variable (repeatable; overrides --context). VALUE is JSON if it parses, else text.",
        show_default=False,
    ),
]
ModelOpt = Annotated[
    Optional[str],
    typer.Option(
        "--model",
        "-m",
        help="pydantic-ai model string (openai-chat:gpt-4o-mini, ollama:…) or 'test' for a dry run. "
        "Default: STRUCKDOWN_MODEL / DEFAULT_LLM, or LLM_API_BASE (+ LLM_API_KEY).",
        show_default=False,
    ),
]
ToolsOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--tools", "-t", help="Python file whose public functions are the agent tools.", show_default=False
    ),
]
NoCacheOpt = Annotated[bool, typer.Option("--no-cache", help="Do not use the response cache.")]
IncludeOpt = Annotated[
    Optional[list[Path]],
    typer.Option("--include-path", "-I", help="Extra directory for <include src=…/> (repeatable).", show_default=False),
]


def _version(value: bool) -> None:
    if value:
        from .. import __version__

        typer.echo(f"struckdown {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit.")
    ] = False,
) -> None:
    import logging
    import os

    os.environ.setdefault("PYDANTIC_AI_NO_BANNER", "1")  # pydantic-ai's terminal banner is not ours to show
    # Clamping notices arrive as warnings; the logger copy would print them twice.
    logger = logging.getLogger("struckdown")
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
    _plain_warnings()


def _plain_warnings() -> None:
    import sys
    import warnings

    def show(message: Warning | str, category: type[Warning], *args: object, **kwargs: object) -> None:
        from .text import visible

        sys.stderr.write(f"warning: {visible(str(message))}\n")

    warnings.showwarning = show


@app.command(epilog=EXIT_CODES)
def run(
    template: TemplateArg,
    context: ContextOpt = None,
    set_: SetOpt = None,
    model: ModelOpt = None,
    tools: ToolsOpt = None,
    output: Annotated[
        Optional[Path],
        typer.Option("--output", "-o", help="Write {answers, usage, halted} to this JSON file.", show_default=False),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print only the answers as JSON on stdout (the display goes to stderr).")
    ] = False,
    stream: Annotated[bool, typer.Option("--stream/--no-stream", help="Stream tokens as they arrive.")] = True,
    no_cache: NoCacheOpt = False,
    stop_at: Annotated[
        Optional[str], typer.Option("--stop-at", metavar="KEY", help="End the run after this slot.", show_default=False)
    ] = None,
    include_path: IncludeOpt = None,
) -> None:
    """Run a template against a context, showing answers, tool calls and guard verdicts live."""
    with reporting_errors():
        from .run_cmd import RunRequest, run_command

        code = run_command(
            RunRequest(
                template=template,
                context_file=context,
                pairs=set_ or (),
                model=model,
                tools_file=tools,
                output=output,
                as_json=as_json,
                stream=stream,
                cache=not no_cache,
                stop_at=stop_at,
                include_paths=include_path or (),
            )
        )
    raise typer.Exit(code)


app.command("chat", help="Same as `sd run`.", epilog=EXIT_CODES)(run)


@app.command(epilog="Exit codes: 0 no errors (warnings allowed), 1 errors found, 2 unreadable input.")
def check(
    templates: Annotated[list[Path], typer.Argument(help="Templates to check.", show_default=False)],
    context: ContextOpt = None,
    set_: SetOpt = None,
    tools: ToolsOpt = None,
    include_path: IncludeOpt = None,
) -> None:
    """Parse and lint templates without calling a model: `path:line:col: error|warning: message`.

    Undefined variables are reported only when a context (--context or -c) is given.
    """
    with reporting_errors():
        from .check import check_command

        code = check_command(templates, context, set_ or (), tools, include_path or ())
    raise typer.Exit(code)


@app.command(epilog="Exit codes: 0 ok, 2 template error.")
def explain(
    template: TemplateArg,
    tools: ToolsOpt = None,
    include_path: IncludeOpt = None,
) -> None:
    """Show the compiled plan: segments, slots, options, tools, guards and limits."""
    with reporting_errors():
        from .explain import explain_command

        code = explain_command(template, tools, include_path or ())
    raise typer.Exit(code)


@app.command(
    epilog="Exit codes: 0 every row ok, 1 a row failed (or a model error), 2 template or input error, "
    "3 no row failed but a guard halted some, 130 interrupted (finished rows are in the journal)."
)
def batch(
    template: TemplateArg,
    inputs: Annotated[
        list[str],
        typer.Argument(
            help="CSV, XLSX, JSON (a list of objects), JSONL or text files (one row each); '-' reads JSONL from stdin.",
            show_default=False,
        ),
    ],
    output: Annotated[
        Optional[Path],
        typer.Option(
            "--output",
            "-o",
            help="Output file: .jsonl, .json, .csv or .xlsx. Default: JSONL on stdout (no journal).",
            show_default=False,
        ),
    ] = None,
    jobs: Annotated[int, typer.Option("--jobs", "-j", min=1, help="Rows run at the same time.")] = 8,
    workers: Annotated[
        Optional[int],
        typer.Option(
            "--workers",
            min=1,
            metavar="N",
            help="Run the rows in N local processes (a private Dask cluster on 127.0.0.1; needs "
            "struckdown[dask]): one journal, one progress bar, and -j and --max-requests cap the whole job. "
            "Default 1: this process. See docs/performance.md.",
            show_default=False,
        ),
    ] = None,
    max_requests: Annotated[
        Optional[int],
        typer.Option(
            "--max-requests",
            min=1,
            help="Most model requests in flight at once across all rows (a row's independent segments, "
            "<together> members and guards run beside each other). Default: 2 x -j.",
            show_default=False,
        ),
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue from OUTPUT's journal: rows it holds as done are not run again.")
    ] = False,
    model: ModelOpt = None,
    tools: ToolsOpt = None,
    no_cache: NoCacheOpt = False,
    keep_journal: Annotated[
        bool, typer.Option("--keep-journal", help="Keep the journal even when every row succeeded.")
    ] = False,
    include_path: IncludeOpt = None,
    engine: Annotated[
        str,
        typer.Option(
            "--engine",
            metavar="local|dask",
            help="Where rows run: local (this process) or dask (a Dask cluster; needs struckdown[dask]). "
            "With dask, -j caps the rows running at once across the cluster, and --tools is a .py file "
            "(shipped to the workers) or a module importable there. See docs/distributed.md.",
        ),
    ] = "local",
    address: Annotated[
        Optional[str],
        typer.Option(
            "--address",
            metavar="tcp://HOST:PORT",
            help="Dask scheduler to use with --engine dask. Default: a private cluster of --workers (2) local "
            "worker processes on 127.0.0.1.",
            show_default=False,
        ),
    ] = None,
    retries: Annotated[
        int,
        typer.Option(
            "--retries",
            min=0,
            help="With --engine dask: run a row again up to this many times after a transient provider "
            "error (rate limit, connection error, 5xx).",
        ),
    ] = 2,
) -> None:
    """Run a template over many rows, in parallel, journaling each finished row.

    Each row's columns are the template's context. The output has the input columns plus one column per answer, in input order, and `_error` for failed rows.

    Every finished row is appended at once to OUTPUT.journal.jsonl, so Ctrl-C or a crash loses nothing: run again with --resume.
    """  # noqa: E501 - typer keeps line breaks inside a paragraph
    with reporting_errors():
        from .batch import BatchRequest, batch_command
        from .errors import CliError

        if engine not in ("local", "dask"):
            raise CliError(f"--engine must be local or dask, not {engine!r}")
        if engine != "dask" and address is not None:
            raise CliError("--address is for --engine dask")
        if address is not None and workers is not None:
            raise CliError("--workers starts a private cluster; with --address the cluster's workers run the rows")
        code = batch_command(
            BatchRequest(
                template=template,
                inputs=inputs,
                output=output,
                jobs=jobs,
                max_requests=max_requests,
                resume=resume,
                model=model,
                tools_file=tools,
                cache=not no_cache,
                keep_journal=keep_journal,
                include_paths=include_path or (),
                engine=engine,
                address=address,
                retries=retries,
                workers=workers,
            )
        )
    raise typer.Exit(code)


cache_app = typer.Typer(
    name="cache",
    help="The response cache on disk (STRUCKDOWN_CACHE_DIR, default ~/.cache/struckdown).",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(cache_app)

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


# Editor support: each command's flags live in its own module (light to import).
from . import lsp_cmd, preview  # noqa: E402

app.command("preview", epilog="Exit codes: 0 ok, 2 unreadable template.")(preview.command)
app.command("lsp")(lsp_cmd.command)

from .web_cmd import edit, serve  # noqa: E402 - the playground (struckdown[web]); its imports are lazy

app.command()(edit)
app.command()(serve)
