"""`sd resume FILE`: decide the calls a paused run waits for, and continue it (SPEC §12).

The state file is what `sd run … --pause-to FILE` wrote: the run's template, context and
finished slots, the paused calls, and the flags that run had (model, tools file). Its
signature is checked before anything else (issue 39 N3/N4), and only the tools file and
model factory the command line names are imported (`--trust-state`: the ones the state
names). A call that needs approval later in the resumed run pauses it again into FILE
(exit code 4), unless --approve-all or --deny-all decides every call.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .approval_cmd import decisions_from_flags, read_state_file, report_pause, write_pause
from .costs import RunRecorder, otel
from .display import RunDisplay, run_console
from .errors import EXIT_HALTED, EXIT_OK, CliError
from .io import dumps, write_json
from .keywords import run_keywords
from .loading import load_mcp, load_tools
from .run_cmd import failed_summary, run_record


@dataclass
class ResumeRequest:
    state_file: Path
    approve: Sequence[str] = ()
    deny: Sequence[str] = ()
    approve_all: bool = False
    deny_all: bool = False
    happened: Sequence[str] = ()  # ID[=RESULT]: a call of unknown outcome that did happen (SPEC §29)
    answer: Sequence[str] = ()  # SLOT=VALUE: the answer of a slot paused by escalate=approve (SPEC §27)
    flags: Mapping[str, Any] = field(default_factory=dict)  # the RUN_FLAGS given: they override the paused run's
    output: Path | None = None
    as_json: bool = False
    stream: bool | None = None
    pause_to: Path | None = None
    trust_state: bool = False  # load the tools file, model factory and MCP servers the state names


def resume_command(request: ResumeRequest) -> int:
    from ..approval.signing import claim_resume, verify_state
    from ..approval.state import ApprovalRequest, read_state
    from ..environment import default_environment

    state = read_state_file(request.state_file)
    try:
        verify_state(state)  # before anything the state names is imported or read
    except ValueError as exc:
        raise CliError(f"{request.state_file}: {exc}") from None
    cli = dict((state.get("extra") or {}).get("cli") or {})
    flags = request.flags
    _refuse_state_code(request, state)
    tools = load_tools(_tools_file(request, cli))
    model = _model(request, cli)
    requests = [
        ApprovalRequest(r["id"], r["slot"], r["tool_name"], dict(r["arguments"]), r.get("outcome"))
        for r in state["requests"]
    ]
    console = run_console(sys.stderr if request.as_json else sys.stdout)
    display = RunDisplay(console, {}, ())
    decisions = decisions_from_flags(request, requests, display)
    names = default_environment().engine_caches().toolbox(tuple(tools)).names
    try:
        read_state(state, decisions, tools=names, servers=_server_names(flags, state))  # before any model call
        claim_resume(state, f"sd resume {request.state_file}")  # SPEC §29: resumed once
    except ValueError as exc:
        raise CliError(f"{request.state_file}: {exc}" if "resumed already" in str(exc) else str(exc)) from None
    later: Any = True if request.approve_all else False if request.deny_all else None
    pause_to = request.pause_to or request.state_file
    include_paths = tuple(flags.get("include_path") or ()) or tuple(Path(p) for p in cli.get("include_paths") or ())
    stream = request.stream if request.stream is not None else bool(cli.get("stream", True))
    program = default_environment().parse(
        str(state["template"]), template_path=state.get("template_path"), include_paths=include_paths
    )
    finished = {item["key"] for item in state.get("finished") or ()}
    # guards that passed before the pause are not shown again: nothing waits for their verdict
    guards = {s.key: program.plans[s].when for s in program.slots() if s.is_guard and s.key not in finished}
    display = RunDisplay(console, guards, [k for k in program.keys if k not in finished])  # restored: not shown again
    started = time.perf_counter()
    # the options the state recorded stand unless a flag gives them again (Environment.resume)
    given = {k: v for k, v in flags.items() if k not in ("tools", "model", "include_path") and not (k == "no_cache" and not v)}
    with otel(bool(flags.get("otel"))) as provider:
        options = {**run_keywords(given, instrument=provider), "model": model, "tools": tools, "approve": later,
                   "on_halt": "return", "include_paths": include_paths}
        if not flags.get("no_cache") and "cache" not in (state.get("options") or {}):
            options["cache"] = cli.get("cache", True)  # a state written before options were recorded
        if "stop_at" not in (state.get("options") or {}) and cli.get("stop_at") is not None:
            options["stop_at"] = cli["stop_at"]  # a state written before options were recorded
        recorder = RunRecorder()
        try:
            result = asyncio.run(_drive_resume(state, decisions, display, stream, options, recorder))
        except BaseException as exc:  # SPEC §29: what failed is said, and -o written, as sd run does
            failed_summary(display, recorder, time.perf_counter() - started)
            if request.output is not None:
                write_json(request.output, recorder.record(exc))
            raise
    display.summary(result, time.perf_counter() - started)
    if request.output is not None:
        write_json(request.output, run_record(result))
    if request.as_json:
        sys.stdout.write(dumps(result.to_dict()) + "\n")
        sys.stdout.flush()
    if result.paused is not None:
        tools_given = flags.get("tools")
        cli = {**cli, "tools": str(Path(tools_given).resolve()) if tools_given else cli.get("tools"),
               "model": model if isinstance(model, str) else cli.get("model")}
        write_pause(pause_to, result.paused, cli)
        return report_pause(result.paused, pause_to, cli)
    return EXIT_HALTED if result.halted is not None else EXIT_OK


def _tools_file(request: ResumeRequest, cli: dict[str, Any]) -> Path | None:
    """--tools, else (with --trust-state) the state's; a state that names one otherwise is an error."""
    given = request.flags.get("tools")
    if given is not None:
        return Path(given)
    named = cli.get("tools")
    if not named:
        return None
    if request.trust_state:
        return Path(str(named))
    raise CliError(
        f"the paused run used the tools file {named}; sd resume imports only what its command line names: "
        f"pass --tools {named} (or --trust-state to load what the state names)"
    )


