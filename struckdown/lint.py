"""The linter behind `sd check`, the playground's squiggles and the language server.

Lints work on the AST the runtime uses: undefined variables (when a context is
given), guards with nothing to judge or placed after what they should judge,
`use_tools=true` without tools, and limits a template asks for above the ceiling.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Diagnostic:
    path: str
    line: int
    column: int
    severity: str  # "error" | "warning" | "note" (a note is information, never a problem)
    message: str
    hint: str | None = None
    source_line: str = ""  # the template line it points at, shown with a caret under the column


#: Slots in one conversation (segment) from which `sd check` warns.
LONG_CONVERSATION = 500
#: bench case l (docs/performance.md, "Long conversations"): slots, CPU seconds through struckdown.
MEASURED_CONVERSATION = (200, 1.941)


def check_source(
    text: str,
    path: Path,
    context_names: set[str] | None,
    *,
    tools_given: bool,
    include_paths: Sequence[Path] = (),
    tool_names: Sequence[str] | None = None,
) -> list[Diagnostic]:
    """The diagnostics of a template's text, sorted by place. The text need not be the
    file's content (the playground checks the editor's buffer); `path` places includes
    and names the file. With `tool_names` (the tools a run would have: a --tools file's,
    MCP servers' as listed) every tool name in `budget=`, `approve=`, `tool_choice=` is
    checked against them."""
    from .environment import default_environment
    from .errors import TemplateSyntaxError

    try:
        program = default_environment().parse(text, template_path=path, include_paths=include_paths)
    except TemplateSyntaxError as exc:
        where = exc.filename if exc.filename and Path(exc.filename).resolve() != path.resolve() else str(path)
        return [Diagnostic(where, exc.line, exc.column, "error", exc.message, exc.hint, exc.source_line)]
    linter = Linter(str(path), program, text)
    if context_names is not None:
        linter.undefined_variables(context_names)
    else:
        linter.expected_variables()
    for segment in program.segments:
        linter.guard_placement(segment.nodes)
    linter.slot_options(tools_given)
    if tool_names is not None:
        linter.tool_names(tool_names)
    linter.long_conversations()
    return sorted(linter.found, key=lambda d: (d.path, d.line, d.column))


class Linter:
    """One pass of lints over a parsed program; `found` collects the diagnostics."""

    def __init__(self, path: str, program: Any, text: str) -> None:
        self.path = path
        self.program = program
        self.found: list[Diagnostic] = []
        self._lines: dict[str, list[str]] = {path: text.splitlines()}

    def add(self, pos: Any, severity: str, message: str, hint: str | None = None) -> None:
        where = pos.filename or self.path
        self.found.append(Diagnostic(where, pos.line, pos.column, severity, message, hint, self._line(where, pos.line)))

    def _line(self, path: str, line: int) -> str:
        if path not in self._lines:  # an included file
            try:
                self._lines[path] = Path(path).read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError):
                self._lines[path] = []
        lines = self._lines[path]
        return lines[line - 1] if 0 < line <= len(lines) else ""

    # -- variables ---------------------------------------------------------------
    def undefined_variables(self, context_names: set[str]) -> None:
        from .variables import missing

        for read in missing(self.program, context_names):
            message = f"undefined variable {read.name!r}: not in the context and not answered before"
            self.add(read.pos, "error", message, read.hint(context_names))

    def expected_variables(self) -> None:
        """Without a context: the names the context must provide, as notes."""
        from .variables import expected

        for read in expected(self.program):
            hint = read.hint() if read.answered_at is not None else None
            self.add(read.pos, "note", f"expects {read.name!r} from the context", hint)

    # -- guards ----------------------------------------------------------------
    Placement = tuple[bool, "str | None"]  # (text since the last slot?, the slot right before)

    def guard_placement(self, nodes: Sequence[Any], has_text: bool = False, after_slot: str | None = None) -> None:
        """A guard judges the text between the previous slot and itself: each node class
        moves the (text seen, slot before) state on."""
        state: Linter.Placement = (has_text, after_slot)
        for node in nodes:
            state = getattr(self, f"_placement_{type(node).__name__}")(node, state)

    def _placement_Text(self, node: Any, state: Placement) -> Placement:
        return (True, None) if node.source.strip() else state

    def _placement_Slot(self, node: Any, state: Placement) -> Placement:
        if not node.is_guard:
            return (False, node.key)
        has_text, after_slot = state
        if not has_text and after_slot is not None:
            self.add(
                node.pos,
                "warning",
                f"guard {node.key!r} placed after the text it should judge: it follows "
                f"[[{after_slot}]] with no text between, so it has nothing to read",
                f"move [[halt:{node.key}]] above the slot whose prompt it should check",
            )
        elif not has_text:
            self.add(
                node.pos,
                "error",
                f"guard {node.key!r} has no text above it to judge",
                "a guard's prompt is the text between the previous slot and the guard",
            )
        return (False, None)

    def _placement_If(self, node: Any, state: Placement) -> Placement:
        for branch in node.branches:
            self.guard_placement(branch.body, *state)
        return (True, None)  # which branch ran is unknown here

    def _placement_Together(self, node: Any, state: Placement) -> Placement:
        return (False, None)

    def _placement_Turn(self, node: Any, state: Placement) -> Placement:
        return (True, None)  # an explicit <user>/<assistant> turn is text to judge

    def _placement_Action(self, node: Any, state: Placement) -> Placement:
        return state

    def _placement_Instructions(self, node: Any, state: Placement) -> Placement:
        return state

    # -- slot options ----------------------------------------------------------------
    def tool_names(self, known: Sequence[str]) -> None:
        from .run.tool_checks import unknown_tools

        for problem in unknown_tools(self.program, known):
            self.add(problem.pos, "error", problem.message, problem.hint)
    def long_conversations(self) -> None:
        """A warning at the LONG_CONVERSATION-th slot of one segment: each request carries
        every turn before it, so the work grows with the square of the slots."""
        by_segment: dict[int, list[Any]] = {}
        for slot in self.program.slots():
            by_segment.setdefault(self.program.segment_of(slot.key), []).append(slot)
        for members in by_segment.values():
            if len(members) < LONG_CONVERSATION:
                continue
            slot, total = members[LONG_CONVERSATION - 1], len(members)
            slots, seconds = MEASURED_CONVERSATION
            self.add(
                slot.pos,
                "warning",
                f"{total:,} slots in one conversation: every request carries all the turns before it, so the work "
                f"grows with the square of the slots (measured: {seconds:.1f} s of CPU for {slots} slots, so about "
                f"{seconds * (total / slots) ** 2:.0f} s for {total:,}, before any model time; the prompt tokens, "
                "and so the cost, grow the same way; see \"Long conversations\" in docs/performance.md)",
                "split it with <checkpoint>: a segment's requests do not carry the turns of the segments before it",
            )

    def slot_options(self, tools_given: bool) -> None:
        for slot in self.program.slots():
            plan = self.program.plans[slot]
            self._choice_like_required(slot, plan)
            if plan.control.get("use_tools") is True and not tools_given:
                self.add(
                    slot.pos,
                    "warning",
                    f"slot {slot.key!r} sets use_tools=true but no --tools file was given",
                    "the run fails unless tools are passed (sd run --tools FILE.py, or tools=[…] in Python)",
                )
            if plan.asks_above_ceiling:
                for option, used in (("max_iter", plan.limits.request_limit), ("max_calls", plan.limits.tool_calls_limit)):
                    asked = plan.control.get(option)
                    if isinstance(asked, int) and used is not None and asked > used:
                        self.add(
                            slot.pos,
                            "warning",
                            f"slot {slot.key!r} asks for {option}={asked} above the default ceiling {used}; "
                            f"{used} will be used",
                        )

    def _choice_like_required(self, slot: Any, plan: Any) -> None:
        """`[[pick:x|a, b, requird]]`: a choice that is a slip of `required` is taken as a
        choice (a choice may be any word), so it gets a warning, not an error."""
        from .types.table import POSITIONAL_TYPES  # pick, score, decide: their words are choices

        if slot.type_name not in POSITIONAL_TYPES:
            return
        for choice in plan.positional:
            if isinstance(choice, str) and choice != "required" and difflib.get_close_matches(choice, ["required"], cutoff=0.8):
                self.add(
                    slot.pos,
                    "warning",
                    f"slot {slot.key!r}: the choice {choice!r} looks like a slip of 'required'",
                    f"write 'required' to make the slot required; a choice {choice!r} is kept as written",
                )
