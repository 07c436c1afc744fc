"""`sd run` (and `sd chat`): one template, one context, shown live."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import approval_cmd, loading
from .costs import RunRecorder, budget_options, otel
from .display import RunDisplay, answer_order, make_console, stats_line
from .errors import EXIT_HALTED, EXIT_OK, CliError, interrupts_end_the_process
from .io import dumps, load_context, write_json
from .loading import load_program, load_tools
from .model_notes import show_config_models


@dataclass
class RunRequest:
    template: Path
    context_file: Path | None = None
    pairs: Sequence[str] = ()
    model: str | None = None
    tools_file: Path | None = None
    output: Path | None = None
    as_json: bool = False
    stream: bool = True
    cache: bool = True
    stop_at: str | None = None
    include_paths: Sequence[Path] = field(default_factory=tuple)
    strict: bool = False  # undefined variables are an error, not a warning
    mcp: Sequence[str] = ()  # --mcp servers
    mcp_config: Path | None = None  # --mcp-config FILE
    approve: str | None = None  # SPEC §12: all | none decides every call that needs approval
    pause_to: Path | None = None  # pause instead: the state goes to this file, exit code 4
    prices_file: Path | None = None  # --prices FILE
    max_cost: float | None = None  # --max-cost USD
    otel: bool = False  # --otel
    source: str | None = None  # the template's text itself (`sd chat "… [[x]]"`); `template` then only names it
    retries: int | None = None  # SPEC §14; None: STRUCKDOWN_MAX_RETRIES or 3
    max_tokens: int | None = None  # the output cap of every request (a slot's own max_tokens= wins)
    fallback: Sequence[str] = ()


def resilience_options(retries: int | None, max_tokens: int | None, fallback: Sequence[str]) -> dict[str, Any]:
    """The `complete…` keywords of --retries, --max-tokens and --fallback (none when not given)."""
    options: dict[str, Any] = {}
    if retries is not None:
        options["retries"] = retries
    if max_tokens is not None:
        options["settings"] = {"max_tokens": max_tokens}
    if fallback:
        options["fallback"] = list(fallback)
    return options


def run_command(request: RunRequest) -> int:
    """Run the template; return the exit code (errors propagate to `reporting_errors`)."""
    program = load_program(request.template, request.include_paths) if request.source is None else load_text(request)
    context = load_context(request.context_file, request.pairs)
    if request.stop_at is not None and request.stop_at not in program.keys:
        known = ", ".join(program.keys) or "none"
        raise CliError(f"--stop-at {request.stop_at!r} is not a slot of {request.template} (slots: {known})")
    tools = load_tools(request.tools_file)
    mcp = loading.load_mcp(request.mcp, request.mcp_config)
    model = loading.resolve_cli_model(request.model)  # via the module: tests patch it
    if program.slots():
        show_config_models(program, model)
    # --json keeps stdout for the answers alone; the live display moves to stderr.
    console = make_console(sys.stderr if request.as_json else sys.stdout)
    guards = {slot.key: program.plans[slot].when for slot in program.slots() if slot.is_guard}
    display = RunDisplay(console, guards, program.keys, answer_order(program))
    approve = approval_cmd.decider(request.approve, request.pause_to, display)
    started = time.perf_counter()
    recorder = RunRecorder()
    with otel(request.otel) as provider:
        extra = budget_options(request.prices_file, request.max_cost, provider)
        try:
            result = asyncio.run(
                _drive(
                    program, context, display, request, model=model, tools=tools, recorder=recorder,
                    mcp=mcp, approve=approve, **extra,
                )
            )
        except BaseException as exc:
            failed_summary(display, recorder, time.perf_counter() - started)
            if request.output is not None:  # the answers so far, every request made, and the error
                write_json(request.output, recorder.record(exc))
            raise
    display.summary(result, time.perf_counter() - started)
    if request.output is not None:
        write_json(request.output, run_record(result))
    if request.as_json:
        sys.stdout.write(dumps(result.to_dict()) + "\n")
        sys.stdout.flush()
    if result.paused is not None and request.pause_to is not None:
        approval_cmd.write_pause(request.pause_to, result.paused, _resume_flags(request, model))
        return approval_cmd.report_pause(result.paused, request.pause_to)
    return EXIT_HALTED if result.halted is not None else EXIT_OK


def _resume_flags(request: RunRequest, model: Any) -> dict[str, Any]:
    """What `sd resume` needs to run the paused template again as this run did."""
    return {
        "model": model if isinstance(model, str) else request.model,
        "tools": str(request.tools_file.resolve()) if request.tools_file is not None else None,
        "include_paths": [str(p) for p in request.include_paths],
        "stream": request.stream,
        "cache": request.cache,
        "stop_at": request.stop_at,
    }


def load_text(request: RunRequest) -> Any:
    """A template given as text (includes resolve against the working directory)."""
    from ..environment import default_environment
    from .loading import load_beside

    assert request.source is not None
    load_beside(None)  # actions/ and types/ of the working directory, as 0.x's CLI loaded them
    return default_environment().parse(request.source, include_paths=request.include_paths)


async def _drive(
    program: Any, context: dict[str, Any], display: RunDisplay, request: RunRequest, *, model: Any, tools: list[Any],
    mcp: list[str] | None = None, approve: Any = None, recorder: RunRecorder | None = None, **extra: Any,
) -> Any:
    from ..api import complete_incremental_async

    result = None
    with interrupts_end_the_process(), display:
        async for event in complete_incremental_async(
            program,
            context,
            stream=request.stream,
            model=model,
            tools=tools,
            on_halt="return",
            cache=request.cache,
            stop_at=request.stop_at,
            strict_undefined=request.strict,
            mcp=mcp,
            approve=approve,
            **extra,
            **resilience_options(request.retries, request.max_tokens, request.fallback),
        ):
            display.handle(event)
            if recorder is not None:
                recorder.see(event)
            if event.type == "processing_complete":
                result = event.result
            elif event.type == "processing_error":  # the generator ends quietly after it: the CLI reports it
                raise event.error
    if result is None:  # the engine always ends with ProcessingComplete or an error
        raise CliError("the run ended without a result", code=1)
    return result


def run_record(result: Any) -> dict[str, Any]:
    """What `-o out.json` holds."""
    halted = result.halted
    record = {
        "answers": result.to_dict(),
        "usage": result.usage.to_dict(),
        "halted": None if halted is None else {"slot": halted.slot, "reason": halted.reason},
    }
    if getattr(result, "paused", None) is not None:
        record["paused"] = [r.to_dict() for r in result.paused.requests]  # SPEC §12: awaiting approval
    return record


def failed_summary(display: RunDisplay, recorder: RunRecorder, elapsed_s: float) -> None:
    """A failed run still shows what it spent (every request it made)."""
    if recorder.partial is not None:
        from rich.text import Text

        display.console.file.flush()
        display.console.print(Text(f"failed · {stats_line(recorder.partial, elapsed_s)}", style="dim"))