def _refuse_state_code(request: ResumeRequest, state: dict[str, Any]) -> None:
    """MCP servers (commands) and `module:factory` fallbacks the state's recorded options
    name start or import code: only with --trust-state, or when --mcp / --fallback replace them."""
    if request.trust_state:
        return
    from ..models.factory import factory_reference

    found = state.get("options")
    recorded: dict[str, Any] = found if isinstance(found, dict) else {}
    flags = request.flags
    given_mcp = flags.get("mcp") or flags.get("mcp_config")
    found_mcp = recorded.get("mcp")
    servers: list[Any] = found_mcp if isinstance(found_mcp, list) else []
    listed = ", ".join(str(s.get("name") if isinstance(s, Mapping) else s) for s in servers)
    named = [f"the MCP servers {listed}"] if recorded.get("mcp") and not given_mcp else []
    fallback = () if flags.get("fallback") else recorded.get("fallback") or ()
    for name in [fallback] if isinstance(fallback, str) else fallback:
        if isinstance(name, str) and ":" in name and factory_reference(name) is not None:
            named.append(f"the fallback model factory {name}")
    if named:
        raise CliError(f"the paused run used {' and '.join(named)}; sd resume starts or imports them only with "
                       "--trust-state (or when --mcp / --mcp-config / --fallback give them again)")


def _model(request: ResumeRequest, cli: dict[str, Any]) -> Any:
    """--model, else the state's model string; a `module:factory` one only with --trust-state."""
    if request.flags.get("model") is not None:
        return request.flags["model"]
    named = cli.get("model")
    if isinstance(named, str) and ":" in named and not request.trust_state:
        from ..models.factory import factory_reference

        if factory_reference(named) is not None:
            raise CliError(
                f"the paused run used the model factory {named}; sd resume imports only what its command line "
                f"names: pass --model {named} (or --trust-state to load what the state names)"
            )
    return named


async def _drive_resume(
    state: dict[str, Any], decisions: dict[str, Any], display: RunDisplay, stream: bool, options: dict[str, Any],
    recorder: RunRecorder,
) -> Any:
    from ..api import resume_incremental_async

    result = None
    with display:
        async for event in resume_incremental_async(state, decisions, stream=stream, **options):
            display.handle(event)
            recorder.see(event)
            if event.type == "processing_complete":
                result = event.result
            elif event.type == "processing_error":  # the generator ends quietly after it: the CLI reports it
                raise event.error
    if result is None:
        raise CliError("the run ended without a result", code=1)
    return result


def _server_names(flags: Mapping[str, Any], state: Mapping[str, Any]) -> list[str]:
    """The MCP servers of the resumed run: `--mcp`/`--mcp-config`, else those the state recorded."""
    given = load_mcp(flags.get("mcp") or (), flags.get("mcp_config"))
    if given is not None:
        from ..tools.mcp import resolve_servers

        return [server.name for server in resolve_servers(given)]
    return [server["name"] for server in (state.get("options") or {}).get("mcp") or ()]
