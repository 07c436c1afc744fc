"""Command-line flags: every flag that sets a run keyword is declared once here (SPEC §22).

`RUN_FLAGS` is the one flag table: each flag's typer declaration and the run keyword it
sets (`run_options.OPTIONS[...].flags` names the same flags; a test holds the two
together). A command takes the flags it wants with `@run_flags("model", "retries", …)`,
which adds them to its signature and hands it their values as `flags=`; `run_keywords`
(cli/keywords.py) turns those values into the `complete…` keywords, in one place, for
`sd run`, `sd chat`, `sd batch` and `sd resume` alike.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Optional

import typer


@dataclass(frozen=True)
class Flag:
    option: str  # the run keyword it sets (a row of run_options.OPTIONS)
    annotation: Any  # typer's declaration: Annotated[type, typer.Option(...)]
    default: Any = None


McpOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "--mcp",
        metavar="URL|COMMAND",
        help="An MCP server whose tools agent slots may use (repeatable): a URL (streamable HTTP), or a .py "
        "file or a command run over stdio. NAME=URL|COMMAND names it; its tools are NAME_tool.",
        show_default=False,
    ),
]
McpConfigOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--mcp-config", metavar="FILE", help="MCP servers from an mcp.json (the Claude Desktop format).",
        show_default=False,
    ),
]
TemplateArg = Annotated[Path, typer.Argument(help="The .sd template.", show_default=False)]
IncludeOpt = Annotated[
    Optional[list[Path]],
    typer.Option("--include-path", "-I", help="Extra directory for <include src=…/> (repeatable).", show_default=False),
]
ModelOpt = Annotated[
    Optional[str],
    typer.Option(
        "--model",
        "-m",
        "--model-name",  # 0.x's spelling of sd chat
        help="pydantic-ai model string (openai-chat:gpt-4o-mini, ollama:…) or 'test' for a dry run. "
        "Default: STRUCKDOWN_MODEL / DEFAULT_LLM, or LLM_API_BASE (+ LLM_API_KEY).",
        show_default=False,
    ),
]
ToolsOpt = Annotated[
    Optional[Path],
    typer.Option("--tools", "-t", help="Python file whose public functions are the agent tools.", show_default=False),
]

#: The one flag table: parameter name → the flag. Adding a flag that reaches the engine is
#: a row here plus its name in the option's `flags=` (docs/architecture.md shows it).
RUN_FLAGS: Mapping[str, Flag] = {
    "model": Flag("model", ModelOpt),
    "tools": Flag("tools", ToolsOpt),
    "no_cache": Flag("cache", Annotated[bool, typer.Option("--no-cache", help="Do not use the response cache.")], False),
    "no_prompt_cache": Flag("prompt_cache", Annotated[bool, typer.Option(
        "--no-prompt-cache", help="Ask the provider for no prompt caching (docs/caching.md)."
    )], False),
    "no_loop_guard": Flag("loop_guard", Annotated[bool, typer.Option(
        "--no-loop-guard", help="Do not stop free-text answers that repeat themselves (docs/local-llm.md)."
    )], False),
    "stop_at": Flag("stop_at", Annotated[
        Optional[str], typer.Option("--stop-at", metavar="KEY", help="End the run after this slot.", show_default=False)
    ]),
    "retries": Flag("retries", Annotated[
        Optional[int],
        typer.Option(
            "--retries", min=0,
            help="Retries of a transient provider failure (rate limit, connection error, timeout, 5xx) per request, "
            "with exponential backoff. Default: STRUCKDOWN_MAX_RETRIES, else 3. With --engine dask or --workers "
            "also how many times a row runs again after such a failure remains (default 2).",
            show_default=False,
        ),
    ]),
    "max_tokens": Flag("settings", Annotated[
        Optional[int],
        typer.Option(
            "--max-tokens", min=1,
            help="Output cap of every request (a slot's own max_tokens= wins). Default: 1024 for free text and single "
            "values, 4096 for structured answers, 16384 with thinking.",
            show_default=False,
        ),
    ]),
    "seed": Flag("settings", Annotated[
        Optional[int],
        typer.Option("--seed", help="Sampling seed of every request (a slot's own seed= wins).", show_default=False),
    ]),
    "thinking": Flag("settings", Annotated[
        Optional[str],
        typer.Option(
            "--thinking", metavar="off|minimal|low|medium|high|xhigh",
            help="Reasoning effort of every request, where the model has it (a slot's own thinking= wins).",
            show_default=False,
        ),
    ]),
    "fallback": Flag("fallback", Annotated[
        Optional[list[str]],
        typer.Option(
            "--fallback", metavar="MODEL",
            help="A model a slot starts again on when it cannot finish on its own (repeatable, tried in order).",
            show_default=False,
        ),
    ]),
    "tool_timeout": Flag("tool_timeout", Annotated[
        Optional[float],
        typer.Option(
            "--tool-timeout", metavar="SECONDS", min=0.001,
            help="Seconds one tool call may take; the model reads a timeout message instead (default 60). "
            "A slot's tool_timeout= may only lower it.",
            show_default=False,
        ),
    ]),
    "max_seconds": Flag("max_seconds", Annotated[
        Optional[float],
        typer.Option(
            "--max-seconds", metavar="SECONDS", min=0.001,
            help="Seconds one slot's answer may take: at the deadline a free-text answer ends as truncated "
            "(a runaway on a slow local model). A slot's max_seconds= may only lower it.",
            show_default=False,
        ),
    ]),
    "on_truncate": Flag("on_truncate", Annotated[
        Optional[str],
        typer.Option(
            "--on-truncate", metavar="keep|error",
            help="An answer cut at its token limit: keep it (flagged truncated; the default) or fail the slot.",
            show_default=False,
        ),
    ]),
    "include_path": Flag("include_paths", IncludeOpt),
    "strict": Flag("strict_undefined", Annotated[
        bool,
        typer.Option(
            "--strict",
            help="A variable the template reads that is neither in the context nor answered before is an error "
            "(before any model call), not a warning.",
        ),
    ], False),
    "mcp": Flag("mcp", McpOpt),
    "mcp_config": Flag("mcp", McpConfigOpt),
    "prices": Flag("prices", Annotated[
        Optional[Path],
        typer.Option(
            "--prices", metavar="FILE",
            help='Model prices, JSON or YAML: {"model-name": {"input": USD, "output": USD}} per million tokens '
            "(keys: the model name, or provider:name). Overrides and adds to genai-prices.",
            show_default=False,
        ),
    ]),
    "max_cost": Flag("max_cost", Annotated[
        Optional[float],
        typer.Option(
            "--max-cost", metavar="USD",
            help="Stop once this many US dollars are spent (sd batch: the whole batch's budget; rows not run are "
            "recorded as such and --resume runs them later).",
            show_default=False,
        ),
    ]),
    "otel": Flag("instrument", Annotated[
        bool,
        typer.Option(
            "--otel",
            help="Export OpenTelemetry traces over OTLP (OTEL_EXPORTER_OTLP_* variables; needs struckdown[otel]).",
        ),
    ], False),
    "journal": Flag("journal", Annotated[
        Optional[Path],
        typer.Option(
            "--journal", metavar="FILE",
            help="Journal tool effects in FILE: run again (or resume) with the same FILE and no tool call that "
            "finished runs twice; one that was cut off is reconciled or waits for approval (docs/durable.md).",
            show_default=False,
        ),
    ]),
    "rerun_from": Flag("rerun_from", Annotated[
        Optional[str],
        typer.Option(
            "--rerun-from", metavar="SLOT",
            help="With --journal: run this slot and every slot after it again; the slots before it are answered "
            "from the journal when their requests are unchanged (docs/durable.md).",
            show_default=False,
        ),
    ]),
    "private": Flag("private", Annotated[
        Optional[str],
        typer.Option(
            "--private", metavar="COL,…",
            help="Context names (batch: columns) whose values are private: never sent to a remote model or in "
            "an external tool's arguments; refused before any call (docs/flow.md).",
            show_default=False,
        ),
    ]),
    "untrusted": Flag("untrusted", Annotated[
        Optional[str],
        typer.Option(
            "--untrusted", metavar="COL,…",
            help="Context names (batch: columns) whose values are untrusted: never in the request of a slot that "
            "can call a write tool; refused before any call (docs/flow.md).",
            show_default=False,
        ),
    ]),
    "local_models": Flag("local_models", Annotated[
        Optional[str],
        typer.Option(
            "--local-models", metavar="NAMES",
            help="Model names or base URLs counted as local for --private (comma-separated; docs/flow.md).",
            show_default=False,
        ),
    ]),
    "remote_models": Flag("remote_models", Annotated[
        Optional[str],
        typer.Option(
            "--remote-models", metavar="NAMES",
            help="Model names or base URLs counted as remote for --private, e.g. a proxy on localhost (docs/flow.md).",
            show_default=False,
        ),
    ]),
    "max_requests": Flag("max_requests", Annotated[
        Optional[int],
        typer.Option(
            "--max-requests", min=1,
            help="Most model requests in flight at once (sd batch: across all rows; a row's independent segments, "
            "<together> members and guards run beside each other). Default for sd batch: 2 x -j.",
            show_default=False,
        ),
    ]),
    # the batch calls' own keywords (run_options.BATCH_OPTIONS): sd batch's flags
    "jobs": Flag("concurrency", Annotated[
        Optional[int],
        typer.Option(
            "--jobs", "-j", min=1,
            help="Rows run at the same time. Default: 8; with --provider-batch, the batch size.",
            show_default=False,
        ),
    ], None),
    "workers": Flag("executor", Annotated[
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
    ], None),
    "engine": Flag("executor", Annotated[
        str,
        typer.Option(
            "--engine",
            metavar="local|dask",
            help="Where rows run: local (this process) or dask (a Dask cluster; needs struckdown[dask]). "
            "With dask, -j caps the rows running at once across the cluster, and --tools is a .py file "
            "(shipped to the workers) or a module importable there. See docs/distributed.md.",
        ),
    ], "local"),
    "address": Flag("executor", Annotated[
        Optional[str],
        typer.Option(
            "--address",
            metavar="tcp://HOST:PORT",
            help="Dask scheduler to use with --engine dask. Default: a private cluster of --workers (2) local "
            "worker processes on 127.0.0.1.",
            show_default=False,
        ),
    ], None),
    "provider_batch": Flag("provider_batch", Annotated[
        bool,
        typer.Option(
            "--provider-batch",
            help="Send the model requests through the provider's batch API (OpenAI, Anthropic, Google): about "
            "half the price, results in minutes to a day. Rows advance slot by slot together; --resume "
            "waits for batches already submitted. See docs/batch.md.",
        ),
    ], False),
    "batch_wait": Flag("provider_batch", Annotated[
        Optional[float],
        typer.Option(
            "--batch-wait",
            min=0,
            metavar="SECONDS",
            help="With --provider-batch: the longest a queued request waits for others before its batch is "
            "submitted (a batch also goes when full, or when every row waits for it). 0: no time limit. "
            "Default: 30.",
            show_default=False,
        ),
    ], None),
    "batch_size": Flag("provider_batch", Annotated[
        Optional[int],
        typer.Option(
            "--batch-size",
            min=1,
            help="With --provider-batch: the most requests in one batch (the provider's limit caps it). "
            "Default: 1000.",
            show_default=False,
        ),
    ], None),
}

#: The flags every command that runs a template takes (sd run, sd batch, sd resume, sd chat).
RUN_COMMAND_FLAGS = (
    "model", "tools", "no_cache", "no_prompt_cache", "retries", "max_tokens", "seed", "thinking", "fallback",
    "tool_timeout", "max_seconds", "on_truncate", "include_path", "strict", "mcp", "mcp_config", "prices", "max_cost",
    "otel", "no_loop_guard", "private", "untrusted", "local_models", "remote_models",
)


#: The flags of the batch keywords (`run_options.BATCH_OPTIONS`), sd batch's own.
BATCH_COMMAND_FLAGS = ("jobs", "workers", "engine", "address", "provider_batch", "batch_wait", "batch_size")


def run_flags(*names: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Add these flags of `RUN_FLAGS` to a command: typer sees them in its signature, and the
    command receives their values together as `flags=` (a dict by parameter name)."""
    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        own = inspect.signature(command)
        hints = {k: v for k, v in typing.get_type_hints(command, include_extras=True).items() if k != "flags"}
        params = [p.replace(annotation=hints.get(p.name, p.annotation)) for p in own.parameters.values()
                  if p.name != "flags"]
        for name in names:
            flag = RUN_FLAGS[name]
            params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=flag.default,
                                            annotation=flag.annotation))
            hints[name] = flag.annotation

        def wrapper(**kwargs: Any) -> Any:
            flags = {name: kwargs.pop(name) for name in names}
            return command(flags=flags, **kwargs)

        wrapper.__name__, wrapper.__doc__, wrapper.__module__ = command.__name__, command.__doc__, command.__module__
        wrapper.__signature__ = own.replace(parameters=params)  # type: ignore[attr-defined]
        wrapper.__annotations__ = hints
        return wrapper
    return decorate
