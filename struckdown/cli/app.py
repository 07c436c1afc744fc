"""The `sd` typer app: flags and help only; each command's work lives in its own module.

Nothing heavy is imported here, so `sd --help` stays fast: the command modules
(and pydantic-ai with them) load when a command runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from .compat.options import Batch0xCommand, TypeFileOpt
from .errors import reporting_errors
from .options import BATCH_COMMAND_FLAGS, RUN_COMMAND_FLAGS, IncludeOpt, McpConfigOpt, McpOpt, TemplateArg, ToolsOpt, run_flags

app = typer.Typer(
    name="sd",
    help="struckdown: run markdown templates whose [[slots]] a language model fills in.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: `sd --help` need not import rich's markdown and syntax stack
    context_settings={"help_option_names": ["-h", "--help"]},
)

EXIT_CODES = (
    "Exit codes: 0 ok, 1 model or runtime error, 2 template or input error, 3 halted by a guard, "
    "4 awaiting approval (--pause-to)."
)

ContextOpt = Annotated[
    Optional[Path], typer.Option("--context", help="Context variables from a JSON or YAML file.", show_default=False)
]
SetOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "-c",
        "--set",
        metavar="KEY=VALUE",
        help="Set a context variable (repeatable; overrides --context). VALUE is JSON if it parses, else text; "
        "@PATH reads a file: an image or document is sent as such, a text file as its text.",
        show_default=False,
    ),
]
ApproveOpt = Annotated[
    Optional[str],
    typer.Option(
        "--approve",
        metavar="all|none",
        help="Decide every tool call that needs approval: all allows them, none denies them. "
        "Default: ask on a terminal, else none (with a note).",
        show_default=False,
    ),
]


def _version(value: bool) -> None:
    if value:
        from .._version import __version__

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
    from . import current_folder_importable

    current_folder_importable()  # `--model mymod:factory` finds ./mymod.py (main() did so already for `sd`)
    # Clamping notices arrive as warnings; the logger copy would print them twice.
    logger = logging.getLogger("struckdown")
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
    from .text import plain_warnings

    plain_warnings()


@app.command(epilog=EXIT_CODES)
@run_flags(*RUN_COMMAND_FLAGS, "stop_at", "journal", "rerun_from")
def run(
    template: TemplateArg,
    context: ContextOpt = None,
    set_: SetOpt = None,
    output: Annotated[
        Optional[Path],
        typer.Option("--output", "-o", help="Write {answers, usage, halted} to this JSON file.", show_default=False),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print only the answers as JSON on stdout (the display goes to stderr).")
    ] = False,
    stream: Annotated[bool, typer.Option("--stream/--no-stream", help="Stream tokens as they arrive.")] = True,
    approve: ApproveOpt = None,
    pause_to: Annotated[
        Optional[Path],
        typer.Option(
            "--pause-to",
            metavar="FILE",
            help="When a tool call needs approval, write the run's state to FILE and exit 4; "
            "continue with `sd resume FILE`.",
            show_default=False,
        ),
    ] = None,
    type_files: TypeFileOpt = None,
    *,
    flags: dict[str, Any],
) -> None:
    """Run a template against a context, showing answers, tool calls and guard verdicts live."""
    with reporting_errors():
        from .run_cmd import run_cli

        code = run_cli(
            template=template, context=context, set_=set_, output=output, as_json=as_json, stream=stream,
            approve=approve, pause_to=pause_to, type_files=type_files, flags=flags,
        )
    raise typer.Exit(code)


@app.command("resume", epilog=EXIT_CODES)
@run_flags(*RUN_COMMAND_FLAGS)
def resume_(
    state_file: Annotated[Path, typer.Argument(help="The state `sd run --pause-to FILE` wrote.", show_default=False)],
    approve: Annotated[
        Optional[list[str]],
        typer.Option("--approve", metavar="ID", help="Allow this paused call (repeatable).", show_default=False),
    ] = None,
    deny: Annotated[
        Optional[list[str]],
        typer.Option(
            "--deny", metavar="ID[=REASON]", help="Deny this paused call; the model reads REASON (repeatable).",
            show_default=False,
        ),
    ] = None,
    approve_all: Annotated[bool, typer.Option("--approve-all", help="Allow every call that needs approval.")] = False,
    deny_all: Annotated[bool, typer.Option("--deny-all", help="Deny every call that needs approval.")] = False,
    happened: Annotated[
        Optional[list[str]],
        typer.Option(
            "--happened", metavar="ID[=RESULT]",
            help="A paused call whose outcome is unknown did happen: it does not run again and the model reads "
            "RESULT as its result (repeatable). --approve ID says it did not happen (it runs now).",
            show_default=False,
        ),
    ] = None,
    answer: Annotated[
        Optional[list[str]],
        typer.Option("--answer", metavar="SLOT=VALUE", help="The answer of a slot paused by escalate=approve "
                     "(repeatable; --approve ID keeps the model's).", show_default=False),
    ] = None,
    output: Annotated[
        Optional[Path],
        typer.Option("--output", "-o", help="Write {answers, usage, halted} to this JSON file.", show_default=False),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print only the answers as JSON on stdout (the display goes to stderr).")
    ] = False,
    pause_to: Annotated[
        Optional[Path],
        typer.Option("--pause-to", metavar="FILE", help="Where a new pause goes. Default: STATE_FILE.",
                     show_default=False),
    ] = None,
    trust_state: Annotated[
        bool,
        typer.Option("--trust-state", help="Import the tools file, model factory and MCP servers the state names "
                     "(by default only what --tools / --model name)."),
    ] = False,
    *,
    flags: dict[str, Any],
) -> None:
    """Continue a run paused for approval: decide its calls, then run the rest.

    The state's signature is checked first; an edited state is refused. The run's options (model string, retries, budgets, prices, …) are the paused run's unless a flag says otherwise; its tools file and a model factory are imported only when --tools / --model name them again, and its fallback factories and MCP servers are used only with --trust-state (which also loads the tools file and model factory the state names). Calls left undecided are asked on a terminal. A later call that needs approval pauses the run again (exit 4), unless --approve-all or --deny-all decides it.
    """  # noqa: E501 - typer keeps line breaks inside a paragraph
    with reporting_errors():
        from .resume_cmd import ResumeRequest, resume_command

        code = resume_command(
            ResumeRequest(
                state_file=state_file,
                approve=approve or (),
                deny=deny or (),
                approve_all=approve_all,
                deny_all=deny_all,
                happened=happened or (),
                answer=answer or (),
                flags=flags,
                output=output,
                as_json=as_json,
                pause_to=pause_to,
                trust_state=trust_state,
            )
        )
    raise typer.Exit(code)


@app.command(epilog="Exit codes: 0 no errors (warnings allowed), 1 errors found, 2 unreadable input.")
def check(
    templates: Annotated[list[Path], typer.Argument(help="Templates to check.", show_default=False)],
    context: ContextOpt = None,
    set_: SetOpt = None,
    tools: ToolsOpt = None,
    include_path: IncludeOpt = None,
    mcp: McpOpt = None,
    mcp_config: McpConfigOpt = None,
    flow: Annotated[bool, typer.Option(
        "--flow", help="Check where --private and --untrusted values can go (SPEC §33, docs/flow.md).")] = False,
    private: Annotated[Optional[str], typer.Option(
        "--private", metavar="COL,…", help="With --flow: context names whose values are private.",
        show_default=False)] = None,
    untrusted: Annotated[Optional[str], typer.Option(
        "--untrusted", metavar="COL,…", help="With --flow: context names whose values are untrusted.",
        show_default=False)] = None,
    model: Annotated[Optional[str], typer.Option(
        "--model", "-m", help="With --flow: the model the slots run on (default: the configured one).",
        show_default=False)] = None,
    local_models: Annotated[Optional[str], typer.Option(
        "--local-models", metavar="NAMES", help="With --flow: model names or base URLs counted as local.",
        show_default=False)] = None,
    remote_models: Annotated[Optional[str], typer.Option(
        "--remote-models", metavar="NAMES", help="With --flow: model names or base URLs counted as remote.",
        show_default=False)] = None,
) -> None:
    """Parse and lint templates without calling a model: `path:line:col: error|warning: message`.

    Undefined variables are reported only when a context (--context or -c) is given.

    With --tools, --mcp or --mcp-config, every tool name in budget=, approve= and
    tool_choice= is checked against those tools (MCP servers are started to list theirs).

    With --flow, --private and --untrusted: where those values can go, refused as a run
    would refuse them (a private value sent to a remote model, untrusted text in a slot that
    can call a write tool, a private value in a write tool's arguments).
    """
    with reporting_errors():
        from .check import check_command, flow_args, mcp_tool_names

        listed = mcp_tool_names(mcp or (), mcp_config)
        labels = flow_args(flow, private, untrusted, model, local_models, remote_models)
        code = check_command(templates, context, set_ or (), tools, include_path or (), listed, labels)
    raise typer.Exit(code)


@app.command(epilog="Exit codes: 0 ok, 2 template error.")
def explain(
    template: TemplateArg,
    tools: ToolsOpt = None,
    include_path: IncludeOpt = None,
    cache: Annotated[bool, typer.Option(
        "--cache", help="Predict the provider's prompt caching per slot (docs/caching.md)."
    )] = False,
    rows: Annotated[Optional[Path], typer.Option(
        "--rows", metavar="FILE", help="With --cache: the batch's inputs (CSV, JSON, JSONL, XLSX).", show_default=False
    )] = None,
    model: Annotated[Optional[str], typer.Option(
        "--model", metavar="PROVIDER:NAME", help="With --cache: the model whose cache rule and prices apply.",
        show_default=False,
    )] = None,
    prices: Annotated[Optional[Path], typer.Option(
        "--prices", metavar="FILE", help="With --cache: prices per million tokens (JSON or YAML).", show_default=False
    )] = None,
) -> None:
    """Show the compiled plan: segments, slots, options, tools, guards and limits."""
    with reporting_errors():
        from .explain import explain_command

        code = explain_command(
            template, tools, include_path or (), cache=cache, rows=rows, model=model, prices=prices
        )
    raise typer.Exit(code)


@app.command(
    cls=Batch0xCommand,  # 0.18's `-h N` and `-t FILE.yaml` (compat_options.batch_0x_args)
    epilog="Exit codes: 0 every row ok, 1 a row failed (or a model error), 2 template or input error, "
    "3 no row failed but a guard halted some, 5 no row failed but some wait for a decision about a call whose "
    "outcome is unknown (--resume --decide), 130 interrupted (finished rows are in the journal).",
)
@run_flags(*RUN_COMMAND_FLAGS, "max_requests", *BATCH_COMMAND_FLAGS)
def batch(
    args: Annotated[
        Optional[list[str]],
        typer.Argument(
            metavar="TEMPLATE INPUT…",
            help="The template (a file, or with -i an inline prompt), then the inputs: CSV, XLSX, JSON (a list of "
            "objects), JSONL, text, PDF or DOCX files (one row each); '-' reads stdin (JSONL, JSON or text). "
            "With -p every argument is an input.",
            show_default=False,
        ),
    ] = None,
    prompt_file: Annotated[
        Optional[Path],
        typer.Option("--prompt", "-p", metavar="FILE", help="The template file (0.18's spelling).", show_default=False),
    ] = None,
    input_patterns: Annotated[
        Optional[list[str]],
        typer.Option(
            "--input", "-i", metavar="PATTERN",
            help="Inputs: a recursive glob ('data/**/*.txt'), a file, an http(s) URL or '-' (repeatable).",
            show_default=False,
        ),
    ] = None,
    output: Annotated[
        Optional[list[Path]],
        typer.Option(
            "--output",
            "-o",
            help="Output file: .jsonl, .json, .csv or .xlsx; repeat -o for several formats of one run. "
            "Default: JSONL on stdout (no journal).",
            show_default=False,
        ),
    ] = None,
    keep_inputs: Annotated[
        bool, typer.Option("--keep-inputs", "-k", help="Accepted for 0.18: input columns are always kept.")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or summary on stderr.")] = False,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue from OUTPUT's journal: rows it holds as done are not run again.")
    ] = False,
    keep_journal: Annotated[
        bool, typer.Option("--keep-journal", help="Keep the journal even when every row succeeded.")
    ] = False,
    decide: Annotated[
        Optional[str],
        typer.Option(
            "--decide", metavar="happened|not-happened|deny",
            help="With --resume: settle the calls whose outcome is unknown (a write tool cut off mid-call, "
            "no reconcile hook): happened (do not run it again), not-happened (run it now) or deny. "
            "See docs/durable.md.",
            show_default=False,
        ),
    ] = None,
    decide_row: Annotated[
        Optional[int],
        typer.Option("--row", min=1, metavar="N", help="With --decide: only row N's call (rows from 1).",
                     show_default=False),
    ] = None,
    approve: Annotated[
        str,
        typer.Option(
            "--approve", metavar="all|none", help="Decide every tool call that needs approval: all allows, none denies."
        ),
    ] = "none",
    file_columns: Annotated[
        Optional[list[str]],
        typer.Option(
            "--file-columns",
            metavar="COL[,COL…]",
            help="Columns holding paths (relative to the input file) of images or files to send as such "
            "(repeatable or comma-separated; a JSON list of paths gives a list). Only files under the input "
            "file's folder (or --files-root) are read.",
            show_default=False,
        ),
    ] = None,
    files_root: Annotated[
        Optional[Path],
        typer.Option(
            "--files-root",
            metavar="FOLDER",
            help="The folder --file-columns paths are relative to and may not leave (default: the input file's).",
            show_default=False,
        ),
    ] = None,
    head: Annotated[
        Optional[int],
        typer.Option("--head", min=1, metavar="N", help="Run only the first N rows, then project time, tokens and "
                     "cost for all rows.", show_default=False),
    ] = None,
    compare: Annotated[
        Optional[list[str]],
        typer.Option("--compare", "-c", metavar="COLUMN[=SLOT]", help="Score the answers against a ground-truth column: "
                     "accuracy, per-class precision/recall/F1, Cohen's kappa (needs struckdown[stats]; repeatable).",
                     show_default=False),
    ] = None,
    target_accuracy: Annotated[
        Optional[float],
        typer.Option("--target-accuracy", min=0.0, max=1.0, metavar="A", help="With --compare on a slot with "
                     "confidence=: the lowest min_confidence whose accepted rows reach accuracy A.",
                     show_default=False),
    ] = None,
    type_files: TypeFileOpt = None,
    *,
    flags: dict[str, Any],
) -> None:
    """Run a template over many rows, in parallel, journaling each finished row.

    Each row's columns are the template's context. The output has the input columns plus one column per answer, in input order, and `_error` for failed rows.

    Every finished row is appended at once to OUTPUT.journal.jsonl, so Ctrl-C or a crash loses nothing: run again with --resume.
    """  # noqa: E501 - typer keeps line breaks inside a paragraph
    with reporting_errors():
        from .batch import BatchRequest
        from .compat.options import load_type_files
        from .errors import CliError

        load_type_files(type_files)
        # the batch keywords' flags (cli/options.py BATCH_COMMAND_FLAGS); the others become run keywords
        jobs, workers, engine, address, provider_batch, batch_wait, batch_size = (
            flags.pop(name) for name in BATCH_COMMAND_FLAGS
        )
        if engine not in ("local", "dask"):
            raise CliError(f"--engine must be local or dask, not {engine!r}")
        if target_accuracy is not None and not compare:
            raise CliError("--target-accuracy needs --compare COLUMN[=SLOT] (the labels to reach it on)")
        if engine != "dask" and address is not None:
            raise CliError("--address is for --engine dask")
        if address is not None and workers is not None:
            raise CliError("--workers starts a private cluster; with --address the cluster's workers run the rows")
        from .compat.batch import run_0x

        code = run_0x(
            BatchRequest(
                template=Path(),
                inputs=(),
                jobs=jobs or ((batch_size or 1000) if provider_batch else 8),
                resume=resume,
                flags=flags,
                keep_journal=keep_journal,
                decide=decide,
                decide_row=decide_row,
                engine=engine,
                address=address,
                workers=workers,
                provider_batch=provider_batch,
                batch_wait=batch_wait,
                batch_size=batch_size,
                approve=approve,
                file_columns=file_columns or (),
                files_root=files_root,
                head=head,
                compare=compare or (),
                target_accuracy=target_accuracy,
            ),
            args or (), prompt_file, input_patterns or (), output or (), quiet,
        )
    raise typer.Exit(code)


from .cache_app import cache_app  # noqa: E402 - `sd cache stats|clear`

app.add_typer(cache_app)


# Editor support: each command's flags live in its own module (light to import).
# Commands of 0.x (SPEC §11), each in its own module.
from . import chat_cmd, eval_cmd, flat_cmd, graph_cmd, lsp_cmd, preview, selftest_cmd, types_cmd  # noqa: E402  # noqa: E402

app.command("chat", epilog=EXIT_CODES)(chat_cmd.command)
app.command(
    "eval", epilog="Exit codes: 0 every case passes at least --min-pass, 1 one does not, 2 bad input."
)(eval_cmd.command)
app.command("graph", epilog="Exit codes: 0 ok, 2 template error.")(graph_cmd.command)
app.command("flat", epilog="Exit codes: 0 ok, 2 template error.")(flat_cmd.command)
app.command("types", epilog="Exit codes: 0 ok, 2 template error.")(types_cmd.command)
app.command("test", epilog="Exit codes: 0 the model answered, 1 it did not (the reason is printed).")(selftest_cmd.command)

app.command("preview", epilog="Exit codes: 0 ok, 2 unreadable template.")(preview.command)
app.command("lsp")(lsp_cmd.command)

from .web_cmd import edit, serve  # noqa: E402 - the playground (struckdown[web]); its imports are lazy

app.command()(edit)
app.command()(serve)
