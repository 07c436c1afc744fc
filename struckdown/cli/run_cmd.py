"""`sd run` (and `sd chat`): one template, one context, shown live."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import loading
from .display import RunDisplay, make_console
from .errors import EXIT_HALTED, EXIT_OK, CliError
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
    program = load_program(request.template, request.include_paths)
    context = load_context(request.context_file, request.pairs)
    if request.stop_at is not None and request.stop_at not in program.keys:
        known = ", ".join(program.keys) or "none"
        raise CliError(f"--stop-at {request.stop_at!r} is not a slot of {request.template} (slots: {known})")
    tools = load_tools(request.tools_file)
    model = loading.resolve_cli_model(request.model)  # via the module: tests patch it
    if program.slots():
        show_config_models(program, model)
    # --json keeps stdout for the answers alone; the live display moves to stderr.
    console = make_console(sys.stderr if request.as_json else sys.stdout)
    guards = {slot.key: program.plans[slot].when for slot in program.slots() if slot.is_guard}
    display = RunDisplay(console, guards, program.keys)
    started = time.perf_counter()
    result = asyncio.run(_drive(program, context, display, request, model=model, tools=tools))
    display.summary(result, time.perf_counter() - started)
    if request.output is not None:
        write_json(request.output, run_record(result))
    if request.as_json:
        sys.stdout.write(dumps(result.to_dict()) + "\n")
        sys.stdout.flush()
    return EXIT_HALTED if result.halted is not None else EXIT_OK


async def _drive(
    program: Any, context: dict[str, Any], display: RunDisplay, request: RunRequest, *, model: Any, tools: list[Any]
) -> Any:
    from ..api import complete_incremental_async

    result = None
    with display:
        async for event in complete_incremental_async(
            program,
            context,
            stream=request.stream,
            model=model,
            tools=tools,
            on_halt="return",
            cache=request.cache,
            stop_at=request.stop_at,
            **resilience_options(request.retries, request.max_tokens, request.fallback),
        ):
            display.handle(event)
            if event.type == "processing_complete":
                result = event.result
    if result is None:  # the engine always ends with ProcessingComplete or an error
        raise CliError("the run ended without a result", code=1)
    return result


def run_record(result: Any) -> dict[str, Any]:
    """What `-o out.json` holds."""
    halted = result.halted
    return {
        "answers": result.to_dict(),
        "usage": result.usage.to_dict(),
        "halted": None if halted is None else {"slot": halted.slot, "reason": halted.reason},
    }
