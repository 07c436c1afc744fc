"""`sd resume FILE`: decide the calls a paused run waits for, and continue it (SPEC §12).

The state file is what `sd run … --pause-to FILE` wrote: the run's template, context and
finished slots, the paused calls, and the flags that run had (model, tools file). A call
that needs approval later in the resumed run pauses it again into FILE (exit code 4),
unless --approve-all or --deny-all decides every call.
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
from .costs import otel
from .display import RunDisplay, make_console
from .errors import EXIT_HALTED, EXIT_OK, CliError
from .io import dumps, write_json
from .keywords import run_keywords
from .loading import load_mcp, load_tools
from .run_cmd import run_record


@dataclass
class ResumeRequest:
    state_file: Path
    approve: Sequence[str] = ()
    deny: Sequence[str] = ()
    approve_all: bool = False
    deny_all: bool = False
    flags: Mapping[str, Any] = field(default_factory=dict)  # the RUN_FLAGS given: they override the paused run's
    output: Path | None = None
    as_json: bool = False
    stream: bool | None = None
    pause_to: Path | None = None



def resume_command(request: ResumeRequest) -> int:
    from ..approval_state import ApprovalRequest, read_state
    from ..environment import default_environment

    state = read_state_file(request.state_file)
    cli = dict((state.get("extra") or {}).get("cli") or {})
    flags = request.flags
    tools_file = flags.get("tools") or (Path(cli["tools"]) if cli.get("tools") else None)
    tools = load_tools(tools_file)
    model = flags.get("model") if flags.get("model") is not None else cli.get("model")
    requests = [ApprovalRequest(r["id"], r["slot"], r["tool_name"], dict(r["arguments"])) for r in state["requests"]]
    console = make_console(sys.stderr if request.as_json else sys.stdout)
    display = RunDisplay(console, {}, ())
    decisions = decisions_from_flags(request, requests, display)
    names = default_environment().engine_caches().toolbox(tuple(tools)).names
    try:
        read_state(state, decisions, tools=names, servers=_server_names(flags, state))  # before any model call
    except ValueError as exc:
        raise CliError(str(exc)) from None
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
        result = asyncio.run(_drive_resume(state, decisions, display, stream, options))
    display.summary(result, time.perf_counter() - started)
    if request.output is not None:
        write_json(request.output, run_record(result))
    if request.as_json:
        sys.stdout.write(dumps(result.to_dict()) + "\n")
        sys.stdout.flush()
    if result.paused is not None:
        write_pause(pause_to, result.paused, cli)
        return report_pause(result.paused, pause_to)
    return EXIT_HALTED if result.halted is not None else EXIT_OK


async def _drive_resume(
    state: dict[str, Any], decisions: dict[str, Any], display: RunDisplay, stream: bool, options: dict[str, Any]
) -> Any:
    from ..api import resume_incremental_async

    result = None
    with display:
        async for event in resume_incremental_async(state, decisions, stream=stream, **options):
            display.handle(event)
            if event.type == "processing_complete":
                result = event.result
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
