"""`sd run` (and `sd chat`): one template, one context, shown live."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..fileio import check_writable
from . import approval_cmd
from .costs import RunRecorder, otel
from .display import Line, RunDisplay, answer_order, as_rich, run_console, stats_line
from .errors import EXIT_HALTED, EXIT_OK, CliError, interrupts_end_the_process
from .io import dumps, load_context, write_json
from .keywords import run_keywords
from .loading import load_program
from .model_notes import show_config_models


@dataclass
class RunRequest:
    template: Path
    context_file: Path | None = None
    pairs: Sequence[str] = ()
    flags: Mapping[str, Any] = field(default_factory=dict)  # the RUN_FLAGS given (cli/options.py)
    output: Path | None = None
    as_json: bool = False
    stream: bool = True
    approve: str | None = None  # SPEC §12: all | none decides every call that needs approval
    pause_to: Path | None = None  # pause instead: the state goes to this file, exit code 4
    source: str | None = None  # the template's text itself (`sd chat "… [[x]]"`); `template` then only names it
    answers_only: bool = False  # -o writes {slot: answer}, as 0.x's `sd chat -o` did (not the run record)

    @property
    def include_paths(self) -> Sequence[Path]:
        return tuple(self.flags.get("include_path") or ())


def run_cli(
    *, template: Path, context: Path | None, set_: Sequence[str] | None, output: Path | None, as_json: bool,
    stream: bool, approve: str | None, pause_to: Path | None, type_files: list[Path] | None,
    flags: Mapping[str, Any],
) -> int:
    """The body of `sd run` as its parameters arrive, from the typer app (app.py) or from
    its fast path (fast/run.py); returns the exit code."""
    if type_files:
        from .compat.options import load_type_files  # imports typer (the flag's declaration)

        load_type_files(type_files)
    return run_command(
        RunRequest(
            template=template, context_file=context, pairs=set_ or (), flags=flags, output=output,
            as_json=as_json, stream=stream, approve=approve, pause_to=pause_to,
        )
    )


def run_command(request: RunRequest) -> int:
    """Run the template; return the exit code (errors propagate to `reporting_errors`)."""
    program = load_program(request.template, request.include_paths) if request.source is None else load_text(request)
    context = load_context(request.context_file, request.pairs)
    stop_at = request.flags.get("stop_at")
    if stop_at is not None and stop_at not in program.keys:
        known = ", ".join(program.keys) or "none"
        raise CliError(f"--stop-at {stop_at!r} is not a slot of {request.template} (slots: {known})")
    rerun_from = request.flags.get("rerun_from")
    if rerun_from is not None and rerun_from not in program.keys:
        known = ", ".join(program.keys) or "none"
        raise CliError(f"--rerun-from {rerun_from!r} is not a slot of {request.template} (slots: {known})")
    if rerun_from is not None and request.flags.get("journal") is None:
        raise CliError("--rerun-from re-runs part of a journaled run: give --journal FILE too")
    if request.output is not None:
        check_writable(request.output)  # before any paid request
    model = request.flags.get("model")
    if program.slots():
        show_config_models(program, model)
    # --json keeps stdout for the answers alone; the live display moves to stderr.
    console = run_console(sys.stderr if request.as_json else sys.stdout)
    guards = {slot.key: program.plans[slot].when for slot in program.slots() if slot.is_guard}
    display = RunDisplay(console, guards, program.keys, answer_order(program))
    approve = approval_cmd.decider(request.approve, request.pause_to, display)
    _refuse_escalate_approve(program, approve)
    started = time.perf_counter()
    recorder = RunRecorder()
    with otel(bool(request.flags.get("otel"))) as provider:
        keywords = {**run_keywords(request.flags, instrument=provider), "model": model}
        try:
            result = asyncio.run(_drive(program, context, display, request, recorder=recorder, approve=approve, **keywords))
            ended = time.perf_counter()  # the run's time: exporting its traces (--otel) comes after
        except BaseException as exc:
            failed_summary(display, recorder, time.perf_counter() - started)
            if request.output is not None and not request.answers_only:  # the answers so far, every request, the error
                write_json(request.output, recorder.record(exc))
            raise
    display.summary(result, ended - started)
    if request.output is not None:
        write_json(request.output, result.to_dict() if request.answers_only else run_record(result))
    if request.as_json:
        sys.stdout.write(dumps(result.to_dict()) + "\n")
        sys.stdout.flush()
    if result.paused is not None and request.pause_to is not None:
        flags = _resume_flags(request, model)
        approval_cmd.write_pause(request.pause_to, result.paused, flags)
        return approval_cmd.report_pause(result.paused, request.pause_to, flags)
    return EXIT_HALTED if result.halted is not None else EXIT_OK


def _refuse_escalate_approve(program: Any, approve: Any) -> None:
    """SPEC §29: `escalate=approve` with nobody to answer (no terminal and no --pause-to,
    or --approve none) would fail the slot at its first less confident answer: refused
    before any call, naming both."""
    from ..run.confidence import asks_a_person

    slots = asks_a_person(program) if approve is False or isinstance(approve, approval_cmd.DenyWithNote) else []
    if not slots:
        return
    why = "--approve none rejects every answer" if approve is False else "there is no terminal to ask"
    raise CliError(
        f"slot {slots[0]!r} has escalate=approve and {why}: give --pause-to FILE (decide later with sd resume), "
        "--approve all (keep the model's answers) or run it on a terminal"
    )


def _resume_flags(request: RunRequest, model: Any) -> dict[str, Any]:
    """What `sd resume` needs besides the options the state records: the tools file (its
    functions cannot be recorded), the model string as given, and how the run was shown."""
    tools = request.flags.get("tools")
    return {
        "model": model if isinstance(model, str) else request.flags.get("model"),
        "tools": str(Path(tools).resolve()) if tools is not None else None,
        "include_paths": [str(p) for p in request.include_paths],
        "stream": request.stream,
        "cache": not request.flags.get("no_cache"),
        "stop_at": request.flags.get("stop_at"),
        # SPEC §29: the resume command printed after a pause names the MCP servers again
        "mcp": [str(spec) for spec in request.flags.get("mcp") or ()],
        "mcp_config": str(Path(request.flags["mcp_config"]).resolve()) if request.flags.get("mcp_config") else None,
        "fallback": [str(name) for name in request.flags.get("fallback") or ()],
    }


def load_text(request: RunRequest) -> Any:
    """A template given as text (includes resolve against the working directory)."""
    from ..environment import default_environment
    from .loading import load_beside

    assert request.source is not None
    load_beside(None)  # actions/ and types/ of the working directory, as 0.x's CLI loaded them
    return default_environment().parse(request.source, include_paths=request.include_paths)


async def _drive(
    program: Any, context: dict[str, Any], display: RunDisplay, request: RunRequest, *,
    approve: Any = None, recorder: RunRecorder | None = None, **keywords: Any,
) -> Any:
    from ..api import complete_incremental_async
    from ..heap import settle

    result = None

    def keep_output() -> None:  # docs/cli.md: an interrupted run is still written
        if request.output is not None and recorder is not None and not request.answers_only:
            write_json(request.output, {**recorder.record(KeyboardInterrupt()), "error": "interrupted", "interrupted": True})

    with interrupts_end_the_process(before_exit=keep_output), display:
        async for event in complete_incremental_async(
            program,
            context,
            stream=request.stream,
            on_halt="return",
            approve=approve,
            **keywords,
        ):
            settle()  # start-up is over (heap.py)
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
    from ..batch.output import confidence_of

    record.update(confidence_of(result))  # SPEC §27: {"confidence": {slot: c}, "escalated": {slot: model}}
    if getattr(result, "paused", None) is not None:
        record["paused"] = [r.to_dict() for r in result.paused.requests]  # SPEC §12: awaiting approval
    return record


def failed_summary(display: RunDisplay, recorder: RunRecorder, elapsed_s: float) -> None:
    """A failed run still shows what it spent (every request it made)."""
    if recorder.partial is not None:
        display.console.file.flush()
        display.console.print(as_rich(Line(f"failed · {stats_line(recorder.partial, elapsed_s)}", style="dim")))
