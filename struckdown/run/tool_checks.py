"""Tool names written in slot options (`budget=`, `approve=`, `tool_choice=`) that name no
tool of the run: one positioned error with a close match, before any model call (the run),
and the same diagnostics for `sd check --tools` / the language server (lint)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..syntax.nodes import JinjaValue

#: `tool_choice=` words that are not tool names (SPEC §14)
CHOICE_WORDS = ("auto", "required", "none")
NO_TOOLS = "no tools were given: pass tools=[…] (or --tools FILE.py)"


@dataclass(frozen=True)
class UnknownTool:
    slot: str
    option: str  # budget | approve | tool_choice
    name: str  # the name written
    pos: Any  # where the option's value starts (syntax.nodes.Pos)
    hint: str

    @property
    def message(self) -> str:
        return f"{self.option}= names {self.name!r}, which is not a tool of this run"


def _written(option: str, value: Any) -> list[str]:
    """The tool names a static option value names."""
    from ..slot_options import tool_names
    from .budgets import budget_option

    try:
        if option == "budget":
            return list(budget_option(value) or {})
        if option == "approve":
            return [n for n in tool_names(value) if n != "*"]
    except ValueError:
        return []  # a malformed value is the option checker's error, not this one
    return [] if value in CHOICE_WORDS else [str(value)]


def unknown_tools(
    program: Any, known: Sequence[str], *, mcp: bool = False, options: Sequence[str] = ("budget", "approve", "tool_choice")
) -> Iterator[UnknownTool]:
    """Every static tool name of every slot option that is not in `known` (document order;
    `{{ }}` values are checked when their slot runs). With `mcp` (the run has MCP servers
    whose tools are not in `known`) nothing is checked: the servers' tools are listed later."""
    if mcp:
        return
    from ..errors import close_match

    listing = list(known)
    for plan in program.plans.values():
        if "mcp" in plan.control:
            continue  # its tools are the MCP servers' too: known when they are listed (sd check --mcp)
        for option in plan.slot.options:
            if option.key == "budget" and not plan.use_tools:
                continue
            if option.key not in options or isinstance(option.value, JinjaValue):
                continue
            value = plan.control.get(option.key, option.value)
            for name in _written(option.key, value):
                if name not in listing:
                    hint = close_match(name, listing, "the run's tools") if listing else NO_TOOLS
                    yield UnknownTool(plan.key, option.key, name, option.value_pos or option.pos, hint)


def check_tool_names(program: Any, known: Sequence[str], *, mcp: bool = False) -> None:
    """The first unknown tool name of `budget=` or `tool_choice=` as a positioned
    TemplateSyntaxError (the run checks `approve=` names with its approvals, MCP tools included)."""
    from ..syntax.source import SourceMap

    for problem in unknown_tools(program, known, mcp=mcp, options=("budget", "tool_choice")):
        template = program.template
        source = SourceMap(template.source, template.filename).for_file(problem.pos.filename)
        raise source.error(problem.message, problem.pos.line, problem.pos.column, problem.hint)
