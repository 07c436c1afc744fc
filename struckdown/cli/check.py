"""`sd check`: parse and lint templates without a model (the linter is `struckdown.lint`)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..lint import Diagnostic, check_source
from ..wording import counted
from .errors import EXIT_ERROR, EXIT_OK
from .io import load_context, read_template
from .loading import command_environment, load_tools


@dataclass(frozen=True)
class FlowArgs:
    """`sd check --flow`'s labels and places (SPEC §33, docs/flow.md)."""

    private: tuple[str, ...] = ()
    untrusted: tuple[str, ...] = ()
    model: str | None = None
    local_models: tuple[str, ...] = ()
    remote_models: tuple[str, ...] = ()


def flow_args(flow: bool, private: str | None, untrusted: str | None, model: str | None,
              local_models: str | None, remote_models: str | None) -> FlowArgs | None:
    """The flags of `sd check --flow`, through the run options' own checks; --private and the
    rest without --flow are an error (never accepted and ignored)."""
    from ..run_options import OPTIONS
    from .errors import CliError

    given = {"--private": private, "--untrusted": untrusted, "--model": model, "--local-models": local_models,
             "--remote-models": remote_models}
    if not flow:
        named = [flag for flag, value in given.items() if value is not None]
        if named:
            raise CliError(f"{named[0]} is a flag of sd check --flow: add --flow")
        return None

    def checked(flag: str, option: str, value: str | None) -> tuple[str, ...]:
        try:
            return tuple(OPTIONS[option].check(value))  # type: ignore[misc]
        except ValueError as exc:
            raise CliError(f"{flag}: {exc}") from None

    return FlowArgs(checked("--private", "private", private), checked("--untrusted", "untrusted", untrusted), model,
                    checked("--local-models", "local_models", local_models),
                    checked("--remote-models", "remote_models", remote_models))


def check_command(
    templates: Sequence[Path],
    context_file: Path | None,
    pairs: Sequence[str],
    tools_file: Path | None,
    include_paths: Sequence[Path],
    mcp_tools: Sequence[str] = (),
    flow: FlowArgs | None = None,
) -> int:
    command_environment()  # parsed templates kept in the cache folder (the linter parses with it)
    given_context = context_file is not None or bool(pairs)
    names = set(load_context(context_file, pairs)) if given_context else None
    tools = load_tools(tools_file)
    known = None
    if tools_file is not None or mcp_tools:  # the run's tool names: pydantic-ai only when there are tools
        from ..tools import tool_name

        known = [tool_name(tool) for tool in tools] + list(mcp_tools)
    diagnostics: list[Diagnostic] = []
    flow_errors = 0
    for path in templates:
        found = check_template(path, names, tools_given=bool(known), include_paths=include_paths, tool_names=known)
        diagnostics += found
        for diagnostic in found:
            sys.stdout.write(format_diagnostic(diagnostic) + "\n")
        if flow is not None and not any(d.severity == "error" for d in found):
            for line in flow_lines(path, flow, tools, include_paths, mcp=bool(mcp_tools)):
                sys.stdout.write(line + "\n")
                flow_errors += 1
    errors = sum(d.severity == "error" for d in diagnostics) + flow_errors
    warnings = sum(d.severity == "warning" for d in diagnostics)
    what = counted(len(templates), "template")
    if errors or warnings:
        sys.stderr.write(f"{counted(errors, 'error')}, {counted(warnings, 'warning')} in {what}\n")
    else:
        sys.stderr.write(f"{what} checked: no problems found\n")
    return EXIT_ERROR if errors else EXIT_OK


def mcp_tool_names(servers: Sequence[str], config: Path | None) -> tuple[str, ...]:
    """The tool names of the `--mcp` / `--mcp-config` servers, as slots see them
    (started, listed, closed); () without servers."""
    from .loading import load_mcp

    mcp = load_mcp(servers, config)
    if mcp is None:
        return ()
    import anyio

    from ..tools.mcp import MCPSessions

    async def listed() -> tuple[str, ...]:
        async with MCPSessions(mcp) as sessions:
            tools = await sessions.slot_tools("sd check", None)
            return tuple(sorted(tools.names))

    return anyio.run(listed)


def flow_lines(path: Path, flow: FlowArgs, tools: Sequence[object], include_paths: Sequence[Path], *,
               mcp: bool) -> list[str]:
    """`path:line:col: error: …` for every refusal of SPEC §33 (none without labels)."""
    if not flow.private and not flow.untrusted:
        return []
    from ..environment import default_environment
    from ..flow import template_refusals

    # the Program the lint just made (the default Environment's cache): not parsed again
    program = default_environment().parse(read_template(path), template_path=path, include_paths=include_paths)
    found = template_refusals(
        program, private=flow.private, untrusted=flow.untrusted, model=flow.model, tools=tools, mcp=mcp,
        local_models=flow.local_models, remote_models=flow.remote_models,
    )
    return [f"{path}:{e.line}:{e.column}: error: {e.message}" for e in found]


def check_template(
    path: Path,
    context_names: set[str] | None,
    *,
    tools_given: bool,
    include_paths: Sequence[Path] = (),
    tool_names: Sequence[str] | None = None,
) -> list[Diagnostic]:
    return check_source(
        read_template(path), path, context_names, tools_given=tools_given, include_paths=include_paths,
        tool_names=tool_names,
    )


def format_diagnostic(diagnostic: Diagnostic) -> str:
    """`path:line:column: severity: message`, the source line with a caret under the
    column, and the hint: as `sd check` prints it (control characters made visible)."""
    from .text import visible

    d = diagnostic
    text = f"{d.path}:{d.line}:{d.column}: {d.severity}: {d.message}"
    if d.source_line.strip():
        shown = visible(d.source_line.expandtabs(1))
        text += f"\n    {shown}\n    {' ' * (max(d.column, 1) - 1)}^"
    return text + (f"\n    hint: {d.hint}" if d.hint else "")

